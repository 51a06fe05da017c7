"""A store in a SQLite file: documents that outlive the process, on one machine.

Same file settings as the SQLite saver (WAL, ``synchronous=NORMAL``, a busy
timeout): a committed batch survives the process being killed, and several
processes can share the file. Each batch is one transaction. Items can
expire (``ttl=``), and with ``index=`` searches rank items by the cosine
similarity of their embedded texts to a query, computed in SQLite over every
stored vector (exact, no approximate index: see ``docs/storage.md`` for the
sizes this stays fast at).

What each batch does is decided in ``pregelkit.store._sqlcore``, shared with
the PostgreSQL stores; this module runs it over a ``sqlite3`` connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from pregelkit._internal._plan import Statement, all_statements, drive, execute, migrate
from pregelkit.store import _index, _sqlcore
from pregelkit.store._sweeper import SweepsInThread
from pregelkit.store.base import (
    GetOp,
    IndexConfig,
    Item,
    Op,
    PutOp,
    Result,
    TTLConfig,
    _as_namespace,
)
from pregelkit.store.sqlite import _sql

__all__ = ["AsyncSqliteStore", "SqliteStore"]

BUSY_TIMEOUT_MS = 30_000


def connect(path: str) -> sqlite3.Connection:
    """A connection the store can use from any thread; ``file:`` paths are URIs."""
    return sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, uri=path.startswith("file:")
    )


class SqliteStoreCore(_sqlcore.SqlStore):
    """Everything the sync and async SQLite stores share."""

    MIGRATIONS = all_statements(_sql)

    _dialect = _sql.SqliteDialect()
    refresh_on_read_default = False
    """As LangGraph's SQLite store: reads restart TTLs only when the TTL
    config (or the call) asks for it."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        """``conn`` must allow use from other threads
        (``check_same_thread=False``) if the store is used from several; the
        store runs its own transactions, so it sets ``isolation_level=None``.
        ``deserializer`` turns a stored JSON text into the value returned
        (``json.loads`` by default)."""
        conn.isolation_level = None
        self.conn = conn
        self._configure(deserializer, index, ttl)
        self._lock = threading.Lock()

    def _setup(self) -> None:
        with self._lock:
            self._setup_locked()

    def _setup_locked(self) -> None:
        if self._ready:
            return
        conn = self.conn
        _sql.register_functions(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        self._transaction(migrate(_sql, "store tables"), True, [])
        self._ready = True

    def _run(self, ops: list[Op], embedded: _index.Embedded | None) -> list[Result]:
        """Run a checked batch: one transaction (IMMEDIATE if it writes; a read
        that is one statement is a transaction by itself), then the TTL
        refreshes its reads asked for, in a short write transaction of their
        own (a read transaction cannot safely become a write one in WAL)."""
        plan = self._plan(ops, embedded)
        writes = any(isinstance(op, PutOp) for op in ops)
        later: list[Statement] = []
        with self._lock:
            self._setup_locked()
            if not writes and self._single(ops):
                # one SELECT is a read transaction of its own: no BEGIN, no COMMIT
                conn = self.conn
                results = drive(plan, lambda stmt: _execute(conn, stmt, later))
            else:
                results = self._transaction(plan, writes, later)
            if later:
                self._transaction(_replay(later), True, [])
        return list(results)

    def _get_one(self, op: GetOp) -> Item | None:
        """A lone, checked get: one ``SELECT``, without a batch plan (which
        took a fifth of a get's time). Reading an item whose TTL it restarts
        takes the batch path, which makes that write."""
        statement = _sqlcore.get_one(self._dialect, op, _sqlcore.omits_expired(self.ttl_config))
        with self._lock:
            self._setup_locked()
            rows = self.conn.execute(statement.sql, statement.params).fetchall()
        item = _sqlcore.found_one(self._dialect, op, rows, self._deserialize)
        if item is False:
            return cast("Item | None", self._run([op], None)[0])
        return item

    def _transaction(self, plan: _sqlcore.Plan, write: bool, later: list[Statement]) -> Any:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = drive(plan, lambda statement: _execute(conn, statement, later))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _sweep(self) -> int:
        with self._lock:
            self._setup_locked()
            return int(self._transaction(_sqlcore.sweep(self._dialect), True, []))

    def _batch(self, ops: Iterable[Op]) -> list[Result]:
        checked = self.validate_ops(ops)
        return self._run(checked, _index.embed(self._index, checked))


def _replay(statements: list[Statement]) -> _sqlcore.Plan:
    for statement in statements:
        yield Statement(statement.sql, statement.params, statement.fetch)


def _execute(conn: sqlite3.Connection, statement: Statement, later: list[Statement]) -> Any:
    if statement.later:
        later.append(statement)
        return None
    return execute(conn, statement)


class SqliteStore(SweepsInThread, SqliteStoreCore):
    """A :class:`~pregelkit.store.base.BaseStore` in a SQLite database.

    ``with SqliteStore.from_conn_string("memories.db") as store:`` opens the
    file and closes it when the block ends. Tables are created on first use,
    or by :meth:`setup`.
    """

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> Iterator[SqliteStore]:
        """A store on the database at ``conn_string`` (``":memory:"`` for a
        private one), closed when the block ends. With
        ``ttl={"sweep_interval_minutes": n}`` a sweeper runs meanwhile."""
        conn = connect(conn_string)
        store = cls(conn, index=index, ttl=ttl)
        try:
            with store._sweeping():
                yield store
        finally:
            conn.close()

    def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done on first use)."""
        self._setup()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction (reads, then writes: see ``BaseStore.batch``)."""
        return self._batch(ops)

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item at ``namespace``/``key``, or ``None`` if there is none
        (see ``BaseStore.get``). A subclass that overrides ``batch`` still
        sees every get go through it."""
        ops = self._checked(GetOp(_as_namespace(namespace), key, self._refresh(refresh_ttl)))
        if type(self).batch is not SqliteStore.batch:
            return cast("Item | None", self.batch(ops)[0])
        return self._get_one(cast(GetOp, ops[0]))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for async code: the embedder is awaited, SQLite runs
        in a worker thread."""
        checked = self.validate_ops(ops)
        embedded = await _index.aembed(self._index, checked)
        return await asyncio.to_thread(self._run, checked, embedded)

    def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return self._sweep()


def __getattr__(name: str) -> Any:
    # AsyncSqliteStore lives in .aio (asyncio machinery), imported on first use.
    if name == "AsyncSqliteStore":
        from pregelkit.store.sqlite.aio import AsyncSqliteStore

        return AsyncSqliteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
