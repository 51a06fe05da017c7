"""The SQLite saver's connection, held: under its lock (``Held``) or in one
transaction (``InTransaction``), or, inside this thread's ``grouped`` block,
the block's own.

Classes with ``__enter__``/``__exit__``, not ``@contextmanager`` generators:
a generator and its wrapper cost ~1.2 us more each time, and a short run
on SQLite takes the connection four times (its mark, its checkpoint, its
group, a poll)."""

from __future__ import annotations

import sqlite3
import threading
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pregelkit.checkpoint.sqlite import SqliteSaverCore
    from pregelkit.checkpoint.sqlite._group import Group

__all__ = ["BUSY", "NO_WAIT", "Held", "InTransaction", "WouldWait", "result_code"]

BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED: another connection holds it

NO_WAIT: ContextVar[bool] = ContextVar("pregelkit_sqlite_no_wait", default=False)
"""Set by the async saver around a call it makes on the event loop: SQLite
must not wait for another connection's lock then (busy timeout 0)."""


class WouldWait(Exception):
    """A call made under ``NO_WAIT`` found the database locked by another
    connection; nothing was written, and the caller makes it again where
    waiting is allowed."""


def result_code(exc: sqlite3.DatabaseError) -> int:
    """SQLite's primary result code of ``exc`` (-1 if it has none)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return -1 if code is None else code & 0xFF


class Held:
    """The connection, set up, under the saver's lock. Its busy timeout is
    0 while ``NO_WAIT`` is set (a locked database is then ``WouldWait``),
    ``busy_timeout`` otherwise; it is changed only when the wish changes.
    Inside this thread's group: the group's connection (its transaction,
    its lock), and a call that fails fails the group."""

    __slots__ = ("group", "no_wait", "saver")

    def __init__(self, saver: SqliteSaverCore) -> None:
        self.saver = saver
        self.group: Group | None = None
        self.no_wait = False

    def __enter__(self) -> sqlite3.Connection:
        saver = self.saver
        group = self.group = saver._join()
        if group is not None:
            return saver.conn
        me = threading.get_ident()
        if saver._holder == me:
            raise RuntimeError(
                "this thread already holds the saver's connection, in a grouped() block "
                "that is waiting (another asyncio task's agrouped(), paused at an await): "
                "a sync call here would wait for it forever; from a coroutine, call the "
                "async method (aget_tuple for get_tuple, ...)"
            )
        saver._lock.acquire()
        saver._holder = me
        try:
            conn = saver.conn
            no_wait = self.no_wait = NO_WAIT.get()
            want = 0 if no_wait else round(saver.busy_timeout * 1000)
            if want != saver._busy_ms:
                conn.execute(f"PRAGMA busy_timeout = {want}")
                saver._busy_ms = want
            if not saver._ready:
                saver._setup_locked()
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group = self.group
        if group is not None:
            if exc is not None:
                group.failed = exc
            return
        saver = self.saver
        saver._holder = None
        saver._lock.release()
        if self.no_wait and isinstance(exc, sqlite3.DatabaseError) and result_code(exc) in BUSY:
            raise WouldWait(str(exc)) from exc


class InTransaction:
    """One transaction under the saver's lock (``Held``). Writes start
    IMMEDIATE so a busy database makes them wait at BEGIN (``busy_timeout``)
    rather than fail halfway; reads get one consistent snapshot. Inside this
    thread's group: part of the group's transaction."""

    __slots__ = ("conn", "held", "saver", "write")

    def __init__(self, saver: SqliteSaverCore, write: bool) -> None:
        self.saver = saver
        self.write = write
        self.held = Held(saver)

    def __enter__(self) -> sqlite3.Connection:
        held = self.held
        conn = self.conn = held.__enter__()
        if held.group is not None:
            return conn
        try:
            conn.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        except BaseException as exc:
            held.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        held = self.held
        if held.group is None:
            conn = self.conn
            try:
                if exc is not None:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                else:
                    conn.execute("COMMIT")
                    if self.write:
                        self.saver._committed()
            except BaseException as failed:
                held.__exit__(type(failed), failed, failed.__traceback__)
                raise
        held.__exit__(typ, exc, tb)
