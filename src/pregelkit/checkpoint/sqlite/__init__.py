"""A checkpoint saver in a SQLite file, for one machine and any number of processes.

The database runs in WAL mode with ``synchronous=NORMAL``: a commit survives
the process being killed (even by SIGKILL), but a power loss or OS crash may
drop the last few transactions (never corrupt the file). Writers from other
processes wait for each other up to ``busy_timeout`` instead of failing.

Each saver uses one connection, guarded by a lock, from any number of threads;
``put`` and ``put_writes`` are one transaction each, or, inside ``grouped``
(the engine's batch of queued saves), all one transaction.

A database busy past ``busy_timeout`` is tried again within the saver's
``retry`` budget; that and every other fault of the file (disk full,
read-only, not a database, damaged) raise
:class:`~pregelkit.errors.StorageError` naming the file. A failed
transaction is rolled back whole, so nothing saved before is touched. Two runs of one thread are
kept apart by ``lock_thread``: an ``flock`` on a file beside the database, which
the OS releases when the process dies however it dies.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, TypeVar

import xxhash

from pregelkit._internal._plan import Run, all_statements, drive, execute, migrate
from pregelkit.checkpoint import _plans
from pregelkit.checkpoint._faults import Attempts, StorageRetry, storage_error
from pregelkit.checkpoint._plans import Call
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.checkpoint.sqlite import _sql
from pregelkit.checkpoint.sqlite._filelock import (
    RANGE_LOCKS,
    RANGES_FILE,
    FileLock,
    RangeLock,
    is_held,
    range_is_held,
)
from pregelkit.checkpoint.sqlite._group import GroupedSaves, open_group
from pregelkit.checkpoint.sqlite._held import BUSY, Held, InTransaction, result_code
from pregelkit.checkpoint.sqlite._walcheckpoint import BACKSTOP_PAGES, WalCheckpointer
from pregelkit.errors import StorageError

__all__ = ["SqliteSaver"]

BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's write lock, by default."""

T = TypeVar("T")

# SQLite's primary result codes that mean the file, not the statement, failed
_FILE_FAULTS = frozenset(
    {3, 8, 10, 11, 13, 14, 26}
)  # PERM READONLY IOERR CORRUPT FULL CANTOPEN NOTADB


def connect(path: str) -> sqlite3.Connection:
    """A connection the savers can share between threads; ``file:`` paths are
    opened as URIs (e.g. ``file:state.db?mode=ro``)."""
    return sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, uri=path.startswith("file:")
    )


def _require_shared(conn: Any) -> None:
    """Refuse a connection other threads may not use (``check_same_thread=True``,
    sqlite3's default): there is no asking it, so another thread tries."""
    if isinstance(conn, (str, bytes, os.PathLike)):
        raise TypeError(
            f"SqliteSaver(conn=...) takes a sqlite3 connection, not a path ({conn!r}): "
            "use `with SqliteSaver.from_conn_string(path) as saver:`"
        )
    if type(conn).__module__.partition(".")[0] == "aiosqlite":
        # LangGraph's AsyncSqliteSaver takes one; its sqlite3 connection
        # belongs to aiosqlite's thread, so the first statement here would fail.
        raise TypeError(
            "AsyncSqliteSaver(conn=...) got an aiosqlite connection; pregelkit's SQLite savers "
            "use sqlite3 directly, without aiosqlite: use `async with "
            "AsyncSqliteSaver.from_conn_string(path) as saver:`, or pass "
            "sqlite3.connect(path, check_same_thread=False)"
        )
    if not isinstance(conn, sqlite3.Connection):
        return
    refused: list[BaseException] = []

    def probe() -> None:
        try:
            conn.cursor().close()
        except sqlite3.ProgrammingError as exc:
            refused.append(exc)

    worker = threading.Thread(target=probe, name="pregelkit-sqlite-probe")
    worker.start()
    worker.join()
    if refused:
        raise ValueError(
            "SqliteSaver(conn=...) got a connection that only its own thread may use, but "
            "the engine saves from worker threads: open it with "
            "sqlite3.connect(path, check_same_thread=False), or use "
            "`with SqliteSaver.from_conn_string(path) as saver:`"
        ) from refused[0]


class SqliteSaverCore(GroupedSaves, _plans.SqlSaver):
    """Everything the sync and async SQLite savers share: the async saver only
    moves these calls onto its worker thread."""

    MIGRATIONS = all_statements(_sql)

    conn: sqlite3.Connection
    _statements = _sql.SQL

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        retry: StorageRetry | None = None,
    ) -> None:
        """``conn`` must come from ``sqlite3.connect(..., check_same_thread=False)``:
        the engine saves from worker threads (a connection that refuses them is
        an error here, not halfway through a run). The saver controls
        transactions itself, so it sets the connection's ``isolation_level`` to
        ``None``. ``busy_timeout``: seconds a write waits for another process's
        write lock before that counts as a failure (retried within ``retry``)."""
        _require_shared(conn)
        super().__init__(serde=serde)
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not 0 <= busy_timeout < 2**31 / 1000
        ):
            raise ValueError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}")
        conn.isolation_level = None
        self.conn = conn
        self.busy_timeout = float(busy_timeout)
        self.retry = retry or StorageRetry()
        self._lock = threading.Lock()
        self._holder: int | None = None
        """The thread holding ``_lock`` through ``_connection``."""
        self._ready = False
        self._busy_ms = -1  # the connection's busy timeout, once this saver sets it
        path = self._path()
        self._lock_dir = f"{path}.locks" if path else None
        self._wal = WalCheckpointer(path) if path else None
        if self._wal is not None:
            weakref.finalize(self, self._wal.close, False)

    def close(self) -> None:
        """Close the connection once no other thread uses it: closing it while
        another thread (a run-control poll, say) is inside a statement crashes
        the interpreter, so close a saver's connection with this."""
        if self._holder == threading.get_ident():
            raise RuntimeError(
                "close() inside a grouped() block of this saver (or while another asyncio "
                "task's agrouped() is paused at an await) would wait for the block forever: "
                "close the saver after the block ends"
            )
        if self._wal is not None:
            self._wal.close()
        with self._lock:
            self.conn.close()

    def _setup(self) -> None:
        with self._connection():
            pass

    def _setup_locked(self) -> None:
        if self._ready:
            return
        conn = self.conn
        # Every durable write is one commit appending whole pages to the WAL.
        # 4 KiB pages (only a new file takes them): a task's writes and attempt
        # rows fill a 1 KiB leaf in two or three inserts, and each overflow
        # rebalances and rewrites its siblings and parent, so smaller pages
        # write more of them (a short run on a new thread: 25 frames at 1 KiB,
        # 15 at 4 KiB, and ~13% less CPU).
        # WAL checkpoints are made on a thread of their own (_walcheckpoint);
        # the connection's own is the backstop.
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
        # IMMEDIATE: two processes setting up the same file migrate one at a time.
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = f"checkpoint tables in {self._path() or 'this database'}"
            drive(migrate(_sql, tables), partial(execute, conn))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._ready = True

    def _connection(self) -> Held:
        """The connection, set up, under the saver's lock (see ``Held``)."""
        return Held(self)

    def _transaction(self, *, write: bool) -> InTransaction:
        """One transaction under the saver's lock (see ``InTransaction``)."""
        return InTransaction(self, write)

    def _group_fault(
        self, exc: BaseException, operation: str, thread_id: str | None = None
    ) -> BaseException:
        """What a failed statement of a group raises: failing busy, or for a
        fault of the file, a ``StorageError`` (the group's transaction is
        lost whole, and is not tried again); anything else as it is."""
        if isinstance(exc, sqlite3.DatabaseError):
            code = result_code(exc)
            if code in BUSY or code in _FILE_FAULTS:
                return self._storage_error(operation, thread_id, exc, 1)
        return exc

    def _committed(self) -> None:
        """After each write commit: counts towards the next WAL checkpoint."""
        if self._wal is not None:
            self._wal.committed()

    def _begin_group(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection held (see ``_connection``) in a write transaction,
        begun within the retry budget while the database is busy."""
        attempts = Attempts(self.retry)
        while True:
            attempts.tries += 1
            held = self._connection()
            conn = held.__enter__()
            try:
                conn.execute("BEGIN IMMEDIATE")
                return held
            except BaseException as exc:
                # lets go of the connection; raises WouldWait for a busy one under NO_WAIT
                held.__exit__(type(exc), exc, exc.__traceback__)
                if not isinstance(exc, sqlite3.DatabaseError):
                    raise
                code = result_code(exc)
                if code not in BUSY and code not in _FILE_FAULTS:
                    raise
                delay = attempts.pause_after_failure(code in BUSY)
                if delay is None:
                    raise self._storage_error("begin", None, exc, attempts.tries) from exc
                time.sleep(delay)

    def _storage_error(
        self, operation: str, thread_id: str | None, exc: BaseException, tries: int
    ) -> StorageError:
        where = f"SQLite database {self._path() or '(in memory)'}"
        return storage_error(where, operation, thread_id, exc, tries=tries)

    def _run(self, call: Call[T]) -> T:
        """``call``'s plan in one transaction, built and run again while the
        database is busy and the retry budget lasts; a fault of the file is
        a ``StorageError``. A plan with nothing to do takes no connection; a
        ``single`` statement is its own transaction (no BEGIN/COMMIT round),
        unless that fails.

        Inside this context's group, the plan runs in the group's
        transaction, once: a fault loses the whole group's transaction."""
        make, writes = call.make, call.writes
        plan = make()
        group = open_group(self)
        if group is not None:
            return self._run_in_group(group, plan, call)
        run = Run(plan)
        if run.effect is None:
            return run.result
        if call.single:
            try:
                with self._connection() as conn:
                    result = drive(run, partial(execute, conn))
                if writes:
                    self._committed()
                return result
            except sqlite3.DatabaseError:
                run = Run(make())  # let the retrying path below decide what this was
        attempts = Attempts(self.retry)
        while True:
            attempts.tries += 1
            try:
                with self._transaction(write=writes) as conn:
                    return drive(run, partial(execute, conn))
            except sqlite3.DatabaseError as exc:
                code = result_code(exc)
                if code not in BUSY and code not in _FILE_FAULTS:
                    raise
                delay = attempts.pause_after_failure(code in BUSY)
                if delay is None:
                    error = self._storage_error(call.operation, call.thread_id, exc, attempts.tries)
                    raise error from exc
                time.sleep(delay)
                run = Run(make())

    # run control

    def get_thread_control(self, thread_id: str) -> str | None:
        """The thread's run-control mark (see ``BaseCheckpointSaver``); a read
        by key outside any transaction, cheap enough to poll. Run straight,
        not as a plan: every run polls, and in a run (cold caches) the plan
        machinery cost a poll about 5 us more."""
        with self._connection() as conn:
            row = conn.execute(_sql.SELECT_THREAD_CONTROL, (str(thread_id),)).fetchone()
        return None if row is None else str(row[0])

    def get_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        """The mark and an active queued run's status (see ``BaseCheckpointSaver``),
        read straight as ``get_thread_control``."""
        with self._connection() as conn:
            mark, run = conn.execute(_sql.SELECT_THREAD_GATE, (str(thread_id),) * 2).fetchone()
        return (None if mark is None else str(mark)), (None if run is None else str(run))

    def put_thread_control(self, thread_id: str, mark: str | None) -> None:
        with self._transaction(write=True) as conn:
            drive(_plans.put_thread_control(_sql.SQL, str(thread_id), mark), partial(execute, conn))

    # one run per thread

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        """Hold ``thread_id`` for one run, against other threads and other
        processes, with a lock the OS releases when the process dies: on
        Linux a byte of ``<database>.locks/threads`` (see ``_filelock``),
        elsewhere an exclusive ``flock`` on ``<database>.locks/<hash of the
        thread id>``, a file that exists only while the lock is held. An
        in-memory database exists in one process only, so it uses the
        in-process lock."""
        if self._lock_dir is None or sys.platform == "win32":
            return super().lock_thread(thread_id, wait=wait)
        if RANGE_LOCKS:
            return RangeLock(os.path.join(self._lock_dir, RANGES_FILE), thread_id, wait)
        return FileLock(self._thread_lock_path(thread_id), thread_id, wait)

    def thread_is_running(self, thread_id: str) -> bool:
        """Whether a run (of any process) holds ``thread_id`` right now; a
        look that never takes the lock, so it cannot make a starting run busy."""
        if self._lock_dir is None or sys.platform == "win32":
            return False
        if RANGE_LOCKS:
            return range_is_held(os.path.join(self._lock_dir, RANGES_FILE), thread_id)
        return is_held(self._thread_lock_path(thread_id))

    def _thread_lock_path(self, thread_id: str) -> str:
        assert self._lock_dir is not None
        name = xxhash.xxh3_128_hexdigest(thread_id.encode())
        return os.path.join(self._lock_dir, name)

    def _path(self) -> str:
        """The main database's file, or "" for an in-memory or temporary one."""
        for _, name, file in self.conn.execute("PRAGMA database_list").fetchall():
            if name == "main":
                return str(file or "")
        return ""


class SqliteSaver(SqliteSaverCore):
    """Stores checkpoints in a SQLite database through one shared connection.

    ``SqliteSaver.from_conn_string("state.db")`` opens (and later closes) the
    file; tables are created on first use, or by calling ``setup()``.
    """

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        path: str,
        *,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        retry: StorageRetry | None = None,
    ) -> Iterator[SqliteSaver]:
        """A saver on the database at ``path`` (``":memory:"`` for a private,
        in-memory one), closed when the block ends."""
        saver = cls(connect(path), serde=serde, busy_timeout=busy_timeout, retry=retry)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate the tables; idempotent, and done on first use
        anyway. Also sets WAL mode, ``synchronous=NORMAL`` and ``busy_timeout``."""
        self._setup()
