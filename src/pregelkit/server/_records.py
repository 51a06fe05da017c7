"""The server's own rows: threads as LangGraph's server has them (an id, a
creation time, metadata), which exist before any run and apart from the
checkpoints a run leaves.

One table, ``pregelkit_server_threads``, in the server's database beside the
checkpoints, created if missing. The same SQL runs on SQLite and PostgreSQL
(only the placeholder differs). A metadata filter is read in Python over the
threads newest first: exact for any filter, and enough until a deployment
has threads by the hundred thousand.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from pregelkit.checkpoint._runqueue import IS_ACTIVE
from pregelkit.server._json import has_metadata

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pregelkit_server_threads ("
    "thread_id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, "
    "updated_at DOUBLE PRECISION NOT NULL, metadata TEXT NOT NULL, owner TEXT)",
    "CREATE INDEX IF NOT EXISTS pregelkit_server_threads_updated "
    "ON pregelkit_server_threads (updated_at, thread_id)",
    # a stateless run's thread, deleted once its run ends (``_stateless``)
    "CREATE TABLE IF NOT EXISTS pregelkit_server_temporary ("
    "thread_id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL)",
)
COLUMNS = "thread_id, created_at, updated_at, metadata, owner"
SCHEMA_LOCK = 0x70726567_73727672
"""PostgreSQL advisory lock held while the table is created: CREATE TABLE IF
NOT EXISTS run by two servers at once can fail on the catalogue's unique index."""
SCAN_BATCH = 500


@dataclass(frozen=True)
class ThreadRow:
    thread_id: str
    created_at: float
    updated_at: float
    metadata: dict[str, Any]
    owner: str | None
    """Who created it (``_auth.owner_of``: a digest of the API key, never
    the key), ``None`` on a server without keys; only its owner sees it."""

    @classmethod
    def of(cls, row: Sequence[Any]) -> ThreadRow:
        meta = json.loads(row[3])
        return cls(
            str(row[0]),
            float(row[1]),
            float(row[2]),
            meta if isinstance(meta, dict) else {},
            None if row[4] is None else str(row[4]),
        )


def _owned(owner: str | None) -> tuple[str, tuple[Any, ...]]:
    """The condition (and its parameter) that keeps ``owner``'s rows."""
    return ("owner IS NULL", ()) if owner is None else ("owner = ?", (owner,))


Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


class ThreadRecords:
    """Thread rows over a SQLite connection (one, locked) or a psycopg pool."""

    def __init__(self, kind: str, source: Any) -> None:
        self.kind = kind
        self.source = source
        self._lock = threading.Lock()
        with self._transaction() as run:
            if kind != "sqlite":  # two servers starting at once: one creates, the other waits
                run("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in SCHEMA:
                run(statement, ())

    @classmethod
    def sqlite(cls, path: str) -> ThreadRecords:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        return cls("sqlite", conn)

    def close(self) -> None:
        if self.kind == "sqlite":
            self.source.close()

    @contextmanager
    def _transaction(self) -> Iterator[Execute]:
        """One transaction; yields what runs a statement in it."""
        if self.kind == "sqlite":
            with self._lock:
                conn = self.source
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield partial(_execute, conn, "?")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        else:
            with self.source.connection() as conn, conn.transaction():
                yield partial(_execute, conn, "%s")

    def transaction(self) -> AbstractContextManager[Execute]:
        """One transaction on the server's database (the cron rows use it too)."""
        return self._transaction()

    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._transaction() as run:
            return run(sql, params)

    def create(
        self,
        thread_id: str,
        metadata: Mapping[str, Any],
        owner: str | None,
        temporary: bool = False,
    ) -> ThreadRow | None:
        """The new row, or ``None`` if the thread exists already (whoever
        owns it). ``temporary``: marked, in the same transaction, for
        deletion once its run ends (``temporary_threads``)."""
        now = time.time()
        with self._transaction() as run:
            rows = run(
                f"INSERT INTO pregelkit_server_threads ({COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                f"ON CONFLICT (thread_id) DO NOTHING RETURNING {COLUMNS}",
                (thread_id, now, now, json.dumps(dict(metadata)), owner),
            )
            if rows and temporary:
                run(
                    "INSERT INTO pregelkit_server_temporary (thread_id, created_at) VALUES (?, ?)",
                    (thread_id, now),
                )
        return ThreadRow.of(rows[0]) if rows else None

    def ended_temporary(
        self, orphaned_before: float, ended_before: float, settled_before: float, limit: int
    ) -> list[tuple[str, bool, bool]]:
        """Up to ``limit`` temporary threads, oldest first, with no run
        pending, queued, running, sleeping or waiting: those with a run that
        ended, and those created before ``orphaned_before`` that never had
        one (the request that created them failed before its run was
        queued); but not those already deleted but for their marks
        (``delete(..., keep_mark=True)``) whose runs ended after
        ``settled_before``. Each with whether its runs all ended before
        ``ended_before``, and before ``settled_before``."""
        # 'pending': a run enqueued behind the thread's active one (``_multitask``)
        before = (
            "NOT EXISTS (SELECT 1 FROM pregelkit_runs AS r "
            "WHERE r.thread_id = t.thread_id AND r.finished_at >= ?)"
        )
        rows = self._run(
            f"SELECT t.thread_id, CASE WHEN {before} THEN 1 ELSE 0 END, "
            f"CASE WHEN {before} THEN 1 ELSE 0 END "
            "FROM pregelkit_server_temporary AS t WHERE NOT EXISTS ("
            "SELECT 1 FROM pregelkit_runs AS r WHERE r.thread_id = t.thread_id "
            f"AND (r.{IS_ACTIVE} OR r.status = 'pending')) AND (t.created_at < ? OR EXISTS ("
            "SELECT 1 FROM pregelkit_runs AS r WHERE r.thread_id = t.thread_id)) "
            "AND (EXISTS (SELECT 1 FROM pregelkit_server_threads AS s "
            f"WHERE s.thread_id = t.thread_id) OR {before}) "
            "ORDER BY t.created_at LIMIT ?",
            (ended_before, settled_before, orphaned_before, settled_before, limit),
        )
        return [(str(r[0]), bool(r[1]), bool(r[2])) for r in rows]

    def get(self, thread_id: str, owner: str | None) -> ThreadRow | None:
        """``owner``'s thread ``thread_id``: another owner's is not found."""
        cond, params = _owned(owner)
        rows = self._run(
            f"SELECT {COLUMNS} FROM pregelkit_server_threads WHERE thread_id = ? AND {cond}",
            (thread_id, *params),
        )
        return ThreadRow.of(rows[0]) if rows else None

    def update(
        self, thread_id: str, metadata: Mapping[str, Any], owner: str | None
    ) -> ThreadRow | None:
        """Merge ``metadata`` into the thread's (as LangGraph's server does),
        in one transaction so concurrent updates lose no key; ``None`` if
        ``owner`` has no such thread."""
        cond, params = _owned(owner)
        lock = "" if self.kind == "sqlite" else " FOR UPDATE"
        with self._transaction() as run:
            rows = run(
                f"SELECT {COLUMNS} FROM pregelkit_server_threads "
                f"WHERE thread_id = ? AND {cond}{lock}",
                (thread_id, *params),
            )
            if not rows:
                return None
            merged = {**ThreadRow.of(rows[0]).metadata, **metadata}
            rows = run(
                f"UPDATE pregelkit_server_threads SET metadata = ?, updated_at = ? "
                f"WHERE thread_id = ? RETURNING {COLUMNS}",
                (json.dumps(merged), time.time(), thread_id),
            )
        return ThreadRow.of(rows[0])

    def delete(self, thread_id: str, keep_mark: bool = False) -> bool:
        """Delete the thread's row; ``keep_mark``: not its temporary mark,
        which says its runs' stream parts are still to delete."""
        with self._transaction() as run:
            if not keep_mark:
                run("DELETE FROM pregelkit_server_temporary WHERE thread_id = ?", (thread_id,))
            rows = run(
                "DELETE FROM pregelkit_server_threads WHERE thread_id = ? RETURNING thread_id",
                (thread_id,),
            )
        return bool(rows)

    def search(
        self,
        owner: str | None,
        metadata: Mapping[str, Any],
        ids: Sequence[str] | None,
        keep: Callable[[ThreadRow], bool],
        limit: int,
        offset: int,
    ) -> list[ThreadRow]:
        """``owner``'s threads newest first whose metadata holds
        ``metadata``'s keys with those values and that ``keep(row)`` keeps,
        ``offset`` of them skipped."""
        if ids is not None and not ids:
            return []
        cond, owned = _owned(owner)
        found: list[ThreadRow] = []
        after: tuple[float, str] | None = None  # the last row read: pages by (updated_at, id)
        while len(found) < offset + limit:
            sql = f"SELECT {COLUMNS} FROM pregelkit_server_threads WHERE {cond}"
            params: list[Any] = [*owned]
            if after is not None:
                sql += " AND (updated_at < ? OR (updated_at = ? AND thread_id < ?))"
                params.extend((after[0], after[0], after[1]))
            if ids is not None:
                sql += f" AND thread_id IN ({', '.join('?' for _ in ids)})"
                params.extend(ids)
            sql += f" ORDER BY updated_at DESC, thread_id DESC LIMIT {SCAN_BATCH}"
            rows = [ThreadRow.of(r) for r in self._run(sql, params)]
            for row in rows:
                if has_metadata(row.metadata, metadata) and keep(row):
                    found.append(row)
            if len(rows) < SCAN_BATCH:
                break
            after = (rows[-1].updated_at, rows[-1].thread_id)
        return found[offset : offset + limit]


def _execute(conn: Any, mark: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cursor = conn.execute(sql.replace("?", mark), params)
    return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
