"""A checkpoint saver in PostgreSQL, for any number of processes and machines.

Needs the ``postgres`` extra (``pip install pregelkit[postgres]``: psycopg 3
and its pool); importing pregelkit alone never imports psycopg.

The saver takes a ``psycopg.Connection`` (used by one call at a time, under a
lock) or a ``psycopg_pool.ConnectionPool`` (calls run in parallel on the
pool's connections). ``put`` and ``put_writes`` are one transaction each.
Tables are created on first use, or by ``setup()``, which is safe to run from
several processes at once.

``lock_thread`` holds a session-level advisory lock, so PostgreSQL drops the
lock when the process dies or loses its connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Literal

import psycopg
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import ConnectionPool

from pregelkit.checkpoint._rows import (
    check_filter,
    checkpoint_config,
    decode_checkpoint,
    encode_checkpoint,
    encode_writes,
    list_scope,
)
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    RunnableConfig,
    thread_coordinates,
)
from pregelkit.checkpoint.postgres import _sql
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.errors import ThreadBusyError

__all__ = ["PostgresSaver"]


class PostgresSaver(BaseCheckpointSaver[str]):
    """Stores checkpoints in PostgreSQL.

    ``PostgresSaver.from_conn_string(dsn)`` opens (and later closes) one
    connection; for a multi-threaded server pass a ``ConnectionPool``.
    """

    conn: psycopg.Connection[Any] | ConnectionPool[Any]

    def __init__(
        self,
        conn: psycopg.Connection[Any] | ConnectionPool[Any],
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self._conn_lock = threading.Lock()
        self._ready = False
        # The connection holding this saver's advisory locks, and their keys.
        self._lock_conn: psycopg.Connection[Any] | None = None
        self._held_keys: set[int] = set()
        self._lock_conn_guard = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(cls, dsn: str) -> Iterator[PostgresSaver]:
        """A saver on one new autocommit connection to ``dsn``, closed when the
        block ends."""
        with psycopg.Connection.connect(dsn, autocommit=True) as conn:
            yield cls(conn)

    def setup(self) -> None:
        """Create or migrate the tables. Idempotent and done on first use
        anyway; concurrent calls from several processes migrate one at a time
        (an advisory transaction lock)."""
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(_sql.LOCK_MIGRATIONS, (_sql.MIGRATION_LOCK_KEY,))
            cur.execute(_sql.CREATE_MIGRATIONS_TABLE)
            cur.execute(_sql.SELECT_SCHEMA_VERSION)
            current = _sql.schema_version(cur.fetchone())
            for version in range(current + 1, len(_sql.MIGRATIONS) + 1):
                for statement in _sql.MIGRATIONS[version - 1]:
                    cur.execute(statement)
                cur.execute(_sql.RECORD_MIGRATION, (version,))
        self._ready = True

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self._conn_lock:
                yield self.conn

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[TupleRow]]:
        """A cursor in its own transaction, whatever the connection's
        autocommit and row factory settings are."""
        if not self._ready:
            self.setup()
        with (
            self._connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur

    # reading

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and
        namespace; ``None`` if there is none."""
        thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
        with self._cursor() as cur:
            if checkpoint_id:
                cur.execute(_sql.SELECT_CHECKPOINT, (thread_id, checkpoint_ns, checkpoint_id))
            else:
                cur.execute(_sql.SELECT_LATEST_CHECKPOINT, (thread_id, checkpoint_ns))
            row = cur.fetchone()
        if row is None:
            return None
        return decode_checkpoint(self.serde, _sql.stored_checkpoint(row))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of every thread (``config=None``), of one
        thread, or of one namespace when ``config`` names it; ``filter`` keeps
        those whose metadata equals it on each of its keys (JSON values only).
        The rows are fetched in one query when iteration starts (no connection
        is held while the caller iterates) and loaded one by one."""
        query = _sql.list_query(list_scope(config, before), check_filter(filter), limit)
        return self._iter_list(query)

    def _iter_list(self, query: tuple[str, Sequence[Any]]) -> Iterator[CheckpointTuple]:
        with self._cursor() as cur:
            cur.execute(*query)
            rows = cur.fetchall()
        for row in rows:
            yield decode_checkpoint(self.serde, _sql.stored_checkpoint(row))

    # writing

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as a child of the checkpoint ``config`` names,
        with blobs for the channels in ``new_versions`` only."""
        row, blobs = encode_checkpoint(self.serde, config, checkpoint, metadata, new_versions)
        with self._cursor() as cur:
            if blobs:
                cur.executemany(_sql.INSERT_BLOB, blobs)
            cur.execute(_sql.UPSERT_CHECKPOINT, row)
        return checkpoint_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record a task's writes against the checkpoint ``config`` names: a
        special write replaces the task's earlier one in place, a regular write
        already stored is kept."""
        rows = encode_writes(self.serde, config, writes, task_id, task_path)
        if not rows:
            return
        with self._cursor() as cur:
            cur.executemany(_sql.UPSERT_WRITE, rows)

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        with self._cursor() as cur:
            for statement in _sql.DELETE_THREAD:
                cur.execute(statement, (thread_id,))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another; rows
        the target already has under the same ids are replaced, the rest of the
        target is left alone."""
        with self._cursor() as cur:
            for statement in _sql.COPY_THREAD:
                cur.execute(statement, (target_thread_id, source_thread_id))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads: ``delete`` forgets them entirely;
        ``keep_latest`` keeps each namespace's latest checkpoint with its pending
        writes and the blobs it references. One transaction for all threads."""
        statements = _sql.prune_statements(strategy)
        with self._cursor() as cur:
            for thread_id in thread_ids:
                for statement in statements:
                    cur.execute(statement, (thread_id,))

    # one run per thread

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        """Hold ``thread_id`` for one run, against other threads and processes:
        the in-process lock, then a session-level advisory lock (key: a 64-bit
        hash of the thread id), which PostgreSQL releases if this process dies.

        With a single connection, that connection holds the locks. With a pool,
        one pool connection holds every lock the saver has, from the first
        lock taken until the last one is released (so the pool needs at least
        two connections while runs go on)."""
        return _AdvisoryLock(self, thread_id, wait)

    def _try_lock(self, key: int) -> bool:
        with self._lock_conn_guard:
            conn = self._lock_conn or self._borrow_lock_connection()
            try:
                locked = self._lock_query(conn, _sql.TRY_LOCK_THREAD, key)
            except BaseException:
                self._after_lock_query_failed(conn)
                raise
            if locked:
                self._held_keys.add(key)
            elif not self._held_keys:
                self._give_back_lock_connection()
            return locked

    def _unlock(self, key: int) -> None:
        with self._lock_conn_guard:
            conn = self._lock_conn
            if conn is None or key not in self._held_keys:
                return  # lost with a connection that broke
            self._held_keys.discard(key)
            try:
                self._lock_query(conn, _sql.UNLOCK_THREAD, key)
            except psycopg.OperationalError:
                self._after_lock_query_failed(conn)
            if not self._held_keys:
                self._give_back_lock_connection()

    def _lock_query(self, conn: psycopg.Connection[Any], statement: str, key: int) -> bool:
        with (
            self._conn_lock if conn is self.conn else nullcontext(),
            conn.transaction(),
            conn.cursor() as cur,
        ):
            cur.execute(statement, (key,))
            row = cur.fetchone()
        return bool(row and row[0])

    def _borrow_lock_connection(self) -> psycopg.Connection[Any]:
        conn = self.conn.getconn() if isinstance(self.conn, ConnectionPool) else self.conn
        self._lock_conn = conn
        return conn

    def _give_back_lock_connection(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if isinstance(self.conn, ConnectionPool) and conn is not None:
            self.conn.putconn(conn)

    def _after_lock_query_failed(self, conn: psycopg.Connection[Any]) -> None:
        """A broken connection took every lock it held with it; anything else
        leaves the held locks as they were."""
        if conn.closed:
            self._held_keys.clear()
        if not self._held_keys:
            self._give_back_lock_connection()


class _AdvisoryLock(AbstractContextManager[None]):
    def __init__(self, saver: PostgresSaver, thread_id: str, wait: bool) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.wait = wait
        self.key = _sql.thread_lock_key(thread_id)
        self.local = BaseCheckpointSaver.lock_thread(saver, thread_id, wait=wait)

    def __enter__(self) -> None:
        self.local.__enter__()
        try:
            pause, longest = _sql.LOCK_POLL_SECONDS
            while not self.saver._try_lock(self.key):
                if not self.wait:
                    raise ThreadBusyError(
                        self.thread_id, f"(PostgreSQL advisory lock {self.key} is held)"
                    )
                time.sleep(pause)
                pause = min(pause * 2, longest)
        except BaseException:
            self.local.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.saver._unlock(self.key)
        finally:
            self.local.__exit__(None, None, None)
