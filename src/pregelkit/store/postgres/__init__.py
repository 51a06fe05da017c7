"""A store in PostgreSQL, for any number of processes and machines.

Needs the ``postgres`` extra (``pip install pregelkit[postgres]``); importing
pregelkit alone never imports psycopg. Takes a ``psycopg.Connection`` (one
call at a time, under a lock) or a ``psycopg_pool.ConnectionPool``. Each
batch is one transaction, tried again after a dropped connection or a
server restart as the checkpoint savers do (``retry=``, a
:class:`~pregelkit.checkpoint.StorageRetry`), on a new connection if its own
broke; past the budget it raises :class:`~pregelkit.errors.StorageError`.
Semantic search needs no extension: vectors are ``real[]`` columns scored
by exact cosine similarity in SQL (see ``docs/storage.md`` for the sizes
this stays fast at).

What each batch does is decided in ``pregelkit.store._sqlcore``, shared with
the SQLite stores and with
:class:`~pregelkit.store.postgres.aio.AsyncPostgresStore`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any, TypedDict

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool

from pregelkit._internal._plan import Statement, all_statements, drive, execute, migrate
from pregelkit.checkpoint._faults import Attempts, StorageRetry
from pregelkit.checkpoint.postgres._connect import Connections, pause_or_raise, reopen_args
from pregelkit.store import _index, _sqlcore
from pregelkit.store._sweeper import SweepsInThread
from pregelkit.store.base import IndexConfig, Op, Result, TTLConfig
from pregelkit.store.postgres import _sql

__all__ = ["AsyncPostgresStore", "PoolConfig", "PostgresStore"]


class PoolConfig(TypedDict, total=False):
    """``from_conn_string(pool_config=...)``: open a pool instead of one connection."""

    min_size: int
    max_size: int | None
    kwargs: dict[str, Any]


def setup_plan() -> _sqlcore.Plan:
    """Create or migrate the tables, one process at a time."""
    yield Statement(_sql.LOCK_MIGRATIONS, (_sql.MIGRATION_LOCK_KEY,))
    yield from migrate(_sql, "store tables")


class PostgresStoreCore(_sqlcore.SqlStore):
    """Configuration both PostgreSQL stores share."""

    MIGRATIONS = all_statements(_sql)
    _dialect = _sql.PostgresDialect()

    def _faults(self, conn: Any, retry: StorageRetry | None) -> None:
        self.retry = retry or StorageRetry()
        self._reopen = reopen_args(conn)


class PostgresStore(Connections, SweepsInThread, PostgresStoreCore):
    """A :class:`~pregelkit.store.base.BaseStore` in PostgreSQL.

    ``with PostgresStore.from_conn_string(dsn) as store:`` opens (and later
    closes) one connection, or a pool with ``pool_config=``. Tables are
    created on first use, or by :meth:`setup`.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any] | ConnectionPool[Any],
        *,
        pipe: Any = None,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        retry: StorageRetry | None = None,
    ) -> None:
        """``pipe`` is accepted for LangGraph compatibility and not used: a
        batch is sent as one transaction either way."""
        self.conn = conn
        self._configure(deserializer, index, ttl)
        self._faults(conn, retry)
        self._conn_lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> Iterator[PostgresStore]:
        """A store on a new autocommit connection to ``conn_string`` (or a
        pool, with ``pool_config``), closed when the block ends; with
        ``ttl={"sweep_interval_minutes": n}`` a sweeper runs meanwhile."""
        conn: psycopg.Connection[Any] | ConnectionPool[Any]
        if pool_config is not None:
            kwargs = {"autocommit": True, **pool_config.get("kwargs", {})}
            conn = ConnectionPool(
                conn_string,
                min_size=pool_config.get("min_size", 1),
                max_size=pool_config.get("max_size"),
                kwargs=kwargs,
                open=True,
            )
        else:
            conn = psycopg.Connection.connect(conn_string, autocommit=True)
        store = cls(conn, index=index, ttl=ttl)
        try:
            with store._sweeping():
                yield store
        finally:
            store.conn.close()

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor on the store's connection, for SQL of the caller's own:
        LangGraph's stores have this, and fixtures written for them use it
        (rows are dicts, as there)."""
        with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            yield cur

    def _transaction(self, plan: _sqlcore.Plan, single: bool = False) -> Any:
        """Run ``plan`` in a transaction; a ``single``-statement plan on an
        autocommit connection without one (one round trip, not three)."""
        with self._connection() as conn:
            if single and conn.autocommit:
                with conn.cursor(row_factory=tuple_row) as cur:
                    return drive(plan, partial(execute, cur))
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                return drive(plan, partial(execute, cur))

    def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done on first use);
        several processes may run it at once."""
        self._run(setup_plan)

    def _run(self, make: Callable[[], _sqlcore.Plan], single: bool = False) -> Any:
        """The plan ``make()`` builds in a transaction, built and run again
        after a transient failure (every batch is safe to repeat)."""
        attempts = Attempts(self.retry)
        while True:
            attempts.tries += 1
            try:
                if not self._ready:
                    self._transaction(setup_plan())
                    self._ready = True
                return self._transaction(make(), single)
            except psycopg.Error as exc:
                time.sleep(pause_or_raise(attempts, exc, "PostgreSQL store", "batch"))
                self._reconnect()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction (reads, then writes: see ``BaseStore.batch``)."""
        checked = self.validate_ops(ops)
        embedded = _index.embed(self._index, checked)
        return list(self._run(partial(self._plan, checked, embedded), self._single(checked)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for async code: the embedder is awaited, the
        database is reached from a worker thread."""
        checked = self.validate_ops(ops)
        embedded = await _index.aembed(self._index, checked)
        plan = partial(self._plan, checked, embedded)
        return list(await asyncio.to_thread(self._run, plan, self._single(checked)))

    def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return int(self._run(partial(_sqlcore.sweep, self._dialect)))


def __getattr__(name: str) -> Any:
    if name == "AsyncPostgresStore":
        from pregelkit.store.postgres.aio import AsyncPostgresStore

        return AsyncPostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
