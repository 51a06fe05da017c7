"""A checkpoint saver in PostgreSQL, for any number of processes and machines.

Needs the ``postgres`` extra (``pip install pregelkit[postgres]``: psycopg 3
and its pool); importing pregelkit alone never imports psycopg.

The saver takes a ``psycopg.Connection`` (used by one call at a time, under a
lock) or a ``psycopg_pool.ConnectionPool`` (calls run in parallel on the
pool's connections). ``put`` and ``put_writes`` are one transaction each, or,
inside ``grouped`` (the engine's batch of queued saves), all one transaction.
Tables are created on first use, or by ``setup()``, which is safe to run from
several processes at once.

``lock_thread`` holds a session-level advisory lock, so PostgreSQL drops the
lock when the process dies or loses its connection.

A call that meets a dropped connection, a restarting server or a
serialization conflict is tried again within the saver's ``retry`` budget
(:class:`~pregelkit.checkpoint.StorageRetry`); a single connection that
broke is replaced by a new one to the same server, a pool checks its idle
connections. Past the budget, or for a fault no retry cures (disk full, a
read-only server), the call raises :class:`~pregelkit.errors.StorageError`.

What each call does is decided in ``_core``, shared with
:class:`~pregelkit.checkpoint.postgres.aio.AsyncPostgresSaver`; this module
only runs it over sync connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from pregelkit._internal._plan import (
    Plan,
    Run,
    Statement,
    Together,
    Whole,
    all_statements,
    drive,
    ended,
    execute,
    fetched,
)
from pregelkit.checkpoint import _plans
from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint._plans import Call
from pregelkit.checkpoint.base import BaseCheckpointSaver, OpenedThread, RunnableConfig
from pregelkit.checkpoint.base._open import Gate
from pregelkit.checkpoint.postgres import _core, _sql
from pregelkit.checkpoint.postgres._batch import Combined, refusing
from pregelkit.checkpoint.postgres._connect import Connections, reopen_args, share_locks
from pregelkit.checkpoint.postgres._together import OneQuery, forgetting
from pregelkit.checkpoint.serde.base import SerializerProtocol

_TOGETHER = (Together, Whole)
"""Effects a transaction may open with, sent with its BEGIN."""

__all__ = ["PostgresSaver", "ShallowPostgresSaver"]

T = TypeVar("T")


class PostgresSaver(Connections, _plans.SqlSaver):
    """Stores checkpoints in PostgreSQL.

    ``PostgresSaver.from_conn_string(dsn)`` opens (and later closes) one
    connection; for a multi-threaded server pass a ``ConnectionPool``.
    """

    conn: psycopg.Connection[Any] | ConnectionPool[Any]
    _statements = _sql.SQL

    MIGRATIONS = all_statements(_sql)

    def __init__(
        self,
        conn: psycopg.Connection[Any] | ConnectionPool[Any],
        pipe: psycopg.Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        retry: StorageRetry | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if pipe is not None and isinstance(conn, ConnectionPool):
            raise ValueError(
                "pipe= needs the single Connection the pipeline belongs to, not a "
                "ConnectionPool: pass PostgresSaver(conn, pipe=conn.pipeline())"
            )
        self.conn = conn
        self.retry = retry or StorageRetry()
        self._reopen = reopen_args(conn)
        self.pipe = pipe
        """A pipeline of ``conn`` the saver's statements are sent through
        (synced at the end of each call), or ``None``."""
        self._conn_lock = threading.Lock()
        self._ready = False
        self._locks = _core.LockState()
        self._lock_conn_guard = threading.Lock()
        share_locks(self, conn)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, dsn: str, *, serde: SerializerProtocol | None = None, retry: StorageRetry | None = None
    ) -> Iterator[PostgresSaver]:
        """A saver on one new autocommit connection to ``dsn``, closed when the
        block ends (the connection it last used, if it had to reconnect)."""
        saver = cls(psycopg.Connection.connect(dsn, autocommit=True), serde=serde, retry=retry)
        try:
            yield saver
        finally:
            saver.conn.close()

    def setup(self) -> None:
        """Create or migrate the tables. Idempotent and done on first use
        anyway; concurrent calls from several processes migrate one at a time
        (an advisory transaction lock). Not marked ready before its
        transaction commits: other threads' calls meanwhile set up too
        rather than run on missing tables (on a new saver the first-use
        setup runs before this one, which then finds nothing to do)."""
        self._run(Call(_core.setup, "setup"))

    # running plans

    def _run(self, call: Call[T]) -> T:
        """Runs ``call``'s plan in a transaction of its own, creating the
        tables first if need be (not at all if it has nothing to execute),
        retrying transient failures; a plan of saves (``Transaction.batched``)
        sends its inserts as one statement. Inside this context's ``grouped`` block, the plan runs
        in the block's transaction instead, untried again: a failure fails
        the whole block."""
        group = _core.group_of(self, self._locks, call)
        if group is not None:
            run = Run(call.make())
            with _core.failing(group, call):
                return drive(run, partial(_in_group, group))
        return self._drive(_core.transaction(call, retry=self.retry, locks=self._locks))

    def _ensure_ready(self) -> None:
        """Create the tables before the first call. Ready only once they
        exist: other threads' first calls meanwhile set them up too (one at
        a time, under the migration lock), not run on missing tables."""
        if not self._ready:
            self._in_transaction(Run(_core.setup()))
            self._ready = True

    def _transaction(self, run: Run[T], batched: bool = False, single: bool = False) -> T:
        self._ensure_ready()
        return self._in_transaction(run, batched, single)

    def _in_transaction(self, run: Run[T], batched: bool = False, single: bool = False) -> T:
        if self.pipe is None and type(run.effect) in _TOGETHER:
            with self._connection() as conn:
                if conn.autocommit:
                    return _opened_together(conn, run)
        if self.pipe is None and (batched or single):
            with self._connection() as conn:
                if conn.autocommit:
                    if single:  # its own transaction on the server
                        return drive(run, partial(_execute_alone, conn))
                    group = _core.Group(self, conn)
                    with refusing(group.batch), _group_pipeline(group):
                        return drive(run, partial(_in_group, group))
                with conn.transaction():
                    return drive(run, partial(_execute_alone, conn))
        with self._connection() as conn, conn.transaction():
            if self.pipe is None:
                # tuple rows whatever row factory the caller's connection has
                with conn.cursor(row_factory=tuple_row) as cur:
                    return drive(run, partial(execute, cur))
            # In pipeline mode a cursor hands back its statements' results in
            # order, fetched or not: one cursor per statement keeps each
            # fetch on its own statement.
            result = drive(run, partial(_execute_alone, conn))
        self.pipe.sync()
        return result

    @contextmanager
    def grouped(self) -> Iterator[None]:
        """The saver calls this context makes inside the block are one
        transaction on one connection (one round of BEGIN/COMMIT instead of
        one each): all saved, or, if an error leaves the block, none. Other
        threads' calls use other pool connections, or wait for the single
        connection. With ``pipe=`` nothing is grouped."""
        if not _core.opens_group(self, self.pipe):
            yield
            return
        self._ensure_ready()
        with (
            _core.block_faults(),
            self._connection() as conn,
            _core.in_group(self, conn) as group,
            refusing(group.batch),
            _group_pipeline(group),
        ):
            yield

    def _drive(self, plan: Plan[T]) -> T:
        return drive(plan, self._perform)

    def _perform(self, effect: Any) -> Any:
        match effect:
            case _core.Guarded(plan):
                with self._lock_conn_guard:
                    return self._drive(plan)
            case _core.EnterLocal(thread_id, wait):
                local = BaseCheckpointSaver.lock_thread(self, thread_id, wait=wait)
                local.__enter__()
                return local
            case _core.Sleep(seconds):
                time.sleep(seconds)
            case _core.Borrow():
                return self.conn.getconn() if isinstance(self.conn, ConnectionPool) else self.conn
            case _core.GiveBack(conn) if isinstance(self.conn, ConnectionPool):
                self.conn.putconn(conn)
            case _core.OnConnection(held, statements):
                with self._connection(held) as conn:
                    return _together(conn, statements)
            case _core.Transaction(run, batched, single):
                return self._transaction(run, batched, single)
            case _core.Reconnect():
                self._reconnect()
        return None

    def get_thread_control(self, thread_id: str) -> str | None:
        """The thread's run-control mark (see ``BaseCheckpointSaver``)."""
        return self._run(
            Call(
                partial(_plans.get_thread_control, _sql.SQL, str(thread_id)),
                "get_thread_control",
                str(thread_id),
                single=True,
            )
        )

    def get_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        """The mark and an active queued run's status (see ``BaseCheckpointSaver``)."""
        return self._run(
            Call(
                partial(_plans.get_thread_gate, _sql.SQL, str(thread_id)),
                "get_thread_gate",
                str(thread_id),
                single=True,
            )
        )

    def put_thread_control(self, thread_id: str, mark: str | None) -> None:
        self._run(
            Call(
                partial(_plans.put_thread_control, _sql.SQL, str(thread_id), mark),
                "put_thread_control",
                str(thread_id),
                single=True,
            )
        )

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        """Hold ``thread_id`` for one run, against other threads and processes:
        the in-process lock, then a session-level advisory lock (key: a 64-bit
        hash of the thread id), which PostgreSQL releases if this process dies.

        With a single connection, that connection holds the locks. With a pool,
        one pool connection holds every lock the saver has, from the first
        lock taken until the last one is released (so the pool needs at least
        two connections while runs go on)."""
        return _Held(self, thread_id, wait)

    def open_thread(
        self, thread_id: str, config: RunnableConfig, *, lock: bool, wait: bool, gate: Gate
    ) -> OpenedThread:
        """A run's start in one round trip: the lock, the gate and the
        checkpoint in one query on the saver's single connection (with a
        pool, the reads take a second round trip on another connection). A
        subclass that changes how one of them is made is asked one by one."""
        if self.pipe is not None or _plans.overrides(self, PostgresSaver, _OPENING):
            return super().open_thread(thread_id, config, lock=lock, wait=wait, gate=gate)
        self._ensure_ready()
        reads = _plans.opening_reads(_sql.SQL, thread_id, config, gate)
        on_lock = not isinstance(self.conn, ConnectionPool)
        local, rows = self._drive(
            _core.open_thread(self._locks, thread_id, reads, lock, wait, self.retry, on_lock)
        )
        held = None if local is None else _Held(self, thread_id, wait, local)
        return _plans.opened_thread(_sql.SQL, self.serde, held, gate, rows)


_OPENING = ("lock_thread", "get_thread_gate", "get_thread_control", "get_tuple")
"""What ``open_thread`` makes in one round trip in place of these methods."""


class _Held(AbstractContextManager[None]):
    def __init__(
        self,
        saver: PostgresSaver,
        thread_id: str,
        wait: bool,
        local: AbstractContextManager[None] | None = None,
    ) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.wait = wait
        self.local = local
        """The entered in-process lock, once the thread is held."""

    def __enter__(self) -> None:
        self.local, _ = self.saver._drive(
            _core.hold(self.saver._locks, self.thread_id, self.wait, self.saver.retry)
        )

    def __exit__(self, *exc: object) -> None:
        assert self.local is not None
        self.saver._drive(_core.release(self.saver._locks, self.thread_id, self.local))


def _execute_alone(conn: psycopg.Connection[Any], statement: Statement | Together) -> Any:
    if isinstance(statement, Together):
        return _sent_together(conn, statement)
    if type(statement) is Combined:  # $n placeholders, not parsed again
        with psycopg.RawCursor(conn) as raw:
            raw.execute(statement.sql, statement.params)
        return None
    with conn.cursor(row_factory=tuple_row) as cur:
        return execute(cur, statement)


def _sent_together(conn: psycopg.Connection[Any], statements: Together) -> list[Any]:
    """Each statement's result, all sent before the first is waited for (in
    a pipeline: one round trip): a cursor each, which keeps its result."""
    with ExitStack() as stack:
        cursors = [stack.enter_context(conn.cursor(row_factory=tuple_row)) for _ in statements]
        for cur, statement in zip(cursors, statements, strict=True):
            cur.execute(statement.sql, statement.params)
        return [fetched(cur, s) for cur, s in zip(cursors, statements, strict=True)]


def _opened_together(conn: psycopg.Connection[Any], run: Run[T]) -> T:
    """``run``, whose first effect is ``Together``, in a transaction on an
    autocommit connection: its BEGIN and those statements go as one simple
    query (one round trip, where ``conn.transaction()`` would wait for its
    BEGIN first), the plan's other statements after, then its COMMIT. A
    ``Whole`` effect is the plan's transaction: its COMMIT goes in the same
    query."""
    whole = type(run.effect) is Whole
    try:
        with run:
            run.value = _together(conn, tuple(run.effect), begin=True, commit=whole)
        if whole:
            return ended(run)
        result = drive(run, partial(_execute_alone, conn))
        _execute_alone(conn, _core.COMMIT)
        return result
    except BaseException:
        if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
            conn.execute("ROLLBACK")
        raise


def _together(
    conn: psycopg.Connection[Any],
    statements: tuple[Statement, ...],
    begin: bool = False,
    commit: bool = False,
) -> list[Any]:
    """Each statement's result, all sent at once (on an autocommit connection;
    otherwise in a transaction, one by one): one simple query of several
    statements, each its own snapshot, their parameters bound by the
    client (a third of a pipeline's CPU in psycopg), each prepared once on
    the server (``_together``)."""
    if not conn.autocommit:
        with conn.transaction():
            return [_execute_alone(conn, statement) for statement in statements]
    if len(statements) == 1 and not begin:
        return [_execute_alone(conn, statements[0])]
    one = OneQuery(conn, statements, begin, commit)
    with psycopg.ClientCursor(conn, row_factory=tuple_row) as cur, forgetting(conn):
        cur.execute(one.query, one.params)
        for _ in range(one.skip):
            cur.nextset()
        results = [fetched(cur, statements[0])]
        for statement in statements[1:]:
            cur.nextset()
            results.append(fetched(cur, statement))
    one.sent()
    return results


def _in_group(group: _core.Group, statement: Statement | Together) -> Any:
    """``statement`` in a ``grouped`` block: kept for the block's batch, or
    sent after what must go before it (``Group.before``), in the block's
    pipeline."""
    if isinstance(statement, Together):
        return [_in_group(group, each) for each in statement]
    before = group.before(statement)
    if before is None:
        return None
    conn = group.conn
    if group.pipeline is None:
        group.pipeline = group.stack.enter_context(conn.pipeline())
    for earlier in before:
        _execute_alone(conn, earlier)
    if statement.fetch != "count":
        return _execute_alone(conn, statement)
    with conn.cursor() as cur:  # a pipeline's row count is known once synced
        cur.execute(statement.sql, statement.params)
        group.pipeline.sync()
        return cur.rowcount


@contextmanager
def _group_pipeline(group: _core.Group) -> Iterator[None]:
    """A ``grouped`` block: what it sends before its end goes in a pipeline
    (no wait for each result), and its end (``Group.closing``) after, so a
    block of saves is one round trip. A block that fails leaves nothing of
    it applied (on an autocommit connection its own ROLLBACK, if it began)."""
    conn = group.conn
    if not conn.autocommit:
        with conn.pipeline(), conn.transaction():
            yield
            for statement in group.closing():
                _execute_alone(conn, statement)
        return
    try:
        with ExitStack() as group.stack:
            yield
            closing = group.closing()
            if len(closing) > 1 and group.pipeline is None:
                group.stack.enter_context(conn.pipeline())
            for statement in closing:
                _execute_alone(conn, statement)
    except BaseException:
        if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
            conn.execute("ROLLBACK")
        raise


def __getattr__(name: str) -> Any:
    if name == "ShallowPostgresSaver":
        from pregelkit.checkpoint.postgres.shallow import ShallowPostgresSaver

        return ShallowPostgresSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
