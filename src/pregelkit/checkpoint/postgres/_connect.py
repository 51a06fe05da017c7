"""Which PostgreSQL failures a saver or store rides out, how it takes a
connection and how it reconnects: shared by the savers and the PostgreSQL
stores."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pregelkit.checkpoint._faults import Attempts, storage_error

__all__ = [
    "AsyncConnections",
    "Connections",
    "is_storage_fault",
    "is_transient",
    "pause_or_raise",
    "reopen_args",
    "share_locks",
]


_SHARED: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_SHARED_GUARD = threading.Lock()


def share_locks(saver: Any, conn: Any) -> None:
    """Give ``saver`` the locks of the savers made before on the same single
    connection: its in-process thread locks and the lock its calls take the
    connection under. Its session takes an advisory lock it already holds
    again (PostgreSQL counts them), so two savers on one connection, each
    with thread locks of its own, ran one thread twice at once; and their
    calls from two threads mixed their transactions on the connection
    (OutOfOrderTransactionNesting, or a statement in the other's
    transaction). A pool's savers take connections of their own."""
    if isinstance(conn, ConnectionPool | AsyncConnectionPool):
        return
    with _SHARED_GUARD:
        shared = _SHARED.get(conn)
        if shared is None:
            shared = _SHARED[conn] = (
                saver._thread_locks,
                saver._thread_locks_guard,
                saver._conn_lock,
            )
    saver._thread_locks, saver._thread_locks_guard, saver._conn_lock = shared


def reopen_args(conn: Any) -> dict[str, Any] | None:
    """How to open a connection like ``conn`` again (``None`` for a pool,
    which reconnects by itself): its parameters, password included, and the
    settings the saver relies on."""
    if not isinstance(conn, psycopg.Connection | psycopg.AsyncConnection):
        return None
    info = conn.info
    args: dict[str, Any] = {
        "conninfo": info.dsn,
        "autocommit": conn.autocommit,
        "prepare_threshold": conn.prepare_threshold,
        "row_factory": conn.row_factory,
    }
    if info.password:
        args["password"] = info.password
    return args


def is_transient(exc: BaseException) -> bool:
    """A failure another try may not meet: the connection dropped or could
    not be made, the server is shutting down or starting, too many
    connections, a serialization conflict or deadlock, or a prepared
    statement the connection lost (``DISCARD ALL`` from a pool or a proxy:
    the next try prepares it again, ``_together``)."""
    if isinstance(
        exc,
        psycopg.errors.SerializationFailure
        | psycopg.errors.DeadlockDetected
        | psycopg.errors.InvalidSqlStatementName,
    ):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _TRANSIENT_STATES


_TRANSIENT_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def is_storage_fault(exc: BaseException) -> bool:
    """The database, not the statement, failed: worth a ``StorageError``."""
    return is_transient(exc) or isinstance(
        exc, psycopg.OperationalError | psycopg.errors.ReadOnlySqlTransaction
    )


def pause_or_raise(attempts: Attempts, exc: psycopg.Error, what: str, operation: str) -> float:
    """After ``exc``: how long to wait before trying again; re-raises ``exc``
    when it is not the database's fault, and raises ``StorageError`` when no
    further try is due."""
    if not is_storage_fault(exc):
        raise exc
    delay = attempts.pause_after_failure(is_transient(exc))
    if delay is None:
        raise storage_error(what, operation, None, exc, tries=attempts.tries) from exc
    return delay


class Connections:
    """The connections of a saver or store on sync connections: one of its
    pool's, or its single connection under its lock; after a failure, a pool
    checks its idle connections, and a single connection that broke is
    replaced by a new one to the same server (``reopen_args``)."""

    conn: Any
    _conn_lock: threading.Lock
    _reopen: dict[str, Any] | None

    @contextmanager
    def _connection(
        self, held: psycopg.Connection[Any] | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """``held`` (a pool connection the owner keeps), else a connection of
        the pool, else the single connection under its lock."""
        if held is not None and held is not self.conn:
            yield held
        elif isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self._conn_lock:
                yield self.conn

    def _reconnect(self) -> None:
        if isinstance(self.conn, ConnectionPool):
            self.conn.check()
            return
        with self._conn_lock:
            if (self.conn.closed or self.conn.broken) and self._reopen is not None:
                self.conn = psycopg.Connection.connect(**self._reopen)


class AsyncConnections:
    """``Connections`` for async connections, which belong to the event loop
    of the owner's first call (``loop``)."""

    conn: Any
    loop: asyncio.AbstractEventLoop | None
    _conn_lock: asyncio.Lock
    _reopen: dict[str, Any] | None

    @asynccontextmanager
    async def _connection(
        self, held: psycopg.AsyncConnection[Any] | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if held is not None and held is not self.conn:
            yield held
        elif isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self._conn_lock:
                yield self.conn

    async def _reconnect(self) -> None:
        if isinstance(self.conn, AsyncConnectionPool):
            await self.conn.check()
            return
        async with self._conn_lock:
            if (self.conn.closed or self.conn.broken) and self._reopen is not None:
                self.conn = await psycopg.AsyncConnection.connect(**self._reopen)
