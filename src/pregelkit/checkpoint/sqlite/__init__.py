"""A checkpoint saver in a SQLite file, for one machine and any number of processes.

The database runs in WAL mode with ``synchronous=NORMAL``: a commit survives
the process being killed (even by SIGKILL), but a power loss or OS crash may
drop the last few transactions (never corrupt the file). Writers from other
processes wait for each other up to ``busy_timeout`` instead of failing.

Each saver uses one connection, guarded by a lock, from any number of threads;
``put`` and ``put_writes`` are one transaction each. Two runs of one thread are
kept apart by ``lock_thread``: an ``flock`` on a file beside the database, which
the OS releases when the process dies however it dies.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal

import xxhash

from pregelkit.checkpoint._rows import (
    RESEAL_SELECTS,
    RESEAL_UPDATES,
    StoredCheckpoint,
    check_filter,
    checkpoint_config,
    decode_checkpoint,
    encode_checkpoint,
    encode_writes,
    list_scope,
    reseal_params,
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
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.checkpoint.sqlite import _sql
from pregelkit.errors import ThreadBusyError

if sys.platform != "win32":
    import fcntl

__all__ = ["SqliteSaver"]

BUSY_TIMEOUT_MS = 30_000
"""How long a write waits for another process's write lock before failing."""

_CheckpointRow = tuple[str, str, str, "str | None", str, bytes, str, bytes, str]


def connect(path: str) -> sqlite3.Connection:
    """A connection the savers can share between threads; ``file:`` paths are
    opened as URIs (e.g. ``file:state.db?mode=ro``)."""
    return sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, uri=path.startswith("file:")
    )


# Positions for new pending writes, increasing: nanoseconds since the epoch at
# import, then counting up. One run per thread means a resuming process starts
# after the one it replaces, so its writes also sort after that one's.
_seqs = itertools.count(time.time_ns())


def _next_seqs(n: int) -> list[int]:
    return [next(_seqs) for _ in range(n)]


class SqliteSaverCore(BaseCheckpointSaver[str]):
    """Everything the sync and async SQLite savers share: the async saver only
    moves these calls onto its worker thread."""

    conn: sqlite3.Connection

    def __init__(
        self, conn: sqlite3.Connection, *, serde: SerializerProtocol | None = None
    ) -> None:
        """``conn`` must come from ``sqlite3.connect(..., check_same_thread=False)``
        when the saver is used from several threads (the engine runs tasks in
        worker threads). The saver controls transactions itself, so it sets the
        connection's ``isolation_level`` to ``None``."""
        super().__init__(serde=serde)
        conn.isolation_level = None
        self.conn = conn
        self._lock = threading.Lock()
        self._ready = False
        path = self._path()
        self._lock_dir = f"{path}.locks" if path else None

    def _setup(self) -> None:
        with self._lock:
            self._setup_locked()

    def _setup_locked(self) -> None:
        if self._ready:
            return
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Every durable task write is one commit appending whole pages to the
        # WAL: 1 KiB pages (only a new file takes them) and a checkpoint every
        # 10k pages (~10 MiB of WAL) make that commit ~20% cheaper.
        conn.execute("PRAGMA page_size = 1024")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
        # IMMEDIATE: two processes setting up the same file migrate one at a time.
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_sql.CREATE_MIGRATIONS_TABLE)
            (current,) = conn.execute(_sql.SELECT_SCHEMA_VERSION).fetchone()
            if current > len(_sql.MIGRATIONS):
                raise RuntimeError(
                    f"the checkpoint tables in {self._path() or 'this database'} are at schema "
                    f"version {current}, newer than this pregelkit knows "
                    f"({len(_sql.MIGRATIONS)}): upgrade pregelkit to use this database"
                )
            for version in range(current + 1, len(_sql.MIGRATIONS) + 1):
                for statement in _sql.MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute(_sql.RECORD_MIGRATION, (version,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._ready = True

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the saver's lock. Writes start IMMEDIATE so a
        busy database makes them wait at BEGIN (``busy_timeout``) rather than
        fail halfway; reads get one consistent snapshot."""
        with self._lock:
            if not self._ready:
                self._setup_locked()
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # reading

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and
        namespace; ``None`` if there is none."""
        thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
        with self._transaction(write=False) as conn:
            if checkpoint_id:
                row = conn.execute(
                    _sql.SELECT_CHECKPOINT, (thread_id, checkpoint_ns, checkpoint_id)
                ).fetchone()
            else:
                row = conn.execute(
                    _sql.SELECT_LATEST_CHECKPOINT, (thread_id, checkpoint_ns)
                ).fetchone()
            if row is None:
                return None
            stored = _stored(conn, row)
        return decode_checkpoint(self.serde, stored)

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
        Rows are read when iteration starts; each checkpoint's values are read
        as it is reached, so the lock is never held between items."""
        query = _sql.list_query(list_scope(config, before), check_filter(filter), limit)
        return self._iter_list(query)

    def _iter_list(self, query: tuple[str, Sequence[Any]]) -> Iterator[CheckpointTuple]:
        for row in self._list_rows(query):
            yield self._load_row(row)

    def _list_rows(self, query: tuple[str, Sequence[Any]]) -> Sequence[_CheckpointRow]:
        with self._transaction(write=False) as conn:
            rows: Sequence[_CheckpointRow] = conn.execute(*query).fetchall()
        return rows

    def _load_row(self, row: _CheckpointRow) -> CheckpointTuple:
        with self._transaction(write=False) as conn:
            stored = _stored(conn, row)
        return decode_checkpoint(self.serde, stored)

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
        with self._transaction(write=True) as conn:
            conn.executemany(_sql.INSERT_BLOB, blobs)
            conn.execute(_sql.UPSERT_CHECKPOINT, row)
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
        encoded = encode_writes(self.serde, config, writes, task_id, task_path)
        if not encoded:
            return
        rows = [(*row, seq) for row, seq in zip(encoded, _next_seqs(len(encoded)))]
        if len(rows) == 1:
            # one statement is its own transaction: no BEGIN/COMMIT round trips
            # for the common case of a task that made one write
            with self._lock:
                if not self._ready:
                    self._setup_locked()
                self.conn.execute(_sql.UPSERT_WRITE, rows[0])
            return
        with self._transaction(write=True) as conn:
            conn.executemany(_sql.UPSERT_WRITE, rows)

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        with self._transaction(write=True) as conn:
            for statement in _sql.DELETE_THREAD:
                conn.execute(statement, (thread_id,))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another; rows
        the target already has under the same ids are replaced, the rest of the
        target is left alone."""
        with self._transaction(write=True) as conn:
            for statement in _sql.COPY_THREAD:
                conn.execute(statement, (target_thread_id, source_thread_id))
            reseal = getattr(self.serde, "reseal", None)
            if reseal is not None:  # values sealed to their thread: seal the copies again
                rows = [conn.execute(sql, (source_thread_id,)).fetchall() for sql in RESEAL_SELECTS]
                params = reseal_params(reseal, source_thread_id, target_thread_id, rows)
                for sql, batch in zip(RESEAL_UPDATES, params):
                    conn.executemany(sql, batch)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads: ``delete`` forgets them entirely;
        ``keep_latest`` keeps each namespace's latest checkpoint with its pending
        writes and the blobs it references. One transaction for all threads."""
        if strategy == "keep_latest":
            statements = _sql.PRUNE_KEEP_LATEST
        elif strategy == "delete":
            statements = _sql.DELETE_THREAD
        else:
            raise ValueError(
                f"prune() strategy must be 'keep_latest' or 'delete', got {strategy!r}"
            )
        params = [(thread_id,) for thread_id in thread_ids]
        with self._transaction(write=True) as conn:
            for statement in statements:
                conn.executemany(statement, params)

    # one run per thread

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        """Hold ``thread_id`` for one run, against other threads and other
        processes: an exclusive ``flock`` on ``<database>.locks/<hash of the
        thread id>``, released when the run ends or the process dies. Lock files
        are never deleted (deleting one would race with a process opening it).
        An in-memory database exists in one process only, so it uses the
        in-process lock."""
        if self._lock_dir is None or sys.platform == "win32":
            return super().lock_thread(thread_id, wait=wait)
        name = xxhash.xxh3_128_hexdigest(thread_id.encode())
        return _FileLock(os.path.join(self._lock_dir, name), thread_id, wait)

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
    def from_conn_string(cls, path: str) -> Iterator[SqliteSaver]:
        """A saver on the database at ``path`` (``":memory:"`` for a private,
        in-memory one), closed when the block ends."""
        conn = connect(path)
        try:
            yield cls(conn)
        finally:
            conn.close()

    def setup(self) -> None:
        """Create or migrate the tables; idempotent, and done on first use
        anyway. Also sets WAL mode, ``synchronous=NORMAL`` and ``busy_timeout``."""
        self._setup()


class _FileLock(AbstractContextManager[None]):
    """An exclusive ``flock`` on one file: per open file, so it excludes other
    threads of this process as well as other processes."""

    def __init__(self, path: str, thread_id: str, wait: bool) -> None:
        self.path = path
        self.thread_id = thread_id
        self.wait = wait
        self.fd = -1

    def __enter__(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ThreadBusyError(self.thread_id, f"(lock file: {self.path})") from None
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def __exit__(self, *exc: object) -> None:
        fd, self.fd = self.fd, -1
        os.close(fd)  # closing the last descriptor releases the flock


def _stored(conn: sqlite3.Connection, row: _CheckpointRow) -> StoredCheckpoint:
    """A checkpoint row with its blobs and its writes, read in the caller's
    transaction."""
    thread_id, checkpoint_ns, checkpoint_id, parent_id, type_, data, mtype, mdata, versions = row
    blobs = conn.execute(_sql.SELECT_BLOBS, (versions, thread_id, checkpoint_ns)).fetchall()
    writes = conn.execute(_sql.SELECT_WRITES, (thread_id, checkpoint_ns, checkpoint_id)).fetchall()
    return StoredCheckpoint(
        thread_id, checkpoint_ns, checkpoint_id, parent_id, type_, data, mtype, mdata, blobs, writes
    )
