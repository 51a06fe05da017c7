"""What PostgresSaver and AsyncPostgresSaver do, written once for both.

Every operation is a plan (the vocabulary of ``pregelkit._internal._plan``):
it yields the effects it needs (a ``Statement`` to run, or one of this
module's: a lock connection to borrow, a pause, ...) and is sent back what
came of each. The savers only perform the effects over their own connection
types, with ``drive`` (sync) or ``adrive`` (async). So which statements run, with
which parameters and in which order, how rows become checkpoints and errors,
and how the advisory locks are taken and given back are decided here alone.

A plan's code up to its first effect runs when ``Run`` starts it, before
any connection is taken: encoding, argument checks, and plans with nothing to
do (``put_writes`` without writes) never touch the database.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import psycopg

from pregelkit._internal._plan import Plan, Run, Statement, migrate
from pregelkit.checkpoint._faults import Attempts, StorageRetry, storage_error
from pregelkit.checkpoint._plans import Call
from pregelkit.checkpoint.postgres import _sql
from pregelkit.checkpoint.postgres._batch import Batch
from pregelkit.checkpoint.postgres._connect import is_storage_fault, is_transient
from pregelkit.errors import StorageError, ThreadBusyError

T = TypeVar("T")

BEGIN = Statement("BEGIN")
COMMIT = Statement("COMMIT")

Row: TypeAlias = Sequence[Any]
Rows: TypeAlias = list[Row]


# effects besides statements


@dataclass(frozen=True, slots=True)
class EnterLocal:
    """Enter the saver's in-process lock of ``thread_id`` (waiting for it if
    ``wait``); sends back the entered context manager."""

    thread_id: str
    wait: bool


@dataclass(frozen=True, slots=True)
class Guarded:
    """Run ``plan`` holding the saver's lock-connection guard."""

    plan: Plan[Any]


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Borrow:
    """A connection to hold advisory locks on: one from the pool, or the
    saver's single connection."""


@dataclass(frozen=True, slots=True)
class GiveBack:
    """``conn`` holds no advisory lock any more: return it to the pool, if
    it came from one."""

    conn: Any


@dataclass(frozen=True, slots=True)
class OnConnection:
    """Run ``statements`` on ``conn`` (a connection of the saver's when
    ``None``; under the saver's connection lock when it is its single
    connection), all sent before the first result is waited for: one round
    trip, each its own transaction on an autocommit connection (else one
    transaction for all). Sends back each one's result."""

    conn: Any
    statements: tuple[Statement, ...]


@dataclass(frozen=True, slots=True)
class Transaction:
    """Drive ``run`` to its end in one transaction on a connection of the
    saver (creating the tables first if the saver has not yet); sends back
    its result. ``batched``: a plan of saves, whose inserts are kept and
    sent as one statement at its end (as a ``grouped`` block's: one round
    trip, no BEGIN/COMMIT unless it reads on the way). ``single``: one
    statement, which needs no transaction of its own on an autocommit
    connection."""

    run: Run[Any]
    batched: bool = False
    single: bool = False


@dataclass(frozen=True, slots=True)
class Reconnect:
    """A call failed on a connection that may be broken: replace the saver's
    single connection if it is, or have the pool check its idle ones."""


# faults


BATCHED = frozenset({"put", "put_writes", "put_attempts"})
"""The saves whose inserts go as one statement (``Transaction.batched``)."""

NOT_OF_THE_RUN = frozenset({"delete_thread", "copy_thread", "put_thread_control"})
"""Writes for a thread that do not come from its run: not refused after the
run's lock was lost (see ``transaction``)."""


def _refuse_if_lost(locks: LockState, call: Call[Any]) -> None:
    """Refuse a write of a thread's run whose lock was lost (see ``transaction``)."""
    if (
        locks.lost
        and call.writes
        and call.thread_id is not None
        and call.operation not in NOT_OF_THE_RUN
    ):
        refuse_if_lost(locks, call.thread_id, call.operation)


def transaction(call: Call[T], *, retry: StorageRetry, locks: LockState) -> Plan[T]:
    """Run ``call``'s plan in a transaction, building and running it again
    after a transient failure, within ``retry``'s budget.

    A dropped connection also drops the advisory locks it held: the threads
    whose lock was lost may already be run by another process, so writing
    for them again is refused (until their run releases the lock) rather
    than retried."""

    def attempt() -> Plan[T]:
        run = Run(call.make())
        if run.effect is None:
            return run.result
        _refuse_if_lost(locks, call)
        batched = call.pipelined or call.operation in BATCHED
        result: T = yield Transaction(run, batched, call.single)
        return result

    def after_failure() -> Plan[None]:
        yield Guarded(_probe_locks(locks))
        _refuse_if_lost(locks, call)

    return (
        yield from retrying(
            attempt,
            retry=retry,
            operation=call.operation,
            thread_id=call.thread_id,
            after_failure=after_failure,
        )
    )


def retrying(
    attempt: Callable[[], Plan[T]],
    *,
    retry: StorageRetry,
    operation: str,
    thread_id: str | None,
    after_failure: Callable[[], Plan[None]] | None = None,
) -> Plan[T]:
    """``attempt()`` until it succeeds, reconnecting and pausing between
    tries while its failures are transient and ``retry``'s budget lasts;
    then a ``StorageError``. ``after_failure`` runs after each failure and
    may raise instead, when trying again would not be safe."""
    attempts = Attempts(retry)
    while True:
        attempts.tries += 1
        try:
            if attempts.tries > 1:
                yield Reconnect()
            return (yield from attempt())
        except psycopg.Error as exc:
            if not is_storage_fault(exc):
                raise
            if after_failure is not None:
                try:
                    yield from after_failure()
                except StorageError as refused:
                    raise refused from exc
            delay = attempts.pause_after_failure(is_transient(exc))
            if delay is None:
                raise storage_error(
                    "PostgreSQL", operation, thread_id, exc, tries=attempts.tries
                ) from exc
            yield Sleep(delay)


# grouped calls


class Group:
    """An open ``grouped`` block: its saver and its transaction's connection.

    ``open`` turns False when the block ends. A context copied inside the
    block (a worker thread's, a task or timer started there) still holds
    this object afterwards; without the flag such a late call would run on a
    connection that is back in the pool, perhaps inside another block's
    transaction, and leave it open.

    ``failed``: the first error of a call made in the block. A call that
    fails after some of its statements ran (``copy_thread`` whose values
    cannot be sealed again) leaves them in the transaction; a caller that
    catches the error and goes on must not get them committed with the
    rest: every later call in the block, and its end, raise it again (as
    SQLite's blocks do).

    ``batch``: the rows of the block's inserts, kept to be sent as one
    statement (``_batch``); ``began``: the block's transaction has begun on
    the server (a block whose saves are one statement needs none). A block
    that sends only at its end sends one statement, with no pipeline (whose
    bookkeeping costs psycopg more than the statement); the first statement
    it must send earlier (a read) puts the rest in a pipeline (``pipeline``)."""

    __slots__ = ("batch", "began", "conn", "failed", "open", "pipeline", "saver", "stack")

    def __init__(self, saver: object, conn: Any) -> None:
        self.saver = saver
        self.conn = conn
        self.open = True
        self.failed: BaseException | None = None
        self.batch = Batch()
        self.began = not conn.autocommit
        """Without autocommit, psycopg's ``conn.transaction()`` begins it."""
        self.stack: Any = None
        """The driver's exit stack for the block, where a pipeline is entered
        the first time the block sends before its end."""
        self.pipeline: Any = None
        """That pipeline, once entered."""

    def before(self, statement: Statement) -> list[Statement] | None:
        """What to send before ``statement`` in the block, or ``None``: the
        statement is kept in the batch, nothing to send now. A statement
        that is not kept (one that reads, or that no batch combines) needs
        the block's transaction begun and the rows kept so far sent first."""
        if self.batch.add(statement):
            return None
        sent = self.batch.take()
        if not self.began:
            self.began = True
            sent.insert(0, BEGIN)
        return sent

    def closing(self) -> list[Statement]:
        """What to send as the block ends well: the kept rows, in a
        transaction only if the block has begun one or sends more than one
        statement (one statement is atomic by itself). A block a call failed
        in ends with that call's error, nothing of it sent."""
        if self.failed is not None:
            raise _group_lost(self.failed) from self.failed
        sent = self.batch.take()
        if self.began:
            return [*sent, COMMIT] if self.conn.autocommit else sent
        if len(sent) > 1:
            return [BEGIN, *sent, COMMIT]
        return sent


GROUP: ContextVar[Group | None] = ContextVar("pregelkit_postgres_group", default=None)
"""The ``grouped`` block the current context is in (a context, not a
thread: on an event loop another task's calls must not join it). The
block's statements go through a pipeline: sent without waiting for each
result, so the whole group costs about one round trip to the server, plus
one per row fetched."""


def _current_group(saver: object) -> Group | None:
    group = GROUP.get()
    return group if group is not None and group.open and group.saver is saver else None


def opens_group(saver: object, pipe: object) -> bool:
    """Whether ``saver.grouped()`` opens a transaction: not with a pipeline,
    nor inside an open block of the same saver."""
    return pipe is None and _current_group(saver) is None


@contextmanager
def in_group(saver: object, conn: Any) -> Iterator[Group]:
    group = Group(saver, conn)
    token = GROUP.set(group)
    try:
        yield group
        if group.failed is not None:
            raise _group_lost(group.failed) from group.failed
    finally:
        group.open = False
        GROUP.reset(token)


def group_of(saver: object, locks: LockState, call: Call[Any]) -> Group | None:
    """``saver``'s open grouped block this context is in, or None. A plan
    runs there once, not tried again, inside ``failing``: a failure fails
    the whole block. A write for a thread whose lock was lost is refused
    there too."""
    group = _current_group(saver)
    if group is None:
        return None
    if group.failed is not None:
        raise _group_lost(group.failed) from group.failed
    _refuse_if_lost(locks, call)
    return group


@contextmanager
def failing(group: Group, call: Call[Any]) -> Iterator[None]:
    """A call's statements in ``group``: an error fails the block; a lost
    connection is a ``StorageError`` naming the call, as outside a block."""
    try:
        yield
    except BaseException as exc:
        if group.failed is None:
            group.failed = exc
        if isinstance(exc, psycopg.Error) and is_storage_fault(exc):
            raise storage_error("PostgreSQL", call.operation, call.thread_id, exc, tries=1) from exc
        raise


@contextmanager
def block_faults() -> Iterator[None]:
    """A ``grouped`` block's own statements (taking a connection, BEGIN,
    COMMIT) failing on the database: a ``StorageError``, nothing of the block
    saved."""
    try:
        yield
    except psycopg.Error as exc:
        if not is_storage_fault(exc):
            raise
        raise storage_error("PostgreSQL", "a grouped() block", None, exc, tries=1) from exc


def _group_lost(cause: BaseException) -> StorageError:
    return storage_error("PostgreSQL", "a save in this grouped() block", None, cause, tries=1)


def refuse_if_lost(locks: LockState, thread_id: str, operation: str) -> None:
    if _sql.thread_lock_key(thread_id) in locks.lost:
        raise StorageError(
            f"PostgreSQL: {operation} for thread {thread_id!r} refused: the connection that "
            "held this thread's lock was lost, so another process may be running the thread "
            "now. This run stops here; resume the thread with invoke(None, config).",
            thread_id=thread_id,
        ) from locks.lost_because


def _probe_locks(state: LockState) -> Plan[bool]:
    """Whether the connection holding the advisory locks still holds them;
    if it broke, its locks are marked lost."""
    conn = state.conn
    if conn is None or not state.held:
        return True
    try:
        yield OnConnection(conn, (Statement("SELECT 1", fetch="one"),))
        return True
    except psycopg.Error as exc:
        state.lost |= state.held
        state.lost_because = exc
        state.held.clear()
        yield from _give_back(state)
        return False


# tables


def setup() -> Plan[None]:
    """Create or migrate the tables, one process at a time (an advisory
    transaction lock); refuses a schema newer than this code."""
    yield Statement(_sql.LOCK_MIGRATIONS, (_sql.MIGRATION_LOCK_KEY,))
    yield from migrate(_sql, "pregelkit checkpoint tables")


# one run per thread


class LockState:
    """The connection holding a saver's advisory locks (``None`` while it
    holds none) and the keys it holds."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.held: set[int] = set()
        self.lost: set[int] = set()
        self.lost_because: BaseException | None = None
        """The driver error that took the lost locks' connection."""


Held: TypeAlias = tuple[AbstractContextManager[None], list[Any]]
"""The entered in-process lock, and the results of the reads made with the lock."""


def hold(
    state: LockState,
    thread_id: str,
    wait: bool,
    retry: StorageRetry,
    reads: tuple[Statement, ...] = (),
) -> Plan[Held]:
    """The in-process lock of ``thread_id``, then its session-level advisory
    lock, polled (with growing pauses) while ``wait``; ``reads`` go in the
    same round trip as the lock (on the lock's connection, read once the
    lock is taken). Sends back the entered in-process lock, for
    :func:`release`, and the reads' results. A connection that drops while
    the lock is asked for is replaced within ``retry``'s budget."""
    local: AbstractContextManager[None] = yield EnterLocal(thread_id, wait)
    try:
        key = _sql.thread_lock_key(thread_id)
        pause, longest = _sql.LOCK_POLL_SECONDS
        while True:
            locked, rows = yield from retrying(
                lambda: _guarded_try_lock(state, key, reads),
                retry=retry,
                operation="lock_thread",
                thread_id=thread_id,
            )
            if locked:
                return local, rows
            if not wait:
                raise ThreadBusyError(thread_id, f"(PostgreSQL advisory lock {key} is held)")
            yield Sleep(pause)
            pause = min(pause * 2, longest)
    except BaseException:
        local.__exit__(None, None, None)
        raise


def open_thread(
    state: LockState,
    thread_id: str,
    reads: tuple[Statement, ...],
    lock: bool,
    wait: bool,
    retry: StorageRetry,
    reads_on_lock: bool,
) -> Plan[tuple[AbstractContextManager[None] | None, list[Any]]]:
    """A run's start (``BaseCheckpointSaver.open_thread``): the thread's lock
    and ``reads``, in one round trip when they may share the lock's
    connection (``reads_on_lock``: the saver's single connection; a pool's
    lock connection serves every run's locks, so a pool reads on another,
    a second round trip)."""
    local: AbstractContextManager[None] | None = None
    if lock:
        local, rows = yield from hold(state, thread_id, wait, retry, reads if reads_on_lock else ())
        if reads_on_lock:
            return local, rows
    try:
        rows = yield from retrying(
            lambda: _read(reads), retry=retry, operation="open_thread", thread_id=thread_id
        )
    except BaseException:
        if local is not None:
            yield from release(state, thread_id, local)
        raise
    return local, rows


def _read(reads: tuple[Statement, ...]) -> Plan[list[Any]]:
    rows: list[Any] = yield OnConnection(None, reads)
    return rows


def release(state: LockState, thread_id: str, local: AbstractContextManager[None]) -> Plan[None]:
    key = _sql.thread_lock_key(thread_id)
    state.lost.discard(key)
    try:
        yield Guarded(_unlock(state, key))
    finally:
        local.__exit__(None, None, None)


def _guarded_try_lock(
    state: LockState, key: int, reads: tuple[Statement, ...]
) -> Plan[tuple[bool, list[Any]]]:
    locked: tuple[bool, list[Any]] = yield Guarded(_try_lock(state, key, reads))
    return locked


def _try_lock(
    state: LockState, key: int, reads: tuple[Statement, ...]
) -> Plan[tuple[bool, list[Any]]]:
    conn = state.conn
    if conn is None:
        conn = state.conn = yield Borrow()
    try:
        results = yield OnConnection(
            conn, (Statement(_sql.TRY_LOCK_THREAD, (key,), fetch="one"), *reads)
        )
        row = results[0]
        locked = bool(row and row[0])
    except BaseException:
        if reads and not conn.closed:
            yield from _unlock_after_failed_read(conn, key)
        yield from _after_lock_query_failed(state, conn)
        raise
    if locked:
        state.held.add(key)
    elif not state.held:
        yield from _give_back(state)
    return locked, results[1:]


def _unlock_after_failed_read(conn: Any, key: int) -> Plan[None]:
    """The lock may have been taken before a read of its round trip failed:
    give it back (the error of the read is the one raised)."""
    try:
        yield OnConnection(conn, (Statement(_sql.UNLOCK_THREAD, (key,), fetch="one"),))
    except psycopg.Error:
        pass


def _unlock(state: LockState, key: int) -> Plan[None]:
    conn = state.conn
    if conn is None or key not in state.held:
        return  # lost with a connection that broke
    state.held.discard(key)
    try:
        yield OnConnection(conn, (Statement(_sql.UNLOCK_THREAD, (key,), fetch="one"),))
    except psycopg.OperationalError:
        yield from _after_lock_query_failed(state, conn)
    if not state.held:
        yield from _give_back(state)


def _give_back(state: LockState) -> Plan[None]:
    conn, state.conn = state.conn, None
    if conn is not None:
        yield GiveBack(conn)


def _after_lock_query_failed(state: LockState, conn: Any) -> Plan[None]:
    """A broken connection took every lock it held with it; anything else
    leaves the held locks as they were."""
    if conn.closed:
        if state.held:
            state.lost |= state.held
            state.lost_because = sys.exc_info()[1]
        state.held.clear()
    if not state.held:
        yield from _give_back(state)
