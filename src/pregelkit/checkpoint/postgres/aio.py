"""The PostgreSQL saver for asyncio code, on psycopg's async connections.

Same tables, SQL and row handling as :class:`~pregelkit.checkpoint.postgres.PostgresSaver`;
only the way each call reaches the server differs.

The sync methods (``get_tuple``, ``list``, ``put``, ``lock_thread``, ...) work
from sync code, e.g. ``graph.get_state``: they run the async method on the
event loop that owns the connection, submitting it from another thread while
that loop runs, or driving the loop themselves while it is idle. Called on the
loop's own thread they would deadlock, so they raise and say which async
method to await instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from typing import Any, Literal, TypeVar

import psycopg
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import AsyncConnectionPool

from pregelkit.checkpoint._rows import (
    check_filter,
    checkpoint_config,
    decode_checkpoint,
    encode_checkpoint,
    encode_writes,
    list_scope,
)
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    RunnableConfig,
    thread_coordinates,
)
from pregelkit.checkpoint.postgres import _sql
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.errors import ThreadBusyError

__all__ = ["AsyncPostgresSaver"]

T = TypeVar("T")


class AsyncPostgresSaver(BaseCheckpointSaver[str]):
    """Stores checkpoints in PostgreSQL from asyncio code.

    Takes a ``psycopg.AsyncConnection`` (one call at a time, under an
    ``asyncio.Lock``) or a ``psycopg_pool.AsyncConnectionPool``; both belong
    to the event loop they were opened in, and so does the saver.
    """

    conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any]

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self._conn_lock = asyncio.Lock()
        self._ready = False
        # The connection holding this saver's advisory locks, and their keys.
        self._lock_conn: psycopg.AsyncConnection[Any] | None = None
        self._held_keys: set[int] = set()
        self._lock_conn_guard = asyncio.Lock()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, dsn: str) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on one new autocommit connection to ``dsn``, closed when the
        block ends."""
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            yield cls(conn)

    async def setup(self) -> None:
        """Create or migrate the tables. Idempotent and done on first use
        anyway; concurrent calls from several processes migrate one at a time
        (an advisory transaction lock)."""
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.execute(_sql.LOCK_MIGRATIONS, (_sql.MIGRATION_LOCK_KEY,))
            await cur.execute(_sql.CREATE_MIGRATIONS_TABLE)
            await cur.execute(_sql.SELECT_SCHEMA_VERSION)
            current = _sql.schema_version(await cur.fetchone())
            for version in range(current + 1, len(_sql.MIGRATIONS) + 1):
                for statement in _sql.MIGRATIONS[version - 1]:
                    await cur.execute(statement)
                await cur.execute(_sql.RECORD_MIGRATION, (version,))
        self._ready = True

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self._conn_lock:
                yield self.conn

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[psycopg.AsyncCursor[TupleRow]]:
        """A cursor in its own transaction, whatever the connection's
        autocommit and row factory settings are."""
        if not self._ready:
            await self.setup()
        async with (
            self._connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur

    # async API

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and
        namespace; ``None`` if there is none."""
        thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
        async with self._cursor() as cur:
            if checkpoint_id:
                await cur.execute(_sql.SELECT_CHECKPOINT, (thread_id, checkpoint_ns, checkpoint_id))
            else:
                await cur.execute(_sql.SELECT_LATEST_CHECKPOINT, (thread_id, checkpoint_ns))
            row = await cur.fetchone()
        if row is None:
            return None
        return decode_checkpoint(self.serde, _sql.stored_checkpoint(row))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first, as ``PostgresSaver.list``: the rows are
        fetched in one query, and no connection is held while the caller
        iterates."""
        query = _sql.list_query(list_scope(config, before), check_filter(filter), limit)
        async with self._cursor() as cur:
            await cur.execute(*query)
            rows = await cur.fetchall()
        for row in rows:
            yield decode_checkpoint(self.serde, _sql.stored_checkpoint(row))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as a child of the checkpoint ``config`` names,
        with blobs for the channels in ``new_versions`` only."""
        row, blobs = encode_checkpoint(self.serde, config, checkpoint, metadata, new_versions)
        async with self._cursor() as cur:
            if blobs:
                await cur.executemany(_sql.INSERT_BLOB, blobs)
            await cur.execute(_sql.UPSERT_CHECKPOINT, row)
        return checkpoint_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record a task's writes against the checkpoint ``config`` names: a
        special write replaces the task's earlier one in place, a regular write
        already stored is kept."""
        rows = encode_writes(self.serde, config, writes, task_id, task_path)
        if not rows:
            return
        async with self._cursor() as cur:
            await cur.executemany(_sql.UPSERT_WRITE, rows)

    async def adelete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        async with self._cursor() as cur:
            for statement in _sql.DELETE_THREAD:
                await cur.execute(statement, (thread_id,))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another; rows
        the target already has under the same ids are replaced."""
        async with self._cursor() as cur:
            for statement in _sql.COPY_THREAD:
                await cur.execute(statement, (target_thread_id, source_thread_id))

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads (see ``PostgresSaver.prune``)."""
        statements = _sql.prune_statements(strategy)
        async with self._cursor() as cur:
            for thread_id in thread_ids:
                for statement in statements:
                    await cur.execute(statement, (thread_id,))

    def alock_thread(
        self, thread_id: str, *, wait: bool = False
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``thread_id`` for one run (see ``PostgresSaver.lock_thread``)."""
        return self._held(thread_id, wait)

    @asynccontextmanager
    async def _held(self, thread_id: str, wait: bool) -> AsyncIterator[None]:
        local = await self._acquire(thread_id, wait)
        try:
            yield
        finally:
            await self._release(thread_id, local)

    async def _acquire(self, thread_id: str, wait: bool) -> AbstractContextManager[None]:
        """The in-process lock (polled, so the loop keeps running), then the
        advisory lock, polled the same way when waiting."""
        local = BaseCheckpointSaver.lock_thread(self, thread_id, wait=False)
        while True:
            try:
                local.__enter__()
                break
            except ThreadBusyError:
                if not wait:
                    raise
                await asyncio.sleep(_sql.LOCK_POLL_SECONDS[0])
        try:
            key = _sql.thread_lock_key(thread_id)
            pause, longest = _sql.LOCK_POLL_SECONDS
            while not await self._try_lock(key):
                if not wait:
                    raise ThreadBusyError(thread_id, f"(PostgreSQL advisory lock {key} is held)")
                await asyncio.sleep(pause)
                pause = min(pause * 2, longest)
        except BaseException:
            local.__exit__(None, None, None)
            raise
        return local

    async def _release(self, thread_id: str, local: AbstractContextManager[None]) -> None:
        try:
            await self._unlock(_sql.thread_lock_key(thread_id))
        finally:
            local.__exit__(None, None, None)

    async def _try_lock(self, key: int) -> bool:
        async with self._lock_conn_guard:
            conn = (
                await self._borrow_lock_connection() if self._lock_conn is None else self._lock_conn
            )
            try:
                locked = await self._lock_query(conn, _sql.TRY_LOCK_THREAD, key)
            except BaseException:
                await self._after_lock_query_failed(conn)
                raise
            if locked:
                self._held_keys.add(key)
            elif not self._held_keys:
                await self._give_back_lock_connection()
            return locked

    async def _unlock(self, key: int) -> None:
        async with self._lock_conn_guard:
            conn = self._lock_conn
            if conn is None or key not in self._held_keys:
                return  # lost with a connection that broke
            self._held_keys.discard(key)
            try:
                await self._lock_query(conn, _sql.UNLOCK_THREAD, key)
            except psycopg.OperationalError:
                await self._after_lock_query_failed(conn)
            if not self._held_keys:
                await self._give_back_lock_connection()

    async def _lock_query(
        self, conn: psycopg.AsyncConnection[Any], statement: str, key: int
    ) -> bool:
        async with (
            self._conn_lock if conn is self.conn else nullcontext(),
            conn.transaction(),
            conn.cursor() as cur,
        ):
            await cur.execute(statement, (key,))
            row = await cur.fetchone()
        return bool(row and row[0])

    async def _borrow_lock_connection(self) -> psycopg.AsyncConnection[Any]:
        conn: psycopg.AsyncConnection[Any]
        if isinstance(self.conn, AsyncConnectionPool):
            conn = await self.conn.getconn()
        else:
            conn = self.conn
        self._lock_conn = conn
        return conn

    async def _give_back_lock_connection(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if isinstance(self.conn, AsyncConnectionPool) and conn is not None:
            await self.conn.putconn(conn)

    async def _after_lock_query_failed(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """A broken connection took every lock it held with it; anything else
        leaves the held locks as they were."""
        if conn.closed:
            self._held_keys.clear()
        if not self._held_keys:
            await self._give_back_lock_connection()

    # sync API: runs the async method on the saver's loop from another thread

    def _sync(self, coro: Coroutine[Any, Any, T], method: str) -> T:
        loop = self.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed():
            coro.close()
            raise RuntimeError(
                f"AsyncPostgresSaver.{method}() runs on the event loop the saver's connection "
                f"belongs to, and there is none (yet): await a{method}() from async code, or "
                "use PostgresSaver in sync code"
            )
        if running is loop:
            coro.close()
            raise RuntimeError(
                f"AsyncPostgresSaver.{method}() was called on its event loop's thread, where "
                f"waiting for it would deadlock: await a{method}() instead (in a graph: use "
                "ainvoke/astream/aget_state)"
            )
        if loop.is_running():
            return asyncio.run_coroutine_threadsafe(coro, loop).result()
        if running is None:  # the loop is idle and this thread runs none: drive it here
            return loop.run_until_complete(coro)
        coro.close()
        raise RuntimeError(
            f"AsyncPostgresSaver.{method}() was called inside another event loop while the "
            f"saver's own loop is not running: await a{method}() on the saver's loop instead"
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self.aget_tuple(config), "get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [
                item async for item in self.alist(config, filter=filter, before=before, limit=limit)
            ]

        return iter(self._sync(collect(), "list"))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self.aput(config, checkpoint, metadata, new_versions), "put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self.aput_writes(config, writes, task_id, task_path), "put_writes")

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self.adelete_thread(thread_id), "delete_thread")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(self.acopy_thread(source_thread_id, target_thread_id), "copy_thread")

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        self._sync(self.aprune(thread_ids, strategy=strategy), "prune")

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        return self._sync_held(thread_id, wait)

    @contextmanager
    def _sync_held(self, thread_id: str, wait: bool) -> Iterator[None]:
        local = self._sync(self._acquire(thread_id, wait), "lock_thread")
        try:
            yield
        finally:
            self._sync(self._release(thread_id, local), "lock_thread")
