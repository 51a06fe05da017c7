"""SQL of the PostgreSQL savers, shared by PostgresSaver and AsyncPostgresSaver.

The tables mirror the SQLite ones (``bytea`` blobs, ``jsonb`` for the metadata
copy and the channel versions). One SELECT returns a checkpoint together with
its blobs and its writes as parallel arrays, so reading a checkpoint is one
round trip. Checkpoint ids use the "C" collation: their byte order is their
creation order, whatever the database's locale.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import xxhash

from pregelkit._internal._plan import Plan, done
from pregelkit.checkpoint._plans import SaverSQL
from pregelkit.checkpoint._rows import (
    ON_CHECKPOINT_CONFLICT,
    ON_WRITE_CONFLICT,
    ListScope,
    StoredCheckpoint,
    filter_json,
)
from pregelkit.checkpoint._runqueue import POSTGRES
from pregelkit.checkpoint.attempts import attempt_sql

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE pregelkit_checkpoints (
            thread_id text NOT NULL,
            checkpoint_ns text NOT NULL,
            checkpoint_id text COLLATE "C" NOT NULL,
            parent_checkpoint_id text COLLATE "C",
            type text NOT NULL,
            checkpoint bytea NOT NULL,
            metadata_type text NOT NULL,
            metadata bytea NOT NULL,
            metadata_json jsonb NOT NULL,
            channel_versions jsonb NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )
        """,
        """
        CREATE TABLE pregelkit_blobs (
            thread_id text NOT NULL,
            checkpoint_ns text NOT NULL,
            channel text NOT NULL,
            version text NOT NULL,
            type text NOT NULL,
            blob bytea,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )
        """,
        # seq orders pending writes by insertion; an upsert leaves it alone.
        """
        CREATE TABLE pregelkit_writes (
            seq bigint GENERATED ALWAYS AS IDENTITY,
            thread_id text NOT NULL,
            checkpoint_ns text NOT NULL,
            checkpoint_id text COLLATE "C" NOT NULL,
            task_id text NOT NULL,
            idx integer NOT NULL,
            channel text NOT NULL,
            type text NOT NULL,
            value bytea NOT NULL,
            task_path text NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )
        """,
    ),
    (
        # one run-control mark per thread ("cancelled", "drained"): what
        # cancel() leaves for the run that owns the thread, which polls it
        """
        CREATE TABLE pregelkit_thread_control (
            thread_id text PRIMARY KEY,
            mark text NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """,
    ),
    (
        # one row per task attempt (timelines): a start row, replaced by the
        # finished one; keyed by run so a thread's history reads in key order
        """
        CREATE TABLE pregelkit_attempts (
            thread_id text NOT NULL,
            run_id text COLLATE "C" NOT NULL,
            checkpoint_ns text NOT NULL,
            task_id text NOT NULL,
            attempt integer NOT NULL,
            step integer NOT NULL,
            name text NOT NULL,
            started_at double precision NOT NULL,
            ended_at double precision,
            outcome text,
            error_type text,
            error_message text,
            pid integer,
            host text,
            worker text,
            PRIMARY KEY (thread_id, run_id, checkpoint_ns, task_id, attempt)
        )
        """,
    ),
    (
        # the durable run queue (checkpoint/_runqueue.py): one row per run
        # request; fence grows by one at each claim, lease_until is seconds
        # since the epoch by the database's clock
        """
        CREATE TABLE pregelkit_runs (
            run_id text PRIMARY KEY,
            thread_id text NOT NULL,
            workflow text NOT NULL,
            status text NOT NULL,
            priority integer NOT NULL,
            input_type text NOT NULL,
            input bytea NOT NULL,
            config_type text NOT NULL,
            config bytea NOT NULL,
            fence bigint NOT NULL DEFAULT 0,
            worker text,
            lease_until double precision,
            attempts integer NOT NULL DEFAULT 0,
            cancel_requested integer NOT NULL DEFAULT 0,
            result_type text,
            result bytea,
            error text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            finished_at double precision
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
            worker_id text PRIMARY KEY,
            workflows text NOT NULL,
            seen_at double precision NOT NULL,
            stopped integer NOT NULL DEFAULT 0
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
        "ALTER TABLE pregelkit_runs ADD COLUMN due_at double precision",
        "ALTER TABLE pregelkit_runs ADD COLUMN wait_kind text",
        "ALTER TABLE pregelkit_runs ADD COLUMN wait_topic text",
        "ALTER TABLE pregelkit_runs ADD COLUMN parent_thread text",
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
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            thread_id text NOT NULL,
            topic text NOT NULL,
            sender text UNIQUE,
            value_type text NOT NULL,
            value bytea NOT NULL,
            created_at double precision NOT NULL,
            consumed_by text,
            consumed_at double precision
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
            thread_id text NOT NULL,
            key text NOT NULL,
            value_type text NOT NULL,
            value bytea NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (thread_id, key)
        )
        """,
    ),
    (
        # a cancelled parent cancels its children that are not detached
        # (_runqueue.cancel): found by their parent's thread among the active runs
        "ALTER TABLE pregelkit_runs ADD COLUMN detached integer NOT NULL DEFAULT 0",
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
            id integer PRIMARY KEY,
            holder text,
            lease_until double precision,
            pruned_at double precision
        )
        """,
    ),
    (
        # named queues with limits (checkpoint/_queues.py): one declaration per
        # name, the latest wins; NULL is no limit. rate_count starts at most in
        # any window of rate_seconds
        """
        CREATE TABLE pregelkit_queues (
            name text PRIMARY KEY,
            concurrency integer,
            worker_concurrency integer,
            key_concurrency integer,
            rate_count integer,
            rate_seconds double precision,
            updated_at double precision NOT NULL
        )
        """,
        # the starts of rate-limited queues, by the claims that made them (in
        # their transaction: a worker killed after its claim committed counted)
        """
        CREATE TABLE pregelkit_queue_starts (
            queue text NOT NULL,
            started_at double precision NOT NULL
        )
        """,
        "CREATE INDEX pregelkit_queue_starts_window ON pregelkit_queue_starts (queue, started_at)",
        # '' is the default queue; not_before: a debounced run starts no sooner
        "ALTER TABLE pregelkit_runs ADD COLUMN queue text NOT NULL DEFAULT ''",
        "ALTER TABLE pregelkit_runs ADD COLUMN queue_key text",
        "ALTER TABLE pregelkit_runs ADD COLUMN dedup_id text",
        "ALTER TABLE pregelkit_runs ADD COLUMN not_before double precision",
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
            schedule_id text PRIMARY KEY,
            workflow text NOT NULL,
            cron text,
            every_seconds double precision,
            input_type text,
            input bytea,
            timezone text NOT NULL,
            catchup text NOT NULL,
            start_at double precision,
            end_at double precision,
            paused integer NOT NULL DEFAULT 0,
            next_at double precision,
            last_slot_at double precision,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL
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
            schedule_id text NOT NULL,
            slot_at double precision NOT NULL,
            thread_id text NOT NULL,
            run_id text,
            fired_at double precision NOT NULL,
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
            part_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id text NOT NULL,
            mode text NOT NULL,
            ns text NOT NULL,
            data_type text NOT NULL,
            data bytea NOT NULL
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
        "ALTER TABLE pregelkit_schedules ADD COLUMN thread_id text",
    ),
)
"""Migration N (1-based) is ``MIGRATIONS[N - 1]``; append, never edit."""

MIGRATION_LOCK_KEY = -0x7072_6567_656C_6B74
"""Advisory lock that serializes ``setup()`` across processes ("pregelkt")."""

LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(%s)"
CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS pregelkit_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SELECT_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM pregelkit_migrations"
RECORD_MIGRATION = "INSERT INTO pregelkit_migrations (version) VALUES (%s)"

TRY_LOCK_THREAD = "SELECT pg_try_advisory_lock(%s)"
UNLOCK_THREAD = "SELECT pg_advisory_unlock(%s)"
LOCK_POLL_SECONDS = (0.005, 0.25)
"""First and longest pause between attempts of a waiting ``lock_thread``. It
polls instead of blocking in ``pg_advisory_lock`` because the lock connection
is shared by every lock the process holds: a blocked call would keep other
runs from releasing theirs."""

UPSERT_ATTEMPT, SELECT_ATTEMPTS, _COPY_ATTEMPTS = attempt_sql("%s")

UPSERT_CHECKPOINT = (
    """
INSERT INTO pregelkit_checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    metadata_type, metadata, metadata_json, channel_versions
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb)
"""
    + ON_CHECKPOINT_CONFLICT
)

# A version names one value, so a blob that is already stored is the same blob.
INSERT_BLOB = """
INSERT INTO pregelkit_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
"""

# Special writes (negative idx) replace the earlier one in place, keeping its
# seq and so its position; regular writes keep the first value.
UPSERT_WRITE = (
    """
INSERT INTO pregelkit_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
    + ON_WRITE_CONFLICT
    + "WHERE excluded.idx < 0\n"
)

_SELECT = """
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
       c.checkpoint, c.metadata_type, c.metadata,
       b.channels, b.types, b.blobs, w.task_ids, w.channels, w.types, w.values
FROM pregelkit_checkpoints AS c
LEFT JOIN LATERAL (
    SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types,
           array_agg(bl.blob) AS blobs
    FROM jsonb_each_text(c.channel_versions) AS v
    JOIN pregelkit_blobs AS bl
      ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
     AND bl.channel = v.key AND bl.version = v.value
) AS b ON true
LEFT JOIN LATERAL (
    SELECT array_agg(wr.task_id ORDER BY wr.seq) AS task_ids,
           array_agg(wr.channel ORDER BY wr.seq) AS channels,
           array_agg(wr.type ORDER BY wr.seq) AS types,
           array_agg(wr.value ORDER BY wr.seq) AS values
    FROM pregelkit_writes AS wr
    WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
      AND wr.checkpoint_id = c.checkpoint_id
) AS w ON true
"""
SELECT_CHECKPOINT = (
    _SELECT + "WHERE c.thread_id = %s AND c.checkpoint_ns = %s AND c.checkpoint_id = %s"
)
SELECT_LATEST_CHECKPOINT = (
    _SELECT
    + "WHERE c.thread_id = %s AND c.checkpoint_ns = %s ORDER BY c.checkpoint_id DESC LIMIT 1"
)

DELETE_THREAD = (
    "DELETE FROM pregelkit_checkpoints WHERE thread_id = %s",
    "DELETE FROM pregelkit_blobs WHERE thread_id = %s",
    "DELETE FROM pregelkit_writes WHERE thread_id = %s",
    "DELETE FROM pregelkit_thread_control WHERE thread_id = %s",
    "DELETE FROM pregelkit_attempts WHERE thread_id = %s",
    # its mailbox (pregelkit.durable): messages sent to it, events it set
    "DELETE FROM pregelkit_messages WHERE thread_id = %s",
    "DELETE FROM pregelkit_events WHERE thread_id = %s",
)

# Parameters: target thread id, source thread id. Rows the target already has
# under the same key are replaced by the source's.
COPY_THREAD = (
    """
    INSERT INTO pregelkit_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
        metadata_type, metadata, metadata_json, channel_versions
    )
    SELECT %s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
           metadata_type, metadata, metadata_json, channel_versions
    FROM pregelkit_checkpoints WHERE thread_id = %s
"""
    + ON_CHECKPOINT_CONFLICT,
    """
    INSERT INTO pregelkit_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %s, checkpoint_ns, channel, version, type, blob
    FROM pregelkit_blobs WHERE thread_id = %s
    ON CONFLICT DO NOTHING
    """,
    """
    INSERT INTO pregelkit_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path
    )
    SELECT %s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path
    FROM pregelkit_writes WHERE thread_id = %s ORDER BY seq
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
    DELETE FROM pregelkit_checkpoints AS c
    WHERE c.thread_id = %s AND c.checkpoint_id < (
        SELECT max(k.checkpoint_id) FROM pregelkit_checkpoints AS k
        WHERE k.thread_id = c.thread_id AND k.checkpoint_ns = c.checkpoint_ns
    )
    """,
    """
    DELETE FROM pregelkit_writes AS w
    WHERE w.thread_id = %s AND w.checkpoint_id < (
        SELECT max(c.checkpoint_id) FROM pregelkit_checkpoints AS c
        WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns
    )
    """,
    """
    DELETE FROM pregelkit_attempts AS a
    WHERE a.thread_id = %s AND a.run_id < (
        SELECT max(k.run_id) FROM pregelkit_attempts AS k WHERE k.thread_id = a.thread_id
    )
    """,
    """
    DELETE FROM pregelkit_blobs AS b
    WHERE b.thread_id = %s AND NOT EXISTS (
        SELECT 1 FROM pregelkit_checkpoints AS c, jsonb_each_text(c.channel_versions) AS v
        WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
          AND v.key = b.channel AND v.value = b.version
    )
    """,
)


SELECT_THREAD_CONTROL = "SELECT mark FROM pregelkit_thread_control WHERE thread_id = %s"
# Parameters: thread id, thread id. The mark, and the status of the thread's active
# queued run: queued, running, sleeping or waiting (a durable wait's row, suspended on
# a worker), or 'parked' (a wait's row an invoke process made, and renews while it lives).
SELECT_THREAD_GATE = (
    "SELECT (SELECT mark FROM pregelkit_thread_control WHERE thread_id = %s), "
    "(SELECT CASE WHEN lease_until IS NOT NULL AND status IN ('sleeping', 'waiting') "
    "THEN 'parked' ELSE status END FROM pregelkit_runs WHERE thread_id = %s "
    "AND status IN ('queued', 'running', 'sleeping', 'waiting'))"
)
UPSERT_THREAD_CONTROL = """
INSERT INTO pregelkit_thread_control (thread_id, mark) VALUES (%s, %s)
ON CONFLICT (thread_id) DO UPDATE SET mark = excluded.mark, updated_at = now()
"""
DELETE_THREAD_CONTROL = "DELETE FROM pregelkit_thread_control WHERE thread_id = %s"


def thread_lock_key(thread_id: str) -> int:
    """The advisory lock key of a thread: a signed 64-bit hash, prefixed so it
    does not collide with keys an application derives from the same ids."""
    digest = xxhash.xxh3_64_digest(b"pregelkit.thread\x00" + thread_id.encode())
    return int.from_bytes(digest, "big", signed=True)


def list_query(
    scope: ListScope, filter: dict[str, Any], limit: int | None
) -> tuple[str, list[Any]]:
    """SELECT of the checkpoints ``list`` yields, newest first. ``@>`` on the
    whole filter can use an index; containment is looser than equality for
    lists and dicts, so those keys are also compared exactly."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("c.thread_id = %s", scope.thread_id),
        ("c.checkpoint_ns = %s", scope.checkpoint_ns),
        ("c.checkpoint_id = %s", scope.checkpoint_id),
        ("c.checkpoint_id < %s", scope.before_id),
    ):
        if value is not None:
            clauses.append(column)
            params.append(value)
    if filter:
        clauses.append("c.metadata_json @> %s::jsonb")
        params.append(filter_json(filter))
        for key, value in filter.items():
            if isinstance(value, (dict, list, tuple)):
                clauses.append("c.metadata_json -> %s = %s::jsonb")
                params.extend((key, filter_json(value)))
    sql = _SELECT
    if clauses:
        sql += "WHERE " + " AND ".join(clauses)
    sql += " ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns"
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    return sql, params


def stored_checkpoint(row: Sequence[Any]) -> StoredCheckpoint:
    """A row of the SELECT above as the shared loader expects it."""
    (thread_id, ns, checkpoint_id, parent_id, type_, data, mtype, mdata) = row[:8]
    b_channels, b_types, b_blobs, w_tasks, w_channels, w_types, w_values = row[8:]
    return StoredCheckpoint(
        thread_id,
        ns,
        checkpoint_id,
        parent_id,
        type_,
        data,
        mtype,
        mdata,
        list(zip(b_channels or (), b_types or (), b_blobs or ())),
        list(zip(w_tasks or (), w_channels or (), w_types or (), w_values or ())),
    )


class _PostgresSQL(SaverSQL):
    checkpoint_in_one_statement = True

    def stored(self, row: Sequence[Any]) -> Plan[StoredCheckpoint]:
        """No more queries: the row holds the blobs and the writes."""
        return done(stored_checkpoint(row))


SQL = _PostgresSQL(sys.modules[__name__], POSTGRES)
"""The statements of the plans the savers share (``checkpoint._plans``)."""
