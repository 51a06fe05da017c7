"""The SQLite saver for asyncio code, without aiosqlite.

The async methods run the same code as
:class:`~pregelkit.checkpoint.sqlite.SqliteSaver`, one call at a time, in the
order they were made. The calls every run makes (``aget_tuple``, ``aput``,
``aput_writes``, reading and setting the thread's run-control mark) are made
right on the event loop when nothing can make them wait: no earlier call of
the saver is still running, no other thread holds its connection, and the
database is not locked by another connection (SQLite is told not to wait
for one). A WAL commit with ``synchronous=NORMAL`` is a write to the page
cache, so a hop to a thread would cost more than the call; only the commit
that checkpoints the WAL (every ~10 MiB written) waits for the disk. Any other
call, and any of those that would have waited, runs on the saver's one worker
thread, where it may wait up to ``busy_timeout``.

The sync methods (``get_tuple``, ``list``, ``put``, ...) work too and run on
the calling thread, so sync tools such as ``graph.get_state`` can use this
saver; calling them from a coroutine blocks the event loop for that call,
and is a ``RuntimeError`` while another task's ``agrouped()`` block is
paused at an await (the call would wait for that block forever).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from pregelkit._internal._threads import on_executor
from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.checkpoint.sqlite import BUSY_TIMEOUT, SqliteSaverCore, connect
from pregelkit.checkpoint.sqlite._group import in_group
from pregelkit.checkpoint.sqlite._held import NO_WAIT, WouldWait

__all__ = ["AsyncSqliteSaver"]

P = ParamSpec("P")
T = TypeVar("T")


_QUICK = frozenset(
    {
        "get_tuple",
        "put",
        "put_writes",
        "put_attempts",
        "get_thread_control",
        "get_thread_gate",
        "put_thread_control",
    }
)
"""The calls every run makes, made on the event loop when nothing can make them wait."""


class AsyncSqliteSaver(SqliteSaverCore):
    """Stores checkpoints in a SQLite database; the async methods run on a
    single worker thread of their own.

    ``async with AsyncSqliteSaver.from_conn_string("state.db") as saver`` opens
    the file and, on exit, closes it and stops the worker.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        retry: StorageRetry | None = None,
    ) -> None:
        super().__init__(conn, serde=serde, busy_timeout=busy_timeout, retry=retry)
        # The thread starts on first use and, idle, does not keep the process alive.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pregelkit-sqlite")
        self._on_worker = 0
        """Calls handed to the worker thread and not finished: while there are
        any, later calls go there too, behind them."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        path: str,
        *,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        retry: StorageRetry | None = None,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on the database at ``path`` (``":memory:"`` for a private,
        in-memory one), closed when the block ends."""
        conn = await asyncio.to_thread(connect, path)
        saver = cls(conn, serde=serde, busy_timeout=busy_timeout, retry=retry)
        try:
            yield saver
        finally:
            await saver._in_thread(saver.close)
            saver._executor.shutdown(wait=False)

    async def _in_thread(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Every async method of the base saver runs its sync twin here: the
        calls every run makes through ``_quick``, the rest on this saver's one
        worker thread, so SQLite sees one thread at a time. Inside this task's
        ``agrouped`` block, any call is made right here, in the block's
        transaction: the worker thread would wait for the block, which waits
        for the call."""
        if in_group(self):
            return fn(*args, **kwargs)
        if getattr(fn, "__name__", None) in _QUICK and getattr(fn, "__self__", None) is self:
            call: Callable[..., T] = functools.partial(fn, **kwargs)
            result: T = await self._quick(call, *args)
            return result
        return await self._on_worker_thread(fn, *args, **kwargs)

    async def _on_worker_thread(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        self._on_worker += 1
        try:
            return await on_executor(self._executor, fn, *args, **kwargs)
        finally:
            self._on_worker -= 1

    async def _quick(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn`` on the event loop if nothing can make it wait (see the
        module's docstring), else on the worker thread."""
        if not self._on_worker and not self._lock.locked():
            token = NO_WAIT.set(True)
            try:
                return fn(*args)
            except WouldWait:
                pass  # locked by another connection: nothing was written
            finally:
                NO_WAIT.reset(token)
        return await self._on_worker_thread(fn, *args)

    @asynccontextmanager
    async def agrouped(self) -> AsyncIterator[None]:
        """``grouped``, held on the event loop, when it can be had there
        without waiting (as ``_quick`` decides); else nothing is grouped. The
        calls of this task inside the block are made on the loop; other
        tasks' calls go to the worker thread, which waits for the block."""
        group: AbstractContextManager[None] | None = None
        if not self._on_worker and not self._lock.locked():
            token = NO_WAIT.set(True)
            try:
                group = self.grouped()
                group.__enter__()
            except WouldWait:
                group = None  # locked by another connection: make the calls one by one
            finally:
                NO_WAIT.reset(token)
        if group is None:
            yield
            return
        try:
            yield
        except BaseException as exc:
            if not group.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            group.__exit__(None, None, None)

    async def setup(self) -> None:
        """Create or migrate the tables; idempotent, and done on first use
        anyway. Also sets WAL mode, ``synchronous=NORMAL`` and ``busy_timeout``."""
        await self._in_thread(self._setup)
