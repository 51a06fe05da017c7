"""The SQL of durable waits (``pregelkit.durable``), written once for SQLite
and PostgreSQL as plans over the run queue's :class:`~._runqueue.Dialect`.

A run that sleeps or waits keeps its ``pregelkit_runs`` row, ``sleeping`` or
``waiting``, with when it is due (``due_at``; ``NULL``: when what it waits
for comes) and what it waits for (``wait_kind``: ``sleep``, ``recv`` or
``child``; ``wait_topic``: the message topic or the child's thread). Workers
claim the rows once due (``_runqueue.claim``). A row gets there two ways: a
worker's run suspends (:func:`suspend`, fenced like a run's end), or an
``invoke`` run that waits in its own process parks (:func:`park`): its row
holds a lease the process renews, so no worker takes it while the process
lives, and is deleted when the wait ends there (:func:`unpark`).

What ends a wait makes the waiter due in its own transaction: a message sent
(:func:`send`), a child's end (``_runqueue.finish``). A row that starts
waiting checks, after it is written, whether that already happened
(:func:`due_if_ready`); together with ``_runqueue.wake`` taking the waiter's
row lock, no wake is lost between the two on PostgreSQL either.

Messages are taken exactly once: ``take`` first looks for the message its
key already took (a replay, or a crash after taking it), then marks the
oldest unconsumed one with its key (``consumed_by`` is UNIQUE).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pregelkit.checkpoint._runqueue import (
    FINISHED,
    IS_ACTIVE,
    Dialect,
    RunPlan,
    due_now,
    wake,
)

__all__ = [
    "due_if_ready",
    "get_event",
    "park",
    "renew_park",
    "send",
    "set_event",
    "suspend",
    "take",
    "unpark",
]

Typed = tuple[str, bytes]

_FINISHED = ", ".join(f"'{status}'" for status in FINISHED)
_READY = {
    # an unconsumed message on the topic
    "recv": "EXISTS (SELECT 1 FROM pregelkit_messages WHERE thread_id = ? AND topic = ? "
    "AND consumed_by IS NULL)",
    # the child thread's latest run ended
    "child": f"(SELECT status FROM pregelkit_runs WHERE thread_id = ? "
    f"ORDER BY created_at DESC, run_id DESC LIMIT 1) IN ({_FINISHED})",
}


def due_if_ready(
    d: Dialect, run_id: str, thread_id: str, kind: str | None, topic: str | None, now: float
) -> RunPlan[bool]:
    """The waiting row ``run_id`` made due at ``now`` if what it waits for
    is already there; whether it was. A statement of its own after the row
    was written: on PostgreSQL it reads what committed meanwhile (a send or
    a child's end that waited for the row's lock)."""
    ready = _READY.get(kind or "")
    if ready is None or topic is None:
        return False
    about = (thread_id, topic) if kind == "recv" else (topic,)
    row = yield d.q(
        f"UPDATE pregelkit_runs SET due_at = ? WHERE run_id = ? AND status = 'waiting' "
        f"AND (due_at IS NULL OR due_at > ?) AND {ready} RETURNING run_id",
        (now, run_id, now, *about),
        "one",
    )
    return row is not None


def suspend(
    d: Dialect,
    lease: tuple[str, int],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
    now: float | None = None,
) -> RunPlan[bool]:
    """A worker's run stops to wait (``RunSuspended``): its row becomes
    ``status`` (sleeping or waiting) with what it waits for, held by no
    worker, if the lease is still ours; whether it was (``False``: the lease
    was lost, the row is another holder's)."""
    row = yield d.q(
        """
        UPDATE pregelkit_runs SET status = ?, due_at = ?, wait_kind = ?, wait_topic = ?,
            worker = NULL, lease_until = NULL, updated_at = {now}
        WHERE run_id = ? AND fence = ? AND status = 'running' RETURNING thread_id
        """,
        (status, due_at, kind, topic, *lease),
        "one",
    )
    if row is None:
        return False
    yield from due_if_ready(d, lease[0], str(row[0]), kind, topic, due_now(now))
    return True


_PARK_SET = """
    status = ?, due_at = ?, wait_kind = ?, wait_topic = ?, lease_until = {now} + ?,
    worker = NULL, input_type = ?, input = ?, updated_at = {now}
"""


def park(
    d: Dialect,
    run_id: str,
    thread_id: str,
    workflow: str,
    config: Typed,
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
    lease_seconds: float,
    parent_thread: str | None = None,
    *,
    input: Typed,
    now: float | None = None,
) -> RunPlan[str | None]:
    """An ``invoke`` run starts waiting in its process: its thread's row
    says so, leased for ``lease_seconds`` (renewed by :func:`renew_park`),
    so a worker resumes the thread once it is due only if the process died.
    ``input``: what such a worker starts the run with (a serialized None:
    it resumes from the checkpoint). The thread's sleeping or waiting row is
    taken over, else a row ``run_id`` is made: the caller holds the thread
    lock, so a row parked by another process is a dead one's (the live one
    would hold the lock), and a worker's suspended row is resumed here.
    Returns the id of the row parked, or ``None`` when another run of the
    thread is active (queued, running, or parked by a live process)."""
    waits = (status, due_at, kind, topic, lease_seconds, *input)
    row = yield d.q(
        f"UPDATE pregelkit_runs SET {_PARK_SET} "
        f"WHERE thread_id = ? AND {IS_ACTIVE} AND status IN ('sleeping', 'waiting') "
        "RETURNING run_id",
        (*waits, thread_id),
        "one",
    )
    if row is None:
        row = yield d.q(
            """
            INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority,
                due_at, wait_kind, wait_topic, lease_until, input_type, input,
                config_type, config, parent_thread, created_at, updated_at)
            VALUES (?, ?, ?, ?, 0, ?, ?, ?, {now} + ?, ?, ?, ?, ?, ?, {now}, {now})
            ON CONFLICT DO NOTHING RETURNING run_id
            """,
            (run_id, thread_id, workflow, *waits, *config, parent_thread),
            "one",
        )
        if row is None:
            return None
    parked = str(row[0])
    yield from due_if_ready(d, parked, thread_id, kind, topic, due_now(now))
    return parked


def renew_park(
    d: Dialect, run_id: str, lease_seconds: float, now: float | None = None
) -> RunPlan[bool]:
    """Renew a parked run's lease; whether it is still parked here
    (``False``: a worker took it after the lease lapsed, or it is gone).
    Looks again whether what it waits for came: a wake committed while the
    row was being made is not missed for longer than a renewal."""
    row = yield d.q(
        "UPDATE pregelkit_runs SET lease_until = {now} + ? WHERE run_id = ? "
        "AND status IN ('sleeping', 'waiting') AND lease_until IS NOT NULL "
        "RETURNING thread_id, wait_kind, wait_topic",
        (lease_seconds, run_id),
        "one",
    )
    if row is None:
        return False
    thread_id, kind, topic = row
    yield from due_if_ready(d, run_id, str(thread_id), kind, topic, due_now(now))
    return True


def unpark(d: Dialect, run_id: str) -> RunPlan[bool]:
    """The wait of a parked run ended in its process, which goes on with
    the run: the row goes. Whether it was still there to delete (``False``:
    a worker claimed it meanwhile)."""
    row = yield d.q(
        "DELETE FROM pregelkit_runs WHERE run_id = ? AND status IN ('sleeping', 'waiting') "
        "RETURNING run_id",
        (run_id,),
        "one",
    )
    return row is not None


def drop_parked(d: Dialect, thread_id: str) -> RunPlan[bool]:
    """A run resumed the thread after the process whose wait parked it died,
    and has gone past that wait: the dead run's row goes (a worker would
    otherwise resume a thread that has moved on)."""
    row = yield d.q(
        "DELETE FROM pregelkit_runs WHERE thread_id = ? AND status IN ('sleeping', 'waiting') "
        "AND lease_until IS NOT NULL RETURNING run_id",
        (thread_id,),
        "one",
    )
    return row is not None


# messages


def send(
    d: Dialect,
    thread_id: str,
    topic: str,
    value: Typed,
    sender: str | None,
    now: float | None = None,
) -> RunPlan[bool]:
    """Queue a message for ``thread_id`` on ``topic`` ('' is the default
    topic) and make its run due if it waits for one there. ``sender``: the
    idempotency key of a send made inside a workflow (a replay sends
    nothing); ``None`` from ordinary code. Returns ``False`` if this
    sender's message was already there. A thread that does not exist yet
    finds its messages when it does."""
    now = due_now(now)
    row = yield d.q(
        """
        INSERT INTO pregelkit_messages (thread_id, topic, sender, value_type, value, created_at)
        VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sender) DO NOTHING RETURNING seq
        """,
        (thread_id, topic, sender, *value, now),
        "one",
    )
    if row is None:
        return False
    yield from wake(d, thread_id, "recv", topic, now)
    return True


def take(
    d: Dialect, thread_id: str, topic: str, key: str, now: float | None = None
) -> RunPlan[Typed | None]:
    """The message ``key`` took (once: a replay or a retry gets the same one
    back), else the oldest unconsumed one of (``thread_id``, ``topic``),
    now taken by ``key``; ``None`` if there is none."""
    row = yield d.q(
        "SELECT value_type, value FROM pregelkit_messages WHERE consumed_by = ?", (key,), "one"
    )
    if row is None:
        # SKIP LOCKED (PostgreSQL): two takers take two messages, not one each
        row = yield d.q(
            """
            UPDATE pregelkit_messages SET consumed_by = ?, consumed_at = ?
            WHERE consumed_by IS NULL AND seq = (
                SELECT seq FROM pregelkit_messages
                WHERE thread_id = ? AND topic = ? AND consumed_by IS NULL
                ORDER BY seq LIMIT 1{skip_locked})
            RETURNING value_type, value
            """,
            (key, due_now(now), thread_id, topic),
            "one",
        )
    return None if row is None else _typed(row)


def _typed(row: Sequence[Any]) -> Typed:
    return str(row[0]), bytes(row[1])


# events


def set_event(
    d: Dialect, thread_id: str, key: str, value: Typed, now: float | None = None
) -> RunPlan[None]:
    """Publish ``value`` under ``key`` for ``thread_id``; the latest wins."""
    yield d.q(
        """
        INSERT INTO pregelkit_events (thread_id, key, value_type, value, updated_at)
        VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (thread_id, key) DO UPDATE SET value_type = excluded.value_type,
            value = excluded.value, updated_at = excluded.updated_at
        """,
        (thread_id, key, *value, due_now(now)),
    )


def get_event(d: Dialect, thread_id: str, key: str) -> RunPlan[Typed | None]:
    row = yield d.q(
        "SELECT value_type, value FROM pregelkit_events WHERE thread_id = ? AND key = ?",
        (thread_id, key),
        "one",
    )
    return None if row is None else _typed(row)
