"""The SQLite saver for asyncio code, without aiosqlite.

``sqlite3`` calls block, so every async method runs the same code as
:class:`~pregelkit.checkpoint.sqlite.SqliteSaver` on one dedicated worker
thread: the event loop never waits on the disk, and calls from one saver reach
SQLite one at a time, in the order they were made.

The sync methods (``get_tuple``, ``list``, ``put``, ...) work too and run on
the calling thread, so sync tools such as ``graph.get_state`` can use this
saver; calling them from a coroutine blocks the event loop for that call.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.checkpoint.sqlite import BUSY_TIMEOUT, SqliteSaverCore, connect

__all__ = ["AsyncSqliteSaver"]

P = ParamSpec("P")
T = TypeVar("T")


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
        """Every async method of the base saver runs its sync twin here: on
        this saver's one worker thread, so SQLite sees one thread at a time."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def setup(self) -> None:
        """Create or migrate the tables; idempotent, and done on first use
        anyway. Also sets WAL mode, ``synchronous=NORMAL`` and ``busy_timeout``."""
        await self._in_thread(self._setup)
