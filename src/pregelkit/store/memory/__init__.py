"""A store kept in process memory: for tests, notebooks and single-process apps.

Values are deep-copied on the way in and on the way out, so mutating a dict
after ``put`` or after ``get`` cannot change what the store holds; that is
what a persistent store does, and code tested against this one should not
start to behave differently when it moves to one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pregelkit.store import _index
from pregelkit.store._filter import matches, parse_filter
from pregelkit.store._namespaces import list_namespaces
from pregelkit.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["InMemoryStore"]


@dataclass
class _Record:
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    vectors: list[list[float]]
    """Normalized; empty when the item was not embedded."""


class InMemoryStore(BaseStore):
    """A thread-safe :class:`~pregelkit.store.base.BaseStore` held in a dict.

    A batch runs under one lock, so other threads see all of it or none of
    it; its reads see the store as it was before its writes (see
    :meth:`BaseStore.batch`). ``search`` returns items in LangGraph's order for this store:
    namespaces in the order they were first written, items in the order they
    were created (rewriting keeps an item's place); with ``query`` and an
    ``index``, the most similar first. Items never expire (``put(ttl=...)``
    is refused).

    ``index={"embed": f, "dims": n, "fields": [...]}`` turns on semantic
    search: ``f`` maps a list of texts to a list of ``n``-long vectors (or
    is an object with ``embed_documents``/``embed_query``), and ``fields``
    are the paths of the texts to embed (``["$"]``, the whole document, by
    default).
    """

    def __init__(self, *, index: IndexConfig | Mapping[str, Any] | None = None) -> None:
        self._index = None if index is None else _index.Index(index)
        self.index_config: IndexConfig | None = None if index is None else dict(index)  # type: ignore[assignment]
        self.embeddings = None if self._index is None else self._index.user_embeddings
        self._lock = threading.Lock()
        # Empty namespaces keep their entry: their place in the search order.
        self._data: dict[tuple[str, ...], dict[str, _Record]] = {}

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``; see :meth:`BaseStore.batch`."""
        checked = self.validate_ops(ops)
        return self._run(checked, _index.embed(self._index, checked))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``; only the embedder, if any, is awaited."""
        checked = self.validate_ops(ops)
        return self._run(checked, await _index.aembed(self._index, checked))

    def _run(self, ops: list[Op], embedded: _index.Embedded | None) -> list[Result]:
        # Reads first, then the last write to each key: what every store does.
        last = {(op.namespace, op.key): p for p, op in enumerate(ops) if isinstance(op, PutOp)}
        with self._lock:
            results = [
                None if isinstance(op, PutOp) else self._op(position, op, embedded)
                for position, op in enumerate(ops)
            ]
            for position in sorted(last.values()):
                self._op(position, ops[position], embedded)
        return results

    def _op(self, position: int, op: Op, embedded: _index.Embedded | None) -> Result:
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
            vectors = [] if embedded is None else embedded.documents.get(position, [])
            self._put(op, [vector for _, vector in vectors])
            return None
        if isinstance(op, SearchOp):
            query = None if embedded is None else embedded.queries.get(position)
            return self._search(op, query)
        return list_namespaces((ns for ns, records in self._data.items() if records), op)

    def _put(self, op: PutOp, vectors: list[list[float]]) -> None:
        records = self._data.setdefault(op.namespace, {})
        if op.value is None:
            records.pop(op.key, None)
            return
        now = datetime.now(UTC)
        previous = records.get(op.key)
        records[op.key] = _Record(
            value=deepcopy(op.value),
            created_at=now if previous is None else previous.created_at,
            updated_at=now,
            vectors=vectors,
        )

    def _search(self, op: SearchOp, query: list[float] | None) -> list[SearchItem]:
        conditions = parse_filter(op.filter)
        depth = len(op.namespace_prefix)
        hits = [
            (namespace, key, record)
            for namespace, records in self._data.items()
            if namespace[:depth] == op.namespace_prefix
            for key, record in records.items()
            if not conditions or matches(record.value, conditions)
        ]
        scores: list[float | None] = [None] * len(hits)
        if query is not None:
            scores = [
                max((_index.dot(query, v) for v in record.vectors), default=None)
                for _, _, record in hits
            ]
            # Most similar first; items without vectors after, in store order.
            order = sorted(
                range(len(hits)),
                key=lambda i: (scores[i] is None, -(scores[i] or 0.0)),
            )
        else:
            order = list(range(len(hits)))
        return [
            SearchItem(
                hits[i][0],
                hits[i][1],
                deepcopy(hits[i][2].value),
                hits[i][2].created_at,
                hits[i][2].updated_at,
                scores[i],
            )
            for i in order[op.offset : op.offset + op.limit]
        ]
