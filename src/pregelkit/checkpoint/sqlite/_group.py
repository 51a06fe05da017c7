"""``SqliteSaver.grouped()``: the saves one thread makes in a block are one
write transaction, their rows held back and written once per statement.

The saver's other calls meet a block here: a call of the thread and context
that opened it joins it (the held rows are written first, so the call sees
them and follows them); any other call waits for the saver's lock, which the
block holds until it ends.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pregelkit._internal._plan import Plan, execute
from pregelkit.errors import StorageError

if TYPE_CHECKING:
    from pregelkit.checkpoint._plans import Call

__all__ = ["GroupedSaves", "in_group", "open_group"]

T = TypeVar("T")


class Group:
    """An open ``grouped`` block of ``saver``. ``open`` turns False when the
    block ends: a context copied inside it (a worker thread's, a task or
    timer started there) still holds this object afterwards, and its late
    calls must take the lock and a transaction of their own, not run bare on
    a connection another thread may be using. For the same reason only the
    thread that opened the block joins it: another thread carrying a copy
    of its context waits for the block to end, as any other thread does.

    ``rows`` holds the rows the block's saves insert, by statement, until the
    block ends or another call joins it: then each statement runs once, with
    all its rows. A short run's saves are then four statements, not eight,
    made one after another with SQLite's code and pages still in the CPU's
    caches (replayed alone: 8% less of SQLite's time; in a run, see
    ``docs/benchmarks.md``).

    ``failed``: the first error of a call made in the block, or of writing
    the rows it held. SQLite may have rolled the whole transaction back (a
    full disk, an I/O error) or only the failing statement, after others of
    the call had run; either way the block cannot save all it was given.
    Every later call in the block, and its end, raise it again: the block
    saves all or nothing, even when its caller catches the first error and
    goes on."""

    __slots__ = ("failed", "open", "owner", "rows", "saver")

    def __init__(self, saver: GroupedSaves) -> None:
        self.saver = saver
        self.open = True
        self.owner = threading.get_ident()
        self.rows: dict[str, list[Sequence[Any]]] = {}
        self.failed: BaseException | None = None


class GroupFaults:
    """Around statements of a group itself: a failure is what ``_group_fault``
    makes of it. (A class, not a ``@contextmanager``: ~1.2 us less a use, two
    a group.)"""

    __slots__ = ("operation", "saver")

    def __init__(self, saver: GroupedSaves, operation: str) -> None:
        self.saver = saver
        self.operation = operation

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            fault = self.saver._group_fault(exc, self.operation)
            if fault is not exc:
                raise fault from exc


IN_GROUP: ContextVar[tuple[Group, ...]] = ContextVar("pregelkit_sqlite_groups", default=())
"""The ``grouped`` blocks the current context is in, innermost last (blocks
of two savers may nest): a saver's calls join its block's open transaction
(a context, not a thread: on an event loop, another task's calls must not
join it)."""


def in_group(saver: GroupedSaves) -> bool:
    """Whether this context is inside an open ``grouped`` block of ``saver``."""
    return open_group(saver) is not None


def open_group(saver: GroupedSaves) -> Group | None:
    """The open ``grouped`` block of ``saver`` this context is in, if any."""
    for group in IN_GROUP.get():
        if group.saver is saver:
            if group.open and group.owner == threading.get_ident():
                return group
            return None
    return None


class GroupedSaves:
    """The ``grouped`` block of a SQLite saver (a base of ``SqliteSaverCore``)."""

    conn: sqlite3.Connection

    def _begin_group(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _group_fault(
        self, exc: BaseException, operation: str, thread_id: str | None = None
    ) -> BaseException:
        raise NotImplementedError

    def _storage_error(
        self, operation: str, thread_id: str | None, exc: BaseException, tries: int
    ) -> StorageError:
        raise NotImplementedError

    def _committed(self) -> None:
        raise NotImplementedError

    @contextmanager
    def grouped(self) -> Iterator[None]:
        """The saver calls this thread makes inside the block are one write
        transaction (one commit instead of one each): all saved, or, if an
        error leaves the block, none. Calls from other threads (or other
        asyncio tasks) wait for the block to end."""
        if in_group(self):
            yield
            return
        held = self._begin_group()
        group = Group(self)
        token = IN_GROUP.set((*IN_GROUP.get(), group))
        try:
            yield
            if group.failed is not None:
                raise self._group_lost(group) from group.failed
            self._flush(group)
            group.open = False
            IN_GROUP.reset(token)
            with self._faults_in_group("commit"):
                self.conn.execute("COMMIT")
            self._committed()
        finally:
            if group.open:
                group.open = False
                IN_GROUP.reset(token)
            try:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            finally:
                held.__exit__(None, None, None)

    def _join(self) -> Group | None:
        """The open group this context's call joins, if any; the rows it
        holds are written first, so the call sees them and follows them."""
        group = open_group(self)
        if group is None:
            return None
        if group.failed is not None:
            raise self._group_lost(group) from group.failed
        if group.rows:
            self._flush(group)
        return group

    def _faults_in_group(self, operation: str) -> GroupFaults:
        """Statements of the group itself (its held rows, its commit); see
        ``_group_fault``."""
        return GroupFaults(self, operation)

    def _group_lost(self, group: Group) -> StorageError:
        assert group.failed is not None
        return self._storage_error("a save in this grouped() block", None, group.failed, 1)

    def _flush(self, group: Group) -> None:
        """Write the rows ``group`` holds: each statement once, with all its rows."""
        rows, group.rows = group.rows, {}
        try:
            with self._faults_in_group("save"):
                for sql, batch in rows.items():
                    self.conn.executemany(sql, batch)
        except BaseException as exc:
            group.failed = exc  # its rows are gone, whatever SQLite kept
            raise

    def _run_in_group(self, group: Group, plan: Plan[T], call: Call[T]) -> T:
        """Drive ``plan`` in ``group``, once: the rows of a per-row write
        (``"many"``) are held, to run with the group's other rows of that
        statement; any other statement runs after the held rows are written,
        so it sees them and follows them. A failure of the plan's statements
        fails the group (a busy database or a fault of the file as a
        ``StorageError``); one of its own code before its first statement
        (encoding) does not. (``drive`` with this performer, written out:
        every save of a grouped run comes here.)"""
        try:
            statement = plan.send(None)
        except StopIteration as done:
            nothing: T = done.value
            return nothing
        if group.failed is not None:
            raise self._group_lost(group) from group.failed
        try:
            while True:
                if statement.fetch == "many":
                    group.rows.setdefault(statement.sql, []).extend(statement.params)
                    statement = plan.send(None)
                else:
                    if group.rows:
                        self._flush(group)
                    statement = plan.send(execute(self.conn, statement))
        except StopIteration as done:
            result: T = done.value
            return result
        except BaseException as exc:
            fault = group.failed = self._group_fault(exc, call.operation, call.thread_id)
            if fault is exc:
                raise
            raise fault from exc
