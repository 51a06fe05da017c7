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
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, Literal, ParamSpec, TypeVar

from pregelkit.checkpoint._rows import check_filter, list_scope
from pregelkit.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    RunnableConfig,
)
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.checkpoint.sqlite import SqliteSaverCore, _sql, connect

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
        self, conn: sqlite3.Connection, *, serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(conn, serde=serde)
        # The thread starts on first use and, idle, does not keep the process alive.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pregelkit-sqlite")

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, path: str) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on the database at ``path`` (``":memory:"`` for a private,
        in-memory one), closed when the block ends."""
        conn = await asyncio.to_thread(connect, path)
        saver = cls(conn)
        try:
            yield saver
        finally:
            await saver._run(conn.close)
            saver._executor.shutdown(wait=False)

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def setup(self) -> None:
        """Create or migrate the tables; idempotent, and done on first use
        anyway. Also sets WAL mode, ``synchronous=NORMAL`` and ``busy_timeout``."""
        await self._run(self._setup)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        query = _sql.list_query(list_scope(config, before), check_filter(filter), limit)
        for row in await self._run(self._list_rows, query):
            yield await self._run(self._load_row, row)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        await self._run(self.prune, thread_ids, strategy=strategy)
