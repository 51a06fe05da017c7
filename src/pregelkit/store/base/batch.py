"""A store base that gathers concurrent async calls into one ``abatch``.

Many coroutines calling ``aget``/``aput``/``asearch`` at once (a fan-out of
tasks, each reading a memory) would each pay a round trip. A subclass of
:class:`AsyncBatchedBaseStore` implements ``batch``/``abatch`` as usual; its
async convenience methods queue their op, and one background task per event
loop sends everything queued in the same loop iteration as one ``abatch``.
Identical reads in a batch are sent once and share the result; of several
writes to one key, only the last is sent.

Every op is checked before it is queued, so a bad call fails alone and never
fails the other callers' batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal, cast

from pregelkit.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    _as_namespace,
    _list_op,
)

__all__ = ["AsyncBatchedBaseStore"]


class AsyncBatchedBaseStore(BaseStore):
    """Batches concurrent async calls; sync calls go straight to ``batch``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[asyncio.Future[Result], Op]] | None = None
        self._task: asyncio.Task[None] | None = None

    async def _submit(self, ops: list[Op]) -> Result:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._queue is None:
            self._loop, self._queue, self._task = loop, asyncio.Queue(), None
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain(self._queue))
        future: asyncio.Future[Result] = loop.create_future()
        self._queue.put_nowait((future, ops[0]))
        return await future

    async def _drain(self, queue: asyncio.Queue[tuple[asyncio.Future[Result], Op]]) -> None:
        pending: list[tuple[asyncio.Future[Result], Op]] = []
        try:
            await self._drain_forever(queue, pending)
        except BaseException as exc:
            # Stopped (stop_batching) or hit by something that is not an
            # Exception (KeyboardInterrupt, a test timeout): no one else
            # would answer the callers queued here, who would wait forever.
            while not queue.empty():
                pending.append(queue.get_nowait())
            for future, _ in pending:
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
            raise

    async def _drain_forever(
        self,
        queue: asyncio.Queue[tuple[asyncio.Future[Result], Op]],
        pending: list[tuple[asyncio.Future[Result], Op]],
    ) -> None:
        while True:
            pending[:] = [await queue.get()]
            await asyncio.sleep(0)  # let the callers of this loop iteration queue too
            while not queue.empty():
                pending.append(queue.get_nowait())
            pending[:] = [(future, op) for future, op in pending if not future.cancelled()]
            if not pending:
                continue
            unique, slots = _dedupe([op for _, op in pending])
            try:
                results = await self.abatch(unique)
            except Exception as exc:
                for future, _ in pending:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (future, _), slot in zip(pending, slots):
                if not future.done():
                    future.set_result(results[slot])

    def stop_batching(self) -> None:
        """Cancel the task that sends queued calls (a store closing its
        connection), without waiting for a batch in flight to give up; a
        later async call starts a new task."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        op = GetOp(_as_namespace(namespace), key, self._refresh(refresh_ttl))
        return cast("Item | None", await self._submit(self._checked(op)))

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        await self._submit(self._put_op(namespace, key, value, index, ttl))

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self._submit(self._checked(PutOp(_as_namespace(namespace), key, None)))

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        ops = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast("list[SearchItem]", await self._submit(ops))

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", await self._submit(self._checked(op)))


def _dedupe(ops: Sequence[Op]) -> tuple[list[Op], list[int]]:
    """The ops to send and, for each given op, the position of its result.
    Every read of a batch sees the store as it was before the batch (see
    ``BaseStore.batch``), so equal reads share one result, and of several
    writes to one key only the last, which wins anyway, is sent."""
    unique: list[Op] = []
    slots: list[int] = []
    seen: dict[object, int] = {}
    for op in ops:
        marker = ("put", op.namespace, op.key) if isinstance(op, PutOp) else repr(op)
        if marker in seen:
            if isinstance(op, PutOp):
                unique[seen[marker]] = op
        else:
            seen[marker] = len(unique)
            unique.append(op)
        slots.append(seen[marker])
    return unique, slots
