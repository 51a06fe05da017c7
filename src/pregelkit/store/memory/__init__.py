"""A store kept in process memory: for tests, notebooks and single-process apps.

Values are deep-copied on the way in and on the way out, so mutating a dict
after ``put`` or after ``get`` cannot change what the store holds; that is
what a persistent store does, and code tested against this one should not
start to behave differently when it moves to one.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pregelkit.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["InMemoryStore"]

_MISSING: Any = object()

# Missing keys match no operator except $ne (as in MongoDB), and values that
# cannot be ordered against the operand (None < 3) simply do not match.
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


@dataclass
class _Record:
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    seq: int
    """Write order; search sorts on it rather than on ``updated_at`` because
    two writes can share a clock tick."""


class InMemoryStore(BaseStore):
    """A thread-safe :class:`~pregelkit.store.base.BaseStore` held in a dict.

    A batch runs in order under one lock, so other threads see all of it or
    none of it. ``search`` returns the most recently written items first.
    Items never expire (``put(ttl=...)`` is refused) and there is no semantic
    search; passing ``index=`` raises :class:`NotImplementedError`.
    """

    def __init__(self, *, index: Mapping[str, Any] | None = None) -> None:
        if index is not None:
            raise NotImplementedError(
                "InMemoryStore(index=...) configures semantic search, which pregelkit "
                "does not provide (it has no embeddings dependency); drop index="
            )
        self._lock = threading.Lock()
        self._data: dict[tuple[str, ...], dict[str, _Record]] = {}
        self._seq = itertools.count()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; see :meth:`BaseStore.batch`."""
        checked = self.validate_ops(ops)
        with self._lock:
            return [self._run(op) for op in checked]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; memory access does not block, so no thread hop."""
        return self.batch(ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            record = self._data.get(op.namespace, {}).get(op.key)
            if record is None:
                return None
            return Item(
                value=deepcopy(record.value),
                key=op.key,
                namespace=op.namespace,
                created_at=record.created_at,
                updated_at=record.updated_at,
            )
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._list_namespaces(op)

    def _put(self, op: PutOp) -> None:
        records = self._data.get(op.namespace)
        if op.value is None:
            if records is not None:
                records.pop(op.key, None)
                if not records:
                    del self._data[op.namespace]
            return
        now = datetime.now(UTC)
        if records is None:
            records = self._data[op.namespace] = {}
        previous = records.get(op.key)
        records[op.key] = _Record(
            value=deepcopy(op.value),
            created_at=now if previous is None else previous.created_at,
            updated_at=now,
            seq=next(self._seq),
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        depth = len(op.namespace_prefix)
        hits = [
            (namespace, key, record)
            for namespace, records in self._data.items()
            if namespace[:depth] == op.namespace_prefix
            for key, record in records.items()
            if op.filter is None or _matches(record.value, op.filter)
        ]
        hits.sort(key=lambda hit: hit[2].seq, reverse=True)
        return [
            SearchItem(namespace, key, deepcopy(record.value), record.created_at, record.updated_at)
            for namespace, key, record in hits[op.offset : op.offset + op.limit]
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        found = {
            namespace[: op.max_depth] if op.max_depth is not None else namespace
            for namespace in self._data
            if all(_namespace_matches(namespace, condition) for condition in conditions)
        }
        return sorted(found)[op.offset : op.offset + op.limit]


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = condition.path
    if len(path) > len(namespace):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(pattern in ("*", label) for pattern, label in zip(path, labels))


def _matches(value: dict[str, Any], spec: dict[str, Any]) -> bool:
    for field, expected in spec.items():
        actual = value.get(field, _MISSING)
        if (
            isinstance(expected, dict)
            and expected
            and all(isinstance(k, str) and k.startswith("$") for k in expected)
        ):
            if not all(_compare(name, actual, operand) for name, operand in expected.items()):
                return False
        elif actual is _MISSING or actual != expected:
            return False
    return True


def _compare(name: str, actual: Any, operand: Any) -> bool:
    if actual is _MISSING:
        return name == "$ne"
    try:
        return bool(_COMPARE[name](actual, operand))
    except TypeError:
        return False
