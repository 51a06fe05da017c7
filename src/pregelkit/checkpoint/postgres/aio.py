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
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from functools import partial
from typing import Any, Literal, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from pregelkit._internal._loop_thread import SyncCallOnLoopError
from pregelkit._internal._plan import (
    Plan,
    Run,
    Statement,
    Together,
    Whole,
    adrive,
    aexecute,
    afetched,
    all_statements,
    ended,
)
from pregelkit._internal._threads import running_loop
from pregelkit.checkpoint import _plans, _runqueue
from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint._plans import Call
from pregelkit.checkpoint._rows import check_filter, decode_checkpoint, list_scope
from pregelkit.checkpoint.attempts import AttemptList, AttemptRow
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    OpenedThread,
    RunnableConfig,
    prune_targets,
)
from pregelkit.checkpoint.base._open import Gate
from pregelkit.checkpoint.postgres import _core, _sql
from pregelkit.checkpoint.postgres._batch import Combined, refusing
from pregelkit.checkpoint.postgres._connect import (
    AsyncConnections,
    reopen_args,
    share_locks,
)
from pregelkit.checkpoint.postgres._together import OneQuery, forgetting
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.errors import ThreadBusyError

_TOGETHER = (Together, Whole)
"""Effects a transaction may open with, sent with its BEGIN."""

__all__ = ["AsyncPostgresSaver", "AsyncShallowPostgresSaver"]

T = TypeVar("T")


class AsyncPostgresSaver(AsyncConnections, _plans.SqlSaver):
    """Stores checkpoints in PostgreSQL from asyncio code.

    Takes a ``psycopg.AsyncConnection`` (one call at a time, under an
    ``asyncio.Lock``) or a ``psycopg_pool.AsyncConnectionPool``; both belong
    to the event loop they were opened in, and so does the saver.
    """

    conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any]
    _statements = _sql.SQL

    MIGRATIONS = all_statements(_sql)

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        pipe: psycopg.AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        retry: StorageRetry | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if pipe is not None and isinstance(conn, AsyncConnectionPool):
            raise ValueError(
                "pipe= needs the single AsyncConnection the pipeline belongs to, not an "
                "AsyncConnectionPool: pass AsyncPostgresSaver(conn, pipe=conn.pipeline())"
            )
        self.conn = conn
        self.retry = retry or StorageRetry()
        self._reopen = reopen_args(conn)
        self.pipe = pipe
        """A pipeline of ``conn`` the saver's statements are sent through
        (synced at the end of each call), or ``None``."""
        self._conn_lock = asyncio.Lock()
        self._ready = False
        self._locks = _core.LockState()
        self._lock_conn_guard = asyncio.Lock()
        share_locks(self, conn)
        self.loop: asyncio.AbstractEventLoop | None = running_loop()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, dsn: str, *, serde: SerializerProtocol | None = None, retry: StorageRetry | None = None
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on one new autocommit connection to ``dsn``, closed when the
        block ends (the connection it last used, if it had to reconnect)."""
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        saver = cls(conn, serde=serde, retry=retry)
        try:
            yield saver
        finally:
            await saver.conn.close()

    async def setup(self) -> None:
        """Create or migrate the tables. Idempotent and done on first use
        anyway; concurrent calls from several processes migrate one at a time
        (an advisory transaction lock). Not marked ready before its
        transaction commits: other threads' calls meanwhile set up too
        rather than run on missing tables (on a new saver the first-use
        setup runs before this one, which then finds nothing to do)."""
        await self._arun(Call(_core.setup, "setup"))

    # running plans (see PostgresSaver)

    async def _arun(self, call: Call[T]) -> T:
        """As ``PostgresSaver._run``."""
        group = _core.group_of(self, self._locks, call)
        if group is not None:
            run = Run(call.make())
            with _core.failing(group, call):
                return await adrive(run, partial(_in_group, group))
        return await self._drive(_core.transaction(call, retry=self.retry, locks=self._locks))

    def _run(self, call: Call[T]) -> T:
        """``_arun`` on the saver's loop, for the sync methods."""
        return self._sync(self._arun(call), call.operation)

    async def _ensure_ready(self) -> None:
        """As ``PostgresSaver._ensure_ready``."""
        if not self._ready:
            await self._in_transaction(Run(_core.setup()))
            self._ready = True

    async def _transaction(self, run: Run[T], batched: bool = False, single: bool = False) -> T:
        await self._ensure_ready()
        return await self._in_transaction(run, batched, single)

    async def _in_transaction(self, run: Run[T], batched: bool = False, single: bool = False) -> T:
        if self.pipe is None and type(run.effect) in _TOGETHER:
            async with self._connection() as conn:
                if conn.autocommit:
                    return await _opened_together(conn, run)
        if self.pipe is None and (batched or single):
            async with self._connection() as conn:
                if conn.autocommit:
                    if single:  # its own transaction on the server
                        return await adrive(run, partial(_execute_alone, conn))
                    group = _core.Group(self, conn)
                    with refusing(group.batch):
                        async with _group_pipeline(group):
                            return await adrive(run, partial(_in_group, group))
                async with conn.transaction():
                    return await adrive(run, partial(_execute_alone, conn))
        async with self._connection() as conn, conn.transaction():
            if self.pipe is None:
                # tuple rows whatever row factory the caller's connection has
                async with conn.cursor(row_factory=tuple_row) as cur:
                    return await adrive(run, partial(aexecute, cur))
            # In pipeline mode a cursor hands back its statements' results in
            # order, fetched or not: one cursor per statement keeps each
            # fetch on its own statement.
            result = await adrive(run, partial(_execute_alone, conn))
        await self.pipe.sync()
        return result

    @asynccontextmanager
    async def agrouped(self) -> AsyncIterator[None]:
        """The saver calls this task makes inside the block are one
        transaction on one connection: all saved, or, if an error leaves the
        block, none (as PostgresSaver's ``grouped``)."""
        if not _core.opens_group(self, self.pipe):
            yield
            return
        await self._ensure_ready()
        with _core.block_faults():
            async with self._connection() as conn:
                with _core.in_group(self, conn) as group, refusing(group.batch):
                    async with _group_pipeline(group):
                        yield

    async def _drive(self, plan: Plan[T]) -> T:
        return await adrive(plan, self._perform)

    async def _perform(self, effect: Any) -> Any:
        if isinstance(effect, _core.Guarded):
            async with self._lock_conn_guard:
                return await self._drive(effect.plan)
        if isinstance(effect, _core.EnterLocal):
            return await self._enter_local(effect.thread_id, effect.wait)
        if isinstance(effect, _core.Sleep):
            await asyncio.sleep(effect.seconds)
        elif isinstance(effect, _core.Borrow):
            pool = self.conn
            return await pool.getconn() if isinstance(pool, AsyncConnectionPool) else pool
        elif isinstance(effect, _core.GiveBack) and isinstance(self.conn, AsyncConnectionPool):
            await self.conn.putconn(effect.conn)
        elif isinstance(effect, _core.OnConnection):
            async with self._connection(effect.conn) as conn:
                return await _together(conn, effect.statements)
        elif isinstance(effect, _core.Transaction):
            return await self._transaction(effect.run, effect.batched, effect.single)
        elif isinstance(effect, _core.Reconnect):
            await self._reconnect()
        return None

    async def _enter_local(self, thread_id: str, wait: bool) -> AbstractContextManager[None]:
        """The in-process lock, polled so the loop keeps running."""
        local = BaseCheckpointSaver.lock_thread(self, thread_id, wait=False)
        while True:
            try:
                local.__enter__()
                return local
            except ThreadBusyError:
                if not wait:
                    raise
                await asyncio.sleep(_sql.LOCK_POLL_SECONDS[0])

    # async API

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and
        namespace; ``None`` if there is none."""
        stored = await self._arun(
            Call(
                partial(_plans.read_checkpoint, self._statements, config),
                "get_tuple",
                config,
                single=True,
            )
        )
        return None if stored is None else decode_checkpoint(self.serde, stored)

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
        listed = Call(partial(_plans.fetch_all, *query), "list", config, single=True)
        for row in await self._arun(listed):
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
        return await self._arun(
            Call(
                partial(
                    _plans.put,
                    self._statements,
                    self.serde,
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    self._keep_latest,
                ),
                "put",
                config,
                writes=True,
            )
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
        *,
        attempts: Sequence[AttemptRow] = (),
    ) -> None:
        """Record a task's writes against the checkpoint ``config`` names: a
        special write replaces the task's earlier one in place, a regular write
        already stored is kept. ``attempts`` go in the same transaction."""
        await self._arun(
            Call(
                partial(
                    _plans.put_writes,
                    _sql.SQL,
                    self.serde,
                    config,
                    writes,
                    task_id,
                    task_path,
                    attempts,
                ),
                "put_writes",
                config,
                writes=True,
            )
        )

    async def aput_attempts(self, thread_id: str, records: Sequence[AttemptRow]) -> None:
        await self._arun(
            Call(
                partial(_plans.put_attempts, _sql.SQL, records),
                "put_attempts",
                str(thread_id),
                writes=True,
            )
        )

    async def alist_attempts(self, thread_id: str) -> AttemptList:
        return await self._arun(
            Call(
                partial(_plans.list_attempts, _sql.SQL, str(thread_id)),
                "list_attempts",
                str(thread_id),
            )
        )

    async def adelete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        await self._arun(
            Call(partial(_plans.delete_thread, _sql.SQL, thread_id), "delete_thread", thread_id)
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another; rows
        the target already has under the same ids are replaced."""
        await self._arun(
            Call(
                partial(
                    _plans.copy_thread, _sql.SQL, self.serde, source_thread_id, target_thread_id
                ),
                "copy_thread",
                target_thread_id,
            )
        )

    async def aget_thread_control(self, thread_id: str) -> str | None:
        """The thread's run-control mark (see ``BaseCheckpointSaver``)."""
        return await self._arun(
            Call(
                partial(_plans.get_thread_control, _sql.SQL, str(thread_id)),
                "get_thread_control",
                str(thread_id),
                single=True,
            )
        )

    async def aget_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        """The mark and an active queued run's status (see ``BaseCheckpointSaver``)."""
        return await self._arun(
            Call(
                partial(_plans.get_thread_gate, _sql.SQL, str(thread_id)),
                "get_thread_gate",
                str(thread_id),
                single=True,
            )
        )

    async def aput_thread_control(self, thread_id: str, mark: str | None) -> None:
        await self._arun(
            Call(
                partial(_plans.put_thread_control, _sql.SQL, str(thread_id), mark),
                "put_thread_control",
                str(thread_id),
                single=True,
            )
        )

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads (see ``PostgresSaver.prune``)."""
        targets = prune_targets(thread_ids, strategy)
        await self._arun(Call(partial(_plans.prune, _sql.SQL, targets, strategy), "prune"))

    async def arun_queue(
        self,
        make: Callable[[_runqueue.Dialect], _runqueue.RunPlan[T]],
        op: str,
        *,
        single: bool = False,
    ) -> T:
        """Run a queue plan in one transaction (see ``PostgresSaver.run_queue``)."""
        return await self._arun(Call(lambda: make(_runqueue.POSTGRES), op, single=single))

    def alock_thread(
        self, thread_id: str, *, wait: bool = False
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``thread_id`` for one run (see ``PostgresSaver.lock_thread``)."""
        return self._held(thread_id, wait)

    @asynccontextmanager
    async def _held(
        self, thread_id: str, wait: bool, local: AbstractContextManager[None] | None = None
    ) -> AsyncIterator[None]:
        """The thread's lock; ``local``: already taken (``aopen_thread``)."""
        if local is None:
            entered, _ = await self._drive(_core.hold(self._locks, thread_id, wait, self.retry))
        else:
            entered = local
        try:
            yield
        finally:
            await self._drive(_core.release(self._locks, thread_id, entered))

    async def aopen_thread(
        self, thread_id: str, config: RunnableConfig, *, lock: bool, wait: bool, gate: Gate
    ) -> OpenedThread:
        """As ``PostgresSaver.open_thread``: one round trip on a single connection."""
        if self.pipe is not None or _plans.overrides(self, AsyncPostgresSaver, _AOPENING):
            return await super().aopen_thread(thread_id, config, lock=lock, wait=wait, gate=gate)
        await self._ensure_ready()
        reads = _plans.opening_reads(_sql.SQL, thread_id, config, gate)
        on_lock = not isinstance(self.conn, AsyncConnectionPool)
        local, rows = await self._drive(
            _core.open_thread(self._locks, thread_id, reads, lock, wait, self.retry, on_lock)
        )
        held = None
        if local is not None:
            held = self._held(thread_id, wait, local)
            await held.__aenter__()
        return _plans.opened_thread(_sql.SQL, self.serde, held, gate, rows)

    # sync API: runs the async method on the saver's loop from another thread

    def _sync(self, coro: Coroutine[Any, Any, T], method: str) -> T:
        loop = self.loop
        running = running_loop()
        if loop is None or loop.is_closed():
            coro.close()
            raise RuntimeError(
                f"AsyncPostgresSaver.{method}() runs on the event loop the saver's connection "
                f"belongs to, and there is none (yet): await a{method}() from async code, or "
                "use PostgresSaver in sync code"
            )
        if running is loop:
            coro.close()
            raise SyncCallOnLoopError(
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

    def get_thread_control(self, thread_id: str) -> str | None:
        return self._sync(self.aget_thread_control(thread_id), "get_thread_control")

    def put_thread_control(self, thread_id: str, mark: str | None) -> None:
        self._sync(self.aput_thread_control(thread_id, mark), "put_thread_control")

    def get_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        return self._sync(self.aget_thread_gate(thread_id), "get_thread_gate")

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        return self._sync_held(thread_id, wait)

    @contextmanager
    def _sync_held(self, thread_id: str, wait: bool) -> Iterator[None]:
        local, _ = self._sync(
            self._drive(_core.hold(self._locks, thread_id, wait, self.retry)), "lock_thread"
        )
        try:
            yield
        finally:
            self._sync(self._drive(_core.release(self._locks, thread_id, local)), "lock_thread")


async def _execute_alone(
    conn: psycopg.AsyncConnection[Any], statement: Statement | Together
) -> Any:
    if isinstance(statement, Together):
        return await _sent_together(conn, statement)
    if type(statement) is Combined:  # as in postgres._execute_alone
        async with psycopg.AsyncRawCursor(conn) as raw:
            await raw.execute(statement.sql, statement.params)
        return None
    async with conn.cursor(row_factory=tuple_row) as cur:
        return await aexecute(cur, statement)


async def _sent_together(conn: psycopg.AsyncConnection[Any], statements: Together) -> list[Any]:
    """As ``postgres._sent_together``."""
    async with AsyncExitStack() as stack:
        cursors = [
            await stack.enter_async_context(conn.cursor(row_factory=tuple_row)) for _ in statements
        ]
        for cur, statement in zip(cursors, statements, strict=True):
            await cur.execute(statement.sql, statement.params)
        return [await afetched(cur, s) for cur, s in zip(cursors, statements, strict=True)]


async def _opened_together(conn: psycopg.AsyncConnection[Any], run: Run[T]) -> T:
    """As ``postgres._opened_together``."""
    whole = type(run.effect) is Whole
    try:
        with run:
            run.value = await _together(conn, tuple(run.effect), begin=True, commit=whole)
        if whole:
            return ended(run)
        result = await adrive(run, partial(_execute_alone, conn))
        await _execute_alone(conn, _core.COMMIT)
        return result
    except BaseException:
        if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
            await conn.execute("ROLLBACK")
        raise


async def _together(
    conn: psycopg.AsyncConnection[Any],
    statements: tuple[Statement, ...],
    begin: bool = False,
    commit: bool = False,
) -> list[Any]:
    """As ``postgres._together``: one simple query on an autocommit connection,
    of statements prepared once on the server."""
    if not conn.autocommit:
        async with conn.transaction():
            return [await _execute_alone(conn, statement) for statement in statements]
    if len(statements) == 1 and not begin:
        return [await _execute_alone(conn, statements[0])]
    one = OneQuery(conn, statements, begin, commit)
    async with psycopg.AsyncClientCursor(conn, row_factory=tuple_row) as cur:
        with forgetting(conn):
            await cur.execute(one.query, one.params)
        for _ in range(one.skip):
            cur.nextset()
        results = [await afetched(cur, statements[0])]
        for statement in statements[1:]:
            cur.nextset()
            results.append(await afetched(cur, statement))
    one.sent()
    return results


async def _in_group(group: _core.Group, statement: Statement | Together) -> Any:
    """As ``postgres._in_group``."""
    if isinstance(statement, Together):
        return [await _in_group(group, each) for each in statement]
    before = group.before(statement)
    if before is None:
        return None
    conn = group.conn
    if group.pipeline is None:
        group.pipeline = await group.stack.enter_async_context(conn.pipeline())
    for earlier in before:
        await _execute_alone(conn, earlier)
    if statement.fetch != "count":
        return await _execute_alone(conn, statement)
    async with conn.cursor() as cur:  # as in postgres._in_group
        await cur.execute(statement.sql, statement.params)
        await group.pipeline.sync()
        return cur.rowcount


@asynccontextmanager
async def _group_pipeline(group: _core.Group) -> AsyncIterator[None]:
    """As ``postgres._group_pipeline``: one round trip for a block of saves."""
    conn = group.conn
    if not conn.autocommit:
        async with conn.pipeline(), conn.transaction():
            yield
            for statement in group.closing():
                await _execute_alone(conn, statement)
        return
    try:
        async with AsyncExitStack() as group.stack:
            yield
            closing = group.closing()
            if len(closing) > 1 and group.pipeline is None:
                await group.stack.enter_async_context(conn.pipeline())
            for statement in closing:
                await _execute_alone(conn, statement)
    except BaseException:
        if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
            await conn.execute("ROLLBACK")
        raise


_AOPENING = ("alock_thread", "aget_thread_gate", "aget_thread_control", "aget_tuple")
"""What ``aopen_thread`` makes in one round trip in place of these methods."""


class AsyncShallowPostgresSaver(AsyncPostgresSaver):
    """:class:`~pregelkit.checkpoint.postgres.shallow.ShallowPostgresSaver`
    for asyncio code: keeps only the latest checkpoint of each thread and
    namespace (see that module for why and what it costs)."""

    _keep_latest = True
