"""A task cache in a SQLite file, shared by the threads and processes that open it.

Each process holds one connection, guarded by a lock, in WAL mode so readers
never wait for a writer and writers wait (``busy_timeout``) rather than fail
when another process holds the write lock. Expiry times are wall-clock
timestamps stored per row, because the file outlives any process and a
monotonic clock means nothing to another process or after a reboot.

A stored value that the serializer refuses to load raises
:class:`CacheLoadError` naming the namespace and key. It is neither skipped
as a miss nor deleted: the serializer refuses payloads that would import
types it does not trust, and quietly discarding such a row would hide that
someone wrote it. ``clear([namespace])`` drops the row once it is understood.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from time import time
from typing import Any

from pregelkit.cache.base import BaseCache, FullKey, Namespace, ValueT
from pregelkit.checkpoint.serde.base import SerdeError, SerializerProtocol

__all__ = ["CacheLoadError", "SqliteCache"]

# Indirection so tests can move time forward.
_now = time

_BUSY_TIMEOUT_SECONDS = 30.0
"""How long a write waits for another process's write lock before failing."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pregelkit_cache (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    tag TEXT NOT NULL,
    value BLOB NOT NULL,
    expires_at REAL,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pregelkit_cache_expires_at
    ON pregelkit_cache (expires_at) WHERE expires_at IS NOT NULL;
"""


class CacheLoadError(SerdeError):
    """A cached value is stored but could not be loaded, e.g. because the
    serializer refused to rebuild a type it does not trust."""

    def __init__(self, path: str, namespace: Namespace, key: str, reason: str) -> None:
        self.path = path
        self.namespace = namespace
        self.key = key
        super().__init__(
            f"cannot load the cached value for namespace {namespace!r}, key {key!r} "
            f"in {path!r}: {reason}. The row was left in place so it can be inspected; "
            f"once you know who wrote it, clear([{namespace!r}]) drops it"
        )


class SqliteCache(BaseCache[ValueT]):
    """A cache in the SQLite file at ``path``, created if it does not exist.

    Safe to use from many threads and many processes at once, including a
    process forked after the cache was opened (the child opens its own
    connection). ``get`` only reads, so lookups never queue behind one
    another; expired rows are deleted by the next ``set``.
    """

    def __init__(self, *, path: str, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.path = path
        self._lock = threading.Lock()
        # Opened now so a bad path fails here rather than at the first task.
        self._conn: sqlite3.Connection | None = self._connect()
        _OPEN_CACHES.add(self)

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The live entries among ``keys``; see :meth:`BaseCache.get`.

        Raises :class:`CacheLoadError` if a live entry cannot be loaded.
        """
        now = _now()
        rows: list[tuple[Namespace, str, str, bytes]] = []
        with self._lock:
            conn = self._connection()
            for namespace, key in keys:
                row = conn.execute(
                    "SELECT tag, value FROM pregelkit_cache "
                    "WHERE ns = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)",
                    (_encode_namespace(namespace), key, now),
                ).fetchone()
                if row is not None:
                    rows.append((namespace, key, row[0], row[1]))
        found: dict[FullKey, ValueT] = {}
        for namespace, key, tag, data in rows:
            try:
                found[(namespace, key)] = self.serde.loads_typed((tag, data))
            except Exception as exc:
                raise CacheLoadError(self.path, namespace, key, str(exc)) from exc
        return found

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store ``key -> (value, ttl seconds or None)`` in one transaction,
        and delete the rows that have expired."""
        now = _now()
        rows = [
            (_encode_namespace(namespace), key, tag, data, expires_at)
            for namespace, key, tag, data, expires_at in self._encoded(pairs, now)
        ]
        with self._write() as conn:
            conn.execute(
                "DELETE FROM pregelkit_cache WHERE expires_at IS NOT NULL AND expires_at <= ?",
                (now,),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO pregelkit_cache (ns, key, tag, value, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Drop the entries of ``namespaces`` (exact match, not prefix), or all."""
        with self._write() as conn:
            if namespaces is None:
                conn.execute("DELETE FROM pregelkit_cache")
            else:
                conn.executemany(
                    "DELETE FROM pregelkit_cache WHERE ns = ?",
                    [(_encode_namespace(namespace),) for namespace in namespaces],
                )

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """:meth:`get` on a worker thread, so a busy file does not stall the loop."""
        return await asyncio.to_thread(self.get, keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """:meth:`set` on a worker thread."""
        await asyncio.to_thread(self.set, pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """:meth:`clear` on a worker thread."""
        await asyncio.to_thread(self.clear, namespaces)

    def close(self) -> None:
        """Close this process's connection; a later call opens a new one."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        # Caller holds the lock.
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.OperationalError as exc:
            raise sqlite3.OperationalError(
                f"cannot open the cache file {self.path!r}: {exc}; check that its "
                f"directory exists and is writable"
            ) from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so a writer queues on
        # busy_timeout instead of failing when another process writes first.
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _forget_connection_after_fork(self) -> None:
        # The parent's connection must not be closed in the child: closing it
        # would release file locks the parent still holds. Keep it referenced
        # and unused; the child opens its own on first use. The lock is new
        # because a parent thread may have held it at the fork.
        if self._conn is not None:
            _INHERITED_CONNECTIONS.append(self._conn)
        self._conn = None
        self._lock = threading.Lock()


def _encode_namespace(namespace: Namespace) -> str:
    """JSON of the labels: one exact string per namespace, with no separator a
    label could contain, so ``clear`` matches whole namespaces only."""
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


_OPEN_CACHES: weakref.WeakSet[SqliteCache[Any]] = weakref.WeakSet()
_INHERITED_CONNECTIONS: list[sqlite3.Connection] = []


def _forget_connections_after_fork() -> None:
    for cache in list(_OPEN_CACHES):
        cache._forget_connection_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_connections_after_fork)
