"""SQL of the SQLite savers, shared by SqliteSaver and AsyncSqliteSaver.

Tables are prefixed ``pregelkit_`` so a database that also holds another
library's ``checkpoints`` table is never misread. The checkpoint row keeps a
JSON copy of its channel versions beside the serialized checkpoint, so blob
lookups and pruning are joins instead of a load of every checkpoint.
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from pregelkit._internal._plan import Plan, Statement
from pregelkit.checkpoint._plans import SaverSQL
from pregelkit.checkpoint._rows import (
    ON_CHECKPOINT_CONFLICT,
    ON_WRITE_CONFLICT,
    ListScope,
    StoredCheckpoint,
    filter_json,
)
from pregelkit.checkpoint._runqueue import SQLITE
from pregelkit.checkpoint.attempts import attempt_sql

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE pregelkit_checkpoints (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            type TEXT NOT NULL,
            checkpoint BLOB NOT NULL,
            metadata_type TEXT NOT NULL,
            metadata BLOB NOT NULL,
            metadata_json TEXT NOT NULL,
            channel_versions TEXT NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )
        """,
        """
        CREATE TABLE pregelkit_blobs (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            type TEXT NOT NULL,
            blob BLOB,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )
        """,
        # WITHOUT ROWID keyed by the write itself: a task's write touches one
        # b-tree, not a table plus an index (a third less per durable write).
        # seq (assigned by the writer, increasing) orders pending writes by
        # insertion; an upsert (an UPDATE) leaves it alone.
        """
        CREATE TABLE pregelkit_writes (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            channel TEXT NOT NULL,
            type TEXT NOT NULL,
            value BLOB NOT NULL,
            task_path TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        ) WITHOUT ROWID
        """,
    ),
    (
        # one run-control mark per thread ("cancelled", "drained"): what
        # cancel() leaves for the run that owns the thread, which polls it
        """
        CREATE TABLE pregelkit_thread_control (
            thread_id TEXT PRIMARY KEY,
            mark TEXT NOT NULL,
            updated_at TEXT NOT NULL
        ) WITHOUT ROWID
        """,
    ),
    (
        # one row per task attempt (timelines): a start row, replaced by the
        # finished one; keyed by run so a thread's history reads in key order
        """
        CREATE TABLE pregelkit_attempts (
            thread_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            task_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            step INTEGER NOT NULL,
            name TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            outcome TEXT,
            error_type TEXT,
            error_message TEXT,
            pid INTEGER,
            host TEXT,
            worker TEXT,
            PRIMARY KEY (thread_id, run_id, checkpoint_ns, task_id, attempt)
        ) WITHOUT ROWID
        """,
    ),
    (
        # the durable run queue (checkpoint/_runqueue.py): one row per run
        # request; fence grows by one at each claim, lease_until is seconds
        # since the epoch by the database's clock
        """
        CREATE TABLE pregelkit_runs (
            run_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            workflow TEXT NOT NULL,
            status TEXT NOT NULL,
            priority INTEGER NOT NULL,
            input_type TEXT NOT NULL,
            input BLOB NOT NULL,
            config_type TEXT NOT NULL,
            config BLOB NOT NULL,
            fence INTEGER NOT NULL DEFAULT 0,
            worker TEXT,
            lease_until REAL,
            attempts INTEGER NOT NULL DEFAULT 0,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            result_type TEXT,
            result BLOB,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            finished_at REAL
        )
        """,
        # one queued-or-running run per thread: what makes submit idempotent
        """
        CREATE UNIQUE INDEX pregelkit_runs_active ON pregelkit_runs (thread_id)
        WHERE status IN ('queued', 'running')
        """,
        "CREATE INDEX pregelkit_runs_queue ON pregelkit_runs (status, priority, created_at)",
        "CREATE INDEX pregelkit_runs_thread ON pregelkit_runs (thread_id, created_at)",
        """
        CREATE TABLE pregelkit_workers (
            worker_id TEXT PRIMARY KEY,
            workflows TEXT NOT NULL,
            seen_at REAL NOT NULL,
            stopped INTEGER NOT NULL DEFAULT 0
        )
        """,
    ),
    (
        # a claim walks the runs it may take in the order it takes them and
        # stops at its LIMIT: without it every claim sorted the whole backlog
        # (25 ms a claim behind 50,000 queued runs on PostgreSQL, 0.4 ms with it)
        """
        CREATE INDEX pregelkit_runs_claim ON pregelkit_runs (priority DESC, created_at, run_id)
        WHERE status IN ('queued', 'running')
        """,
    ),
    (
        # durable waits (pregelkit.durable, checkpoint/_waits.py): a run that
        # sleeps or waits keeps its row, with when it is due (seconds since
        # the epoch; NULL: when what it waits for comes) and what it waits for
        "ALTER TABLE pregelkit_runs ADD COLUMN due_at REAL",
        "ALTER TABLE pregelkit_runs ADD COLUMN wait_kind TEXT",
        "ALTER TABLE pregelkit_runs ADD COLUMN wait_topic TEXT",
        "ALTER TABLE pregelkit_runs ADD COLUMN parent_thread TEXT",
        # a sleeping or waiting run is still its thread's one active run
        "DROP INDEX pregelkit_runs_active",
        """
        CREATE UNIQUE INDEX pregelkit_runs_active ON pregelkit_runs (thread_id)
        WHERE status IN ('queued', 'running', 'sleeping', 'waiting')
        """,
        # a claim takes the due ones in due order and stops at its LIMIT: the
        # runs waiting for later (or for ever) are never walked
        """
        CREATE INDEX pregelkit_runs_due ON pregelkit_runs (due_at)
        WHERE status IN ('sleeping', 'waiting') AND due_at IS NOT NULL
        """,
        # topic '' is the default topic; sender is the idempotency key of a
        # send made inside a workflow, consumed_by the key of the recv that
        # took the message (each unique: once each)
        """
        CREATE TABLE pregelkit_messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            thread_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            sender TEXT UNIQUE,
            value_type TEXT NOT NULL,
            value BLOB NOT NULL,
            created_at REAL NOT NULL,
            consumed_by TEXT,
            consumed_at REAL
        )
        """,
        """
        CREATE INDEX pregelkit_messages_unconsumed ON pregelkit_messages (thread_id, topic, seq)
        WHERE consumed_by IS NULL
        """,
        # a partial index, not a UNIQUE column: SQLite's planner took a UNIQUE
        # column's index for `consumed_by IS NULL` (every unconsumed message
        # of every thread) over the one above
        """
        CREATE UNIQUE INDEX pregelkit_messages_consumed ON pregelkit_messages (consumed_by)
        WHERE consumed_by IS NOT NULL
        """,
        """
        CREATE TABLE pregelkit_events (
            thread_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value_type TEXT NOT NULL,
            value BLOB NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (thread_id, key)
        )
        """,
    ),
    (
        # a cancelled parent cancels its children that are not detached
        # (_runqueue.cancel): found by their parent's thread among the active runs
        "ALTER TABLE pregelkit_runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0",
        """
        CREATE INDEX pregelkit_runs_children ON pregelkit_runs (parent_thread)
        WHERE parent_thread IS NOT NULL AND status IN ('queued', 'running', 'sleeping', 'waiting')
        """,
    ),
    (
        # retention (checkpoint/_retention.py): one row, the lease of the
        # worker pruning now (one at a time) and when the last prune ended,
        # both by the database's clock
        """
        CREATE TABLE pregelkit_retention (
            id INTEGER PRIMARY KEY,
            holder TEXT,
            lease_until REAL,
            pruned_at REAL
        )
        """,
    ),
    (
        # named queues with limits (checkpoint/_queues.py): one declaration per
        # name, the latest wins; NULL is no limit. rate_count starts at most in
        # any window of rate_seconds
        """
        CREATE TABLE pregelkit_queues (
            name TEXT PRIMARY KEY,
            concurrency INTEGER,
            worker_concurrency INTEGER,
            key_concurrency INTEGER,
            rate_count INTEGER,
            rate_seconds REAL,
            updated_at REAL NOT NULL
        )
        """,
        # the starts of rate-limited queues, by the claims that made them (in
        # their transaction: a worker killed after its claim committed counted)
        """
        CREATE TABLE pregelkit_queue_starts (
            queue TEXT NOT NULL,
            started_at REAL NOT NULL
        )
        """,
        "CREATE INDEX pregelkit_queue_starts_window ON pregelkit_queue_starts (queue, started_at)",
        # '' is the default queue; not_before: a debounced run starts no sooner
        "ALTER TABLE pregelkit_runs ADD COLUMN queue TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE pregelkit_runs ADD COLUMN queue_key TEXT",
        "ALTER TABLE pregelkit_runs ADD COLUMN dedup_id TEXT",
        "ALTER TABLE pregelkit_runs ADD COLUMN not_before REAL",
        # the default queue's claim walks its own runs only; a named queue's
        # claim walks that queue's, in the order it takes them
        "DROP INDEX pregelkit_runs_claim",
        """
        CREATE INDEX pregelkit_runs_claim ON pregelkit_runs (priority DESC, created_at, run_id)
        WHERE status IN ('queued', 'running') AND queue = ''
        """,
        """
        CREATE INDEX pregelkit_runs_claim_queue
        ON pregelkit_runs (queue, priority DESC, created_at, run_id)
        WHERE status IN ('queued', 'running') AND queue <> ''
        """,
        # what a limited claim counts: a queue's running runs, per key, per worker
        """
        CREATE INDEX pregelkit_runs_held ON pregelkit_runs (queue, queue_key, worker)
        WHERE status = 'running' AND queue <> ''
        """,
        # one active run per (queue, dedup_id)
        """
        CREATE UNIQUE INDEX pregelkit_runs_dedup ON pregelkit_runs (queue, dedup_id)
        WHERE dedup_id IS NOT NULL AND status IN ('queued', 'running', 'sleeping', 'waiting')
        """,
        """
        CREATE INDEX pregelkit_runs_debounce ON pregelkit_runs (queue, queue_key)
        WHERE status = 'queued' AND not_before IS NOT NULL
        """,
    ),
    (
        # schedules (checkpoint/_schedules.py): a workflow fired by cron or
        # every N seconds; next_at is the first slot not yet fired or skipped
        # (seconds since the epoch, by the workers' clock; NULL: no more)
        """
        CREATE TABLE pregelkit_schedules (
            schedule_id TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            cron TEXT,
            every_seconds REAL,
            input_type TEXT,
            input BLOB,
            timezone TEXT NOT NULL,
            catchup TEXT NOT NULL,
            start_at REAL,
            end_at REAL,
            paused INTEGER NOT NULL DEFAULT 0,
            next_at REAL,
            last_slot_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )
        """,
        # what a worker's check reads: the due ones, earliest first
        """
        CREATE INDEX pregelkit_schedules_due ON pregelkit_schedules (next_at)
        WHERE paused = 0 AND next_at IS NOT NULL
        """,
        # a slot fired is a row: the unique key makes it fire once
        """
        CREATE TABLE pregelkit_schedule_slots (
            schedule_id TEXT NOT NULL,
            slot_at REAL NOT NULL,
            thread_id TEXT NOT NULL,
            run_id TEXT,
            fired_at REAL NOT NULL,
            PRIMARY KEY (schedule_id, slot_at)
        )
        """,
    ),
    (
        # stream parts (checkpoint/_parts.py): what a run started with
        # stream modes emitted, written by its worker in batches, read by
        # any process serving its stream (pregelkit serve); part_id orders
        # one run's parts and is the stream's event id
        """
        CREATE TABLE pregelkit_stream_parts (
            part_id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            mode TEXT NOT NULL,
            ns TEXT NOT NULL,
            data_type TEXT NOT NULL,
            data BLOB NOT NULL
        )
        """,
        """
        CREATE INDEX pregelkit_stream_parts_run ON pregelkit_stream_parts (run_id, part_id)
        """,
    ),
    (
        # delete_thread deletes the thread's mailbox too: its messages, read
        # and unread (the index of migration 6 holds only unread ones)
        "CREATE INDEX pregelkit_messages_thread ON pregelkit_messages (thread_id)",
    ),
    (
        # a schedule whose every slot runs on one thread (pregelkit serve's
        # thread crons); NULL: each slot on a thread of its own, as before
        "ALTER TABLE pregelkit_schedules ADD COLUMN thread_id TEXT",
    ),
)
"""Migration N (1-based) is ``MIGRATIONS[N - 1]``; append, never edit."""

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS pregelkit_migrations (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
)
"""
SELECT_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM pregelkit_migrations"
RECORD_MIGRATION = (
    "INSERT INTO pregelkit_migrations (version, applied_at) VALUES (?, datetime('now'))"
)

UPSERT_ATTEMPT, SELECT_ATTEMPTS, _COPY_ATTEMPTS = attempt_sql("?")

UPSERT_CHECKPOINT = (
    """
INSERT INTO pregelkit_checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    metadata_type, metadata, metadata_json, channel_versions
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
    + ON_CHECKPOINT_CONFLICT
)

# A version names one value, so a blob that is already stored is the same blob.
INSERT_BLOB = """
INSERT INTO pregelkit_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
"""

# Special writes (negative idx) replace the earlier one in place, keeping its
# seq and so its position; regular writes keep the first value.
UPSERT_WRITE = (
    """
INSERT INTO pregelkit_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path, seq
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
    + ON_WRITE_CONFLICT
    + "WHERE excluded.idx < 0\n"
)

_CHECKPOINT_COLUMNS = """
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
       metadata_type, metadata, channel_versions
FROM pregelkit_checkpoints
"""
SELECT_CHECKPOINT = (
    _CHECKPOINT_COLUMNS + "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
SELECT_LATEST_CHECKPOINT = (
    _CHECKPOINT_COLUMNS
    + "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1"
)

# Parameters: the checkpoint's channel_versions JSON, thread id, namespace.
# CROSS JOIN keeps json_each the outer loop, so each version is one index
# lookup instead of a scan of every blob of the thread.
SELECT_BLOBS = """
SELECT b.channel, b.type, b.blob
FROM json_each(?) AS v
CROSS JOIN pregelkit_blobs AS b
WHERE b.thread_id = ? AND b.checkpoint_ns = ? AND b.channel = v.key AND b.version = v.value
"""

SELECT_WRITES = """
SELECT task_id, channel, type, value FROM pregelkit_writes
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
ORDER BY seq
"""

DELETE_THREAD = (
    "DELETE FROM pregelkit_checkpoints WHERE thread_id = ?",
    "DELETE FROM pregelkit_blobs WHERE thread_id = ?",
    "DELETE FROM pregelkit_writes WHERE thread_id = ?",
    "DELETE FROM pregelkit_thread_control WHERE thread_id = ?",
    "DELETE FROM pregelkit_attempts WHERE thread_id = ?",
    # its mailbox (pregelkit.durable): messages sent to it, events it set
    "DELETE FROM pregelkit_messages WHERE thread_id = ?",
    "DELETE FROM pregelkit_events WHERE thread_id = ?",
)

# Parameters: target thread id, source thread id. Rows the target already has
# under the same key are replaced by the source's.
COPY_THREAD = (
    """
    INSERT INTO pregelkit_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
        metadata_type, metadata, metadata_json, channel_versions
    )
    SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
           metadata_type, metadata, metadata_json, channel_versions
    FROM pregelkit_checkpoints WHERE thread_id = ?
"""
    + ON_CHECKPOINT_CONFLICT,
    """
    INSERT INTO pregelkit_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT ?, checkpoint_ns, channel, version, type, blob
    FROM pregelkit_blobs WHERE thread_id = ?
    ON CONFLICT DO NOTHING
    """,
    """
    INSERT INTO pregelkit_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path, seq
    )
    SELECT ?, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path, seq
    FROM pregelkit_writes WHERE thread_id = ? ORDER BY seq
"""
    + ON_WRITE_CONFLICT,
    _COPY_ATTEMPTS,
)

# Parameter: thread id. Keeps each namespace's latest checkpoint, its writes,
# the writes saved ahead of a checkpoint not saved yet (a later id, or a
# namespace with none: its pending writes once it lands) and the blobs its
# channel versions reference; order matters (blobs and writes are judged
# against the checkpoints that remain).
PRUNE_KEEP_LATEST = (
    """
    DELETE FROM pregelkit_checkpoints
    WHERE thread_id = ? AND checkpoint_id < (
        SELECT max(k.checkpoint_id) FROM pregelkit_checkpoints AS k
        WHERE k.thread_id = pregelkit_checkpoints.thread_id
          AND k.checkpoint_ns = pregelkit_checkpoints.checkpoint_ns
    )
    """,
    """
    DELETE FROM pregelkit_writes
    WHERE thread_id = ? AND checkpoint_id < (
        SELECT max(c.checkpoint_id) FROM pregelkit_checkpoints AS c
        WHERE c.thread_id = pregelkit_writes.thread_id
          AND c.checkpoint_ns = pregelkit_writes.checkpoint_ns
    )
    """,
    """
    DELETE FROM pregelkit_attempts
    WHERE thread_id = ? AND run_id < (
        SELECT max(a.run_id) FROM pregelkit_attempts AS a
        WHERE a.thread_id = pregelkit_attempts.thread_id
    )
    """,
    """
    DELETE FROM pregelkit_blobs
    WHERE thread_id = ? AND NOT EXISTS (
        SELECT 1 FROM pregelkit_checkpoints AS c, json_each(c.channel_versions) AS v
        WHERE c.thread_id = pregelkit_blobs.thread_id
          AND c.checkpoint_ns = pregelkit_blobs.checkpoint_ns
          AND v.key = pregelkit_blobs.channel
          AND v.value = pregelkit_blobs.version
    )
    """,
)


def list_query(
    scope: ListScope, filter: dict[str, Any], limit: int | None
) -> tuple[str, list[Any]]:
    """SELECT of the checkpoint rows ``list`` yields, newest first."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("thread_id = ?", scope.thread_id),
        ("checkpoint_ns = ?", scope.checkpoint_ns),
        ("checkpoint_id = ?", scope.checkpoint_id),
        ("checkpoint_id < ?", scope.before_id),
    ):
        if value is not None:
            clauses.append(column)
            params.append(value)
    for key, value in filter.items():
        parent, leaf = _metadata_path(key)
        test, value_params = _metadata_test(value)
        clauses.append(
            f"EXISTS (SELECT 1 FROM json_each(metadata_json, ?) AS m WHERE m.key = ? AND {test})"
        )
        params.extend((parent, leaf, *value_params))
    sql = _CHECKPOINT_COLUMNS
    if clauses:
        sql += "WHERE " + " AND ".join(clauses)
    sql += " ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return sql, params


_FILTER_KEY = re.compile(r"[\w-]+(?:\.[\w-]+)*")


def _metadata_path(key: Any) -> tuple[str, str]:
    """The JSON path of the object holding ``key``'s value, and its last field.

    As in LangGraph's ``SqliteSaver``, a ``.`` in a filter key reads a nested
    field (``"user.level"``) and a key of other characters is refused, so
    code written for it filters the same here; letters and digits of any
    script are allowed (LangGraph's allows ASCII only). The path is a bound
    parameter either way; the rule is about meaning, not injection."""
    if not isinstance(key, str) or not _FILTER_KEY.fullmatch(key):
        raise ValueError(
            f"Invalid filter key {key!r}: SqliteSaver filter keys are letters, digits, '_' "
            "and '-', and a '.' between two of them reads a nested field ('user.level')"
        )
    *parents, leaf = key.split(".")
    return "$" + "".join(f'."{part}"' for part in parents), leaf


def _metadata_test(value: Any) -> tuple[str, tuple[Any, ...]]:
    """Equality of a ``json_each`` row ``m`` with a filter value, as Python's
    ``==`` sees it: numbers and booleans compare by value, and a string never
    equals a number or a container that prints the same."""
    if value is None:
        return "m.type = 'null'", ()
    if isinstance(value, (bool, int, float)):
        return "m.type IN ('integer', 'real', 'true', 'false') AND m.value = ?", (value,)
    if isinstance(value, str):
        return "m.type = 'text' AND m.value = ?", (value,)
    kind = "object" if isinstance(value, dict) else "array"
    return f"m.type = '{kind}' AND json(m.value) = json(?)", (filter_json(value),)


SELECT_THREAD_CONTROL = "SELECT mark FROM pregelkit_thread_control WHERE thread_id = ?"
# Parameters: thread id, thread id. The mark, and the status of the thread's active
# queued run: queued, running, sleeping or waiting (a durable wait's row, suspended on
# a worker), or 'parked' (a wait's row an invoke process made, and renews while it lives).
# The active index's condition is spelled out (as _runqueue.IS_ACTIVE) for SQLite's
# planner, which otherwise took pregelkit_runs_thread, a walk of every run the thread had.
SELECT_THREAD_GATE = (
    "SELECT (SELECT mark FROM pregelkit_thread_control WHERE thread_id = ?), "
    "(SELECT CASE WHEN lease_until IS NOT NULL AND status IN ('sleeping', 'waiting') "
    "THEN 'parked' ELSE status END FROM pregelkit_runs WHERE thread_id = ? "
    "AND status IN ('queued', 'running', 'sleeping', 'waiting'))"
)
UPSERT_THREAD_CONTROL = """
INSERT INTO pregelkit_thread_control (thread_id, mark, updated_at)
VALUES (?, ?, datetime('now'))
ON CONFLICT (thread_id) DO UPDATE SET mark = excluded.mark, updated_at = excluded.updated_at
"""
DELETE_THREAD_CONTROL = "DELETE FROM pregelkit_thread_control WHERE thread_id = ?"


# Positions for new pending writes, increasing: nanoseconds since the epoch at
# import, then counting up. One run per thread means a resuming process starts
# after the one it replaces, so its writes also sort after that one's.
_seqs = itertools.count(time.time_ns())


class _SqliteSQL(SaverSQL):
    def stored(self, row: Sequence[Any]) -> Plan[StoredCheckpoint]:
        """Two more queries: the blobs and the writes."""
        thread_id, ns, checkpoint_id, parent_id, type_, data, mtype, mdata, versions = row
        blobs = yield Statement(SELECT_BLOBS, (versions, thread_id, ns), "all")
        writes = yield Statement(SELECT_WRITES, (thread_id, ns, checkpoint_id), "all")
        return StoredCheckpoint(
            thread_id, ns, checkpoint_id, parent_id, type_, data, mtype, mdata, blobs, writes
        )

    def one_row(self, sql: str, row: Sequence[Any]) -> Statement:
        """A batch of one: inside a grouped block, the saver sends it with
        the block's other rows of that statement."""
        return Statement(sql, [row], "many")

    def write_rows(self, rows: list[Any]) -> list[Any]:
        return [(*row, next(_seqs)) for row in rows]


SQL = _SqliteSQL(sys.modules[__name__], SQLITE)
"""The statements of the plans the savers share (``checkpoint._plans``)."""
