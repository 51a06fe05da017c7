"""What SqliteStore and PostgresStore (sync and async) do, written once.

A batch is a *plan*: a generator that yields the :class:`Statement` s to run
and is sent back their rows. The stores only run those statements over
their own connections (one transaction per batch); which statements run,
with which parameters, in which order, and how rows become items is decided
here, over a :class:`Dialect` that knows each database's SQL.

Every value a caller gives (namespace, key, filter key and operand, TTL,
query vector) reaches SQL as a bound parameter; the SQL text depends only on
the shape of the op (how many filter conditions, whether there is a query).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

from pregelkit.store import _namespaces
from pregelkit.store._filter import Condition, for_sql, has_nul, parse_filter
from pregelkit.store._index import Embedded
from pregelkit.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["Dialect", "Plan", "Statement", "adrive", "drive", "run_batch", "sweep"]

Deserializer = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Statement:
    """``fetch``: ``"one"`` sends back the first row (or ``None``), ``"all"``
    every row, ``"many"`` runs the statement once per parameter row,
    ``"count"`` sends back the number of rows changed. ``later``: a write
    a read-only batch makes (restarting TTLs), which a store may run in a
    transaction of its own after the batch's."""

    sql: str
    params: Any = ()
    fetch: Literal["one", "all", "many", "count"] | None = None
    later: bool = False


Plan: TypeAlias = Generator[Statement, Any, Any]

# Columns every item query selects, in this order.
ITEM_COLUMNS = "prefix, key, value, created_at, updated_at, ttl_minutes"


class Dialect(ABC):
    """One database's SQL for the plans."""

    select_item: str
    """Params: namespace text, key, now; one row of ``ITEM_COLUMNS``."""
    upsert_item: str
    """Params: namespace text, key, value, now, now, expires_at, ttl_minutes."""
    delete_item: str
    delete_vectors: str
    insert_vector: str
    """Params per row: namespace text, key, field, vector."""
    refresh_ttl: str
    """Params per row: now, namespace text, key."""
    select_namespaces: str
    """Params: now; one namespace text per row."""
    select_namespaces_under: str
    """Params: now, prefix text, lower bound, upper bound."""
    sweep_vectors: str
    """Params: now."""
    sweep: str
    """Params: now."""

    def refresh(self, now: Any, keys: list[tuple[str, str]]) -> Statement:
        """The statement restarting the TTLs of ``keys`` (namespace text,
        key): ``refresh_ttl`` once per key."""
        return Statement(self.refresh_ttl, [(now, text, key) for text, key in keys], "many", True)

    @abstractmethod
    def time(self, moment: datetime) -> Any: ...

    @abstractmethod
    def from_time(self, value: Any) -> datetime: ...

    @abstractmethod
    def encode_value(self, value: dict[str, Any]) -> str: ...

    @abstractmethod
    def encode_vector(self, vector: list[float]) -> Any: ...

    @abstractmethod
    def search(
        self,
        op: SearchOp,
        conditions: list[Condition],
        query: list[float] | None,
        now: Any,
    ) -> tuple[str, list[Any]]:
        """SQL and params returning ``ITEM_COLUMNS`` plus a score column."""


class Clock:
    """Write times that strictly increase within a process, so "newest
    first" is the order of the writes even within one clock tick."""

    def __init__(self) -> None:
        self._last = datetime.min.replace(tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            now = datetime.now(UTC)
            if now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last = now
            return now


clock = Clock()


def run_batch(
    dialect: Dialect,
    ops: Sequence[Op],
    embedded: Embedded | None,
    deserialize: Deserializer,
) -> Plan:
    """The plan of one batch; returns one result per op."""
    results: list[Result] = []
    for position, op in enumerate(ops):
        if isinstance(op, GetOp):
            results.append((yield from _get(dialect, op, deserialize)))
        elif isinstance(op, PutOp):
            yield from _put(dialect, op, embedded, position)
            results.append(None)
        elif isinstance(op, SearchOp):
            query = None if embedded is None else embedded.queries.get(position)
            results.append((yield from _search(dialect, op, query, deserialize)))
        else:
            results.append((yield from _list_namespaces(dialect, op)))
    return results


def one_statement(ops: Sequence[Op], indexed: bool) -> bool:
    """Whether the plan of ``ops`` writes with at most one statement (its
    TTL refreshes aside, which may commit on their own): such a batch needs
    no transaction block, and a server store saves the BEGIN and COMMIT
    round trips."""
    if len(ops) != 1:
        return False
    return not (indexed and isinstance(ops[0], PutOp))


def _get(dialect: Dialect, op: GetOp, deserialize: Deserializer) -> Plan:
    now = datetime.now(UTC)
    text = _namespaces.encode(op.namespace)
    row = yield Statement(dialect.select_item, (text, op.key, dialect.time(now)), "one")
    if row is None:
        return None
    if op.refresh_ttl and row[5] is not None:
        yield dialect.refresh(dialect.time(now), [(text, op.key)])
    return _item(dialect, row, deserialize)


def _put(dialect: Dialect, op: PutOp, embedded: Embedded | None, position: int) -> Plan:
    text = _namespaces.encode(op.namespace)
    if op.value is None:
        yield Statement(dialect.delete_item, (text, op.key))
        if embedded is not None:
            yield Statement(dialect.delete_vectors, (text, op.key))
        return
    now = clock()
    expires = None if op.ttl is None else dialect.time(now + timedelta(minutes=op.ttl))
    stamp = dialect.time(now)
    params = (text, op.key, dialect.encode_value(op.value), stamp, stamp, expires, op.ttl)
    yield Statement(dialect.upsert_item, params)
    if embedded is not None:
        yield Statement(dialect.delete_vectors, (text, op.key))
        rows = [
            (text, op.key, field, dialect.encode_vector(vector))
            for field, vector in embedded.documents.get(position, [])
        ]
        if rows:
            yield Statement(dialect.insert_vector, rows, "many")


def _search(
    dialect: Dialect, op: SearchOp, query: list[float] | None, deserialize: Deserializer
) -> Plan:
    now = datetime.now(UTC)
    conditions = for_sql(parse_filter(op.filter))
    if conditions is None:
        return []
    sql, params = dialect.search(op, conditions, query, dialect.time(now))
    rows = yield Statement(sql, params, "all")
    if op.refresh_ttl:
        stale = [(row[0], row[1]) for row in rows if row[5] is not None]
        if stale:
            yield dialect.refresh(dialect.time(now), stale)
    return [
        SearchItem(
            _namespaces.decode(row[0]),
            row[1],
            deserialize(row[2]),
            dialect.from_time(row[3]),
            dialect.from_time(row[4]),
            None if row[6] is None else float(row[6]),
        )
        for row in rows
    ]


def _list_namespaces(dialect: Dialect, op: ListNamespacesOp) -> Plan:
    now = dialect.time(datetime.now(UTC))
    prefix = _namespaces.literal_prefix(op)
    if prefix:
        rows = yield Statement(
            dialect.select_namespaces_under, (now, *_namespaces.prefix_bounds(prefix)), "all"
        )
    else:
        rows = yield Statement(dialect.select_namespaces, (now,), "all")
    return _namespaces.list_namespaces((_namespaces.decode(row[0]) for row in rows), op)


def _item(dialect: Dialect, row: Sequence[Any], deserialize: Deserializer) -> Item:
    return Item(
        value=deserialize(row[2]),
        key=row[1],
        namespace=_namespaces.decode(row[0]),
        created_at=dialect.from_time(row[3]),
        updated_at=dialect.from_time(row[4]),
    )


def sweep(dialect: Dialect) -> Plan:
    """Delete expired items (and their vectors); returns how many."""
    now = dialect.time(datetime.now(UTC))
    yield Statement(dialect.sweep_vectors, (now,))
    count = yield Statement(dialect.sweep, (now,), "count")
    return int(count or 0)


def encode_json(value: dict[str, Any]) -> str:
    """``value`` as the JSON text the SQL stores keep, or a clear error."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"value {value!r} cannot be stored as JSON ({exc}); store JSON data: dicts, "
            "lists, strings, finite numbers, booleans and None"
        ) from None
    if "\\u0000" in text and has_nul(value):
        raise ValueError(
            "the value has a string containing a NUL character, which SQL stores cannot "
            "keep or compare; remove it or encode the string (e.g. base64)"
        )
    return text


def drive(plan: Plan, execute: Callable[[Statement], Any]) -> Any:
    """Run ``plan``, performing each statement with ``execute``."""
    try:
        statement = next(plan)
        while True:
            statement = plan.send(execute(statement))
    except StopIteration as done:
        return done.value


async def adrive(plan: Plan, execute: Callable[[Statement], Awaitable[Any]]) -> Any:
    """:func:`drive` with an async ``execute``."""
    try:
        statement = next(plan)
        while True:
            statement = plan.send(await execute(statement))
    except StopIteration as done:
        return done.value
