"""The SQLite store for asyncio code, without aiosqlite.

``sqlite3`` calls block, so every async method runs the same code as
:class:`~pregelkit.store.sqlite.SqliteStore` on one dedicated worker thread
(as :class:`~pregelkit.checkpoint.sqlite.aio.AsyncSqliteSaver` does): the
event loop never waits on the disk. The embedder, if any, is awaited on the
loop first. The sync methods work too, on the calling thread, except on a
thread running an event loop, which they would block.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import cached_property
from typing import Any, TypeVar

from pregelkit._internal._loop_thread import SyncCallOnLoopError
from pregelkit._internal._threads import on_executor, running_loop
from pregelkit.store import _index
from pregelkit.store._sweeper import SweepsInTask
from pregelkit.store.base import IndexConfig, Op, Result, TTLConfig
from pregelkit.store.sqlite import SqliteStoreCore, connect

__all__ = ["AsyncSqliteStore"]

T = TypeVar("T")


class AsyncSqliteStore(SweepsInTask, SqliteStoreCore):
    """A SQLite store whose async methods run on a worker thread of its own.

    ``async with AsyncSqliteStore.from_conn_string("memories.db") as store``
    opens the file and, on exit, closes it and stops the worker.
    """

    @cached_property
    def _executor(self) -> ThreadPoolExecutor:
        """The worker thread's pool, made on first use: the store is built
        as the sync one is, and only adds this."""
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="pregelkit-store")

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> AsyncIterator[AsyncSqliteStore]:
        """A store on the database at ``conn_string``, closed when the block
        ends; with ``ttl={"sweep_interval_minutes": n}`` a sweeper runs meanwhile."""
        conn = await asyncio.to_thread(connect, conn_string)
        store = cls(conn, index=index, ttl=ttl)
        try:
            async with store._sweeping():
                yield store
        finally:
            await store._in_thread(conn.close)
            store._executor.shutdown(wait=False)

    async def _in_thread(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await on_executor(self._executor, fn, *args)

    async def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done on first use)."""
        await self._in_thread(self._setup)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the calling thread, which must not be running an
        event loop (it would stall every coroutine for the call): there,
        await :meth:`abatch`, or the ``a``-prefixed method, instead."""
        if running_loop() is not None:
            raise SyncCallOnLoopError(
                "AsyncSqliteStore's sync methods (get, put, search, batch...) were called on a "
                "thread running an event loop, which they would block: await aget/aput/"
                "asearch/abatch... instead, or call them from a worker thread"
            )
        return self._batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction on the worker thread (see ``BaseStore.batch``)."""
        checked = self.validate_ops(ops)
        embedded = await _index.aembed(self._index, checked)
        return await self._in_thread(self._run, checked, embedded)

    async def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return await self._in_thread(self._sweep)
