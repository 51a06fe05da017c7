r"""What a search filter means, decided once for every store.

A filter maps a key to an expected value or to ``{operator: operand}``. A key
is a path: ``"meta.author"`` looks inside the ``meta`` object (dots always
step into objects, never into lists). The rules, the same in memory, in
SQLite and in PostgreSQL:

- a missing key reads as ``null``: ``{"k": None}`` matches a missing ``k``,
  and ``{"k": {"$ne": 1}}`` matches it too;
- ``$eq``/``$ne`` compare as JSON: ``true`` is not ``1``, ``1`` is ``1.0``,
  objects compare key by key whatever their order, lists item by item;
- ``$gt``/``$gte``/``$lt``/``$lte`` take a number or a string, and match
  only values of the same kind (numbers by value, strings by code point);
  anything else (``"old" > 3``) does not match. An infinite operand
  compares as in Python (every number is below ``inf``), a NaN equals and
  orders with nothing.

Keys and operands reach SQL only as bound parameters. A key part that cannot
be addressed the same way in every store (empty, or containing ``"``, ``\``
or a control character) is refused with a ``ValueError`` before anything
runs.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "FILTER_OPERATORS",
    "Condition",
    "canonical_json",
    "has_nul",
    "matches",
    "parse_filter",
    "for_sql",
]

Operator = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]
FILTER_OPERATORS: frozenset[str] = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
ORDERING: frozenset[str] = frozenset({"$gt", "$gte", "$lt", "$lte"})
_INT64 = (-(2**63), 2**63)


@dataclass(frozen=True, slots=True)
class Condition:
    path: tuple[str, ...]
    op: Operator
    operand: Any


def parse_filter(spec: object) -> list[Condition]:
    """The conditions of a filter, every key and operand checked."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise TypeError(
            f"filter must be a dict of value key -> expected value, got {type(spec).__name__}"
        )
    conditions: list[Condition] = []
    for key, expected in spec.items():
        path = _parse_key(key)
        operators = (
            [name for name in expected if isinstance(name, str) and name.startswith("$")]
            if isinstance(expected, dict)
            else []
        )
        if not operators:
            _check_operand(key, "$eq", expected)
            conditions.append(Condition(path, "$eq", expected))
            continue
        assert isinstance(expected, dict)
        if len(operators) != len(expected):
            raise ValueError(
                f"filter on {key!r} mixes operators and plain keys: {expected!r}; use "
                f"either only operators like {{'$gt': 1}} or a plain dict to compare equal"
            )
        unknown = sorted(set(operators) - FILTER_OPERATORS)
        if unknown:
            raise ValueError(
                f"filter on {key!r} uses unknown operator(s) {unknown}; "
                f"supported: {sorted(FILTER_OPERATORS)}"
            )
        for name, operand in expected.items():
            _check_operand(key, name, operand)
            conditions.append(Condition(path, name, operand))
    return conditions


def _parse_key(key: object) -> tuple[str, ...]:
    if not isinstance(key, str):
        raise ValueError(f"Invalid filter key {key!r}: filter keys must be strings")
    parts = tuple(key.split("."))
    for part in parts:
        # JSON escapes exactly these characters; without them a key reads the
        # same in every store's JSON path syntax.
        if not part or any(char in '"\\' or char < " " for char in part):
            raise ValueError(
                f"Invalid filter key {key!r}: a key is a path of object fields joined by '.', "
                "each non-empty and without '\"', '\\' or control characters"
            )
    return parts


def _check_operand(key: str, op: str, operand: Any) -> None:
    if op in ORDERING and (isinstance(operand, bool) or not isinstance(operand, int | float | str)):
        raise ValueError(
            f"filter on {key!r}: {op} compares with a number or a string, "
            f"got {type(operand).__name__} {operand!r}"
        )
    if isinstance(operand, int) and op not in ORDERING and not _INT64[0] <= operand < _INT64[1]:
        raise ValueError(
            f"filter on {key!r}: {op} operand {operand} does not fit in 64 bits, which SQL "
            "stores compare; pass it as a float or a string"
        )
    if isinstance(operand, float) and not math.isfinite(operand):
        return  # no stored (JSON) value is one: see for_sql
    try:
        json.dumps(operand, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"filter on {key!r}: {op} operand {operand!r} is not a JSON value ({exc})"
        ) from None


def has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character anywhere. The SQL stores
    refuse to store such values (PostgreSQL cannot, SQLite's JSON functions
    cut strings at NUL), so a filter operand holding one matches nothing."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def _as_float_bound(condition: Condition) -> Condition:
    """An ordering on an integer beyond 64 bits (SQLite would not bind it) as
    the same ordering on a float. ``f``, the float nearest the integer ``n``,
    may be above or below it, but no float lies strictly between them, so
    for every stored number ``x < n`` is ``x <= f`` if ``f < n`` and ``x < f``
    if ``f > n`` (and alike for the other operators)."""
    n = condition.operand
    try:
        f = float(n)
    except OverflowError:
        f = math.inf if n > 0 else -math.inf
    op = condition.op
    if f < n and op in ("$lt", "$lte"):
        op = "$lte"
    elif f > n and op in ("$lt", "$lte"):
        op = "$lt"
    elif f > n:
        op = "$gte"
    elif f < n:
        op = "$gt"
    return Condition(condition.path, op, f)


def for_sql(conditions: list[Condition]) -> list[Condition] | None:
    """``conditions`` for a store that holds only JSON: no NUL, no infinity
    or NaN. ``None`` when they can match nothing.

    An ``$eq`` on a value no stored value can be matches nothing, an ``$ne``
    everything (dropped); ``t > p + NUL + ...`` holds exactly when ``t > p``;
    every stored number is below ``inf`` and above ``-inf``, and no number is
    ordered with NaN."""
    kept: list[Condition] = []
    for condition in conditions:
        operand, op = condition.operand, condition.op
        if isinstance(operand, int) and not _INT64[0] <= operand < _INT64[1]:
            condition = _as_float_bound(condition)
            operand, op = condition.operand, condition.op
        if isinstance(operand, float) and not math.isfinite(operand):
            if op == "$ne":
                continue
            every_number = (op in ("$lt", "$lte") and operand > 0) or (
                op in ("$gt", "$gte") and operand < 0
            )
            if not every_number:  # $eq, NaN, or beyond the infinity
                return None
            kept.append(Condition(condition.path, "$gte", -sys.float_info.max))
        elif not has_nul(operand):
            kept.append(condition)
        elif op == "$eq":
            return None
        elif op in ORDERING:
            prefix = operand[: operand.index("\x00")]
            bound: Operator = "$gt" if op in ("$gt", "$gte") else "$lte"
            kept.append(Condition(condition.path, bound, prefix))
    return kept


def canonical_json(value: Any) -> str:
    """One text per JSON value: sorted keys, integral floats as integers."""
    return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


_MISSING: Any = object()


def matches(value: dict[str, Any], conditions: list[Condition]) -> bool:
    """Whether a document satisfies every condition (the in-memory reading of
    the rules the SQL stores compile)."""
    for condition in conditions:
        actual: Any = value
        for part in condition.path:
            actual = actual.get(part, _MISSING) if isinstance(actual, dict) else _MISSING
            if actual is _MISSING:
                break
        if not _holds(condition.op, None if actual is _MISSING else actual, condition.operand):
            return False
    return True


def _holds(op: str, actual: Any, operand: Any) -> bool:
    if op == "$eq":
        return json_equal(actual, operand)
    if op == "$ne":
        return not json_equal(actual, operand)
    if isinstance(operand, str):
        if not isinstance(actual, str):
            return False
    elif isinstance(actual, bool) or not isinstance(actual, int | float):
        return False
    if op == "$gt":
        return bool(actual > operand)
    if op == "$gte":
        return bool(actual >= operand)
    if op == "$lt":
        return bool(actual < operand)
    return bool(actual <= operand)


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is None and b is None
    return type(a) is type(b) and bool(a == b)
