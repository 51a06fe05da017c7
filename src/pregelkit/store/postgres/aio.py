"""The PostgreSQL store for asyncio code, on psycopg's async connections.

Same tables, SQL and plans as :class:`~pregelkit.store.postgres.PostgresStore`;
only the way statements reach the server differs. The sync methods work
from other threads (they run the async ones on the store's loop); on the
loop's own thread they would deadlock, so they raise and name the async
method to await instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from pregelkit._internal._loop_thread import SyncCallOnLoopError
from pregelkit._internal._plan import adrive, aexecute
from pregelkit._internal._threads import running_loop
from pregelkit.checkpoint._faults import Attempts, StorageRetry
from pregelkit.checkpoint.postgres._connect import AsyncConnections, pause_or_raise
from pregelkit.store import _index, _sqlcore
from pregelkit.store._sweeper import SweepsInTask
from pregelkit.store.base import IndexConfig, Op, Result, TTLConfig
from pregelkit.store.base.batch import AsyncBatchedBaseStore
from pregelkit.store.postgres import PoolConfig, PostgresStoreCore, setup_plan

__all__ = ["AsyncPostgresStore"]

T = TypeVar("T")


class AsyncPostgresStore(AsyncConnections, SweepsInTask, AsyncBatchedBaseStore, PostgresStoreCore):
    """A PostgreSQL store for asyncio code: takes a ``psycopg.AsyncConnection``
    (one call at a time) or a ``psycopg_pool.AsyncConnectionPool``; both
    belong to the event loop they were opened in, and so does the store.

    Concurrent ``aget``/``aput``/``asearch``... calls are gathered into one
    ``abatch`` (one transaction) per loop iteration, as LangGraph's store
    does: a fan-out of thousands of calls pays a few round trips of
    transaction overhead, not thousands."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        pipe: Any = None,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        retry: StorageRetry | None = None,
    ) -> None:
        """``pipe`` is accepted for LangGraph compatibility and not used."""
        super().__init__()
        self.conn = conn
        self._configure(deserializer, index, ttl)
        self._faults(conn, retry)
        self._conn_lock = asyncio.Lock()
        self.loop: asyncio.AbstractEventLoop | None = running_loop()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> AsyncIterator[AsyncPostgresStore]:
        """A store on a new autocommit connection (or pool) to ``conn_string``,
        closed when the block ends."""
        conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any]
        if pool_config is not None:
            kwargs = {"autocommit": True, **pool_config.get("kwargs", {})}
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                conn_string,
                min_size=pool_config.get("min_size", 1),
                max_size=pool_config.get("max_size"),
                kwargs=kwargs,
                open=False,
            )
            await pool.open(wait=True)
            conn = pool
        else:
            conn = await psycopg.AsyncConnection.connect(conn_string, autocommit=True)
        store = cls(conn, index=index, ttl=ttl)
        try:
            async with store._sweeping():
                yield store
        finally:
            store.stop_batching()
            await store.conn.close()

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[psycopg.AsyncCursor[Any]]:
        """A cursor on the store's connection, for SQL of the caller's own:
        LangGraph's stores have this, and fixtures written for them use it
        (rows are dicts, as there)."""
        async with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            yield cur

    async def _transaction(self, plan: _sqlcore.Plan, single: bool = False) -> Any:
        """As ``PostgresStore._transaction``."""
        async with self._connection() as conn:
            if single and conn.autocommit:
                async with conn.cursor(row_factory=tuple_row) as cur:
                    return await adrive(plan, partial(aexecute, cur))
            async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                return await adrive(plan, partial(aexecute, cur))

    async def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done on first use)."""
        await self._run(setup_plan)

    async def _run(self, make: Callable[[], _sqlcore.Plan], single: bool = False) -> Any:
        """As ``PostgresStore._run``."""
        attempts = Attempts(self.retry)
        while True:
            attempts.tries += 1
            try:
                if not self._ready:
                    await self._transaction(setup_plan())
                    self._ready = True
                return await self._transaction(make(), single)
            except psycopg.Error as exc:
                await asyncio.sleep(pause_or_raise(attempts, exc, "PostgreSQL store", "batch"))
                await self._reconnect()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction (reads, then writes: see ``BaseStore.batch``)."""
        checked = self.validate_ops(ops)
        embedded = await _index.aembed(self._index, checked)
        plan = partial(self._plan, checked, embedded)
        return list(await self._run(plan, self._single(checked)))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` from a thread other than the store's loop. A single
        op (``get``, ``put``... ) joins the calls other threads and tasks
        make meanwhile in one transaction, as the async methods do: ten
        threads calling ``put`` at once pay one round trip, not ten."""
        checked = self.validate_ops(ops)
        if len(checked) == 1:
            return [self._sync(self._submit(checked), "batch")]
        return self._sync(self.abatch(checked), "batch")

    async def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return int(await self._run(partial(_sqlcore.sweep, self._dialect)))

    def _sync(self, coro: Coroutine[Any, Any, T], method: str) -> T:
        loop = self.loop
        running = running_loop()
        if loop is not None and running is loop:
            coro.close()
            raise SyncCallOnLoopError(
                f"AsyncPostgresStore.{method}() was called on its event loop's thread, where "
                f"waiting would deadlock: await a{method}() instead"
            )
        if loop is not None and loop.is_running():
            return asyncio.run_coroutine_threadsafe(coro, loop).result()
        if loop is not None and not loop.is_closed() and running is None:
            return loop.run_until_complete(coro)
        coro.close()
        raise RuntimeError(
            f"AsyncPostgresStore.{method}() needs the event loop its connection belongs to "
            f"running: await a{method}() from async code, or use PostgresStore in sync code"
        )
