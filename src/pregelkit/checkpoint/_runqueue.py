"""The durable run queue's SQL and decisions, written once for SQLite and PostgreSQL.

A run request (``wf.submit``) is a row of ``pregelkit_runs``; workers claim
rows, hold each with a lease they renew, and record how the run ended. Every
operation is a plan (``pregelkit._internal._plan``) yielding statements and
sent back their rows, driven by the saver in one transaction of its own (SQLite:
``BEGIN IMMEDIATE``, so claims are serialized; PostgreSQL: ``SELECT ... FOR
UPDATE SKIP LOCKED``, so workers claim different rows without waiting for
each other). Only the SQL spelling differs, in :class:`Dialect`.

Each claim adds one to the run's ``fence``. A worker's checkpoint and write
transactions of that run check the fence they were given, inside one of
their inserts (``fenced_insert``): once another worker has claimed the run,
the old one can write nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from pregelkit._internal import _plan
from pregelkit._internal._clock import clock
from pregelkit._internal._constants import CONF, CONFIG_KEY_LEASE
from pregelkit._internal._ids import uuid6
from pregelkit._internal._plan import Plan, Statement
from pregelkit.errors import LeaseLostError

__all__ = [
    "ACTIVE",
    "CANCELLED",
    "DONE",
    "FAILED",
    "FINISHED",
    "INTERRUPTED",
    "POSTGRES",
    "QUEUED",
    "RUNNING",
    "SLEEPING",
    "SQLITE",
    "STATUSES",
    "WAITING",
    "Claimed",
    "Dialect",
    "RunPlan",
    "lease_of",
]

T = TypeVar("T")

QUEUED = "queued"
RUNNING = "running"
INTERRUPTED = "interrupted"
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"
SLEEPING = "sleeping"
WAITING = "waiting"
STATUSES = (QUEUED, RUNNING, SLEEPING, WAITING, INTERRUPTED, DONE, FAILED, CANCELLED)
ACTIVE = (QUEUED, RUNNING, SLEEPING, WAITING)
"""A thread has at most one run in these (``pregelkit_runs_active``): a run
that sleeps or waits (``pregelkit.durable``) is still its thread's run."""
FINISHED = (INTERRUPTED, DONE, FAILED, CANCELLED)
IS_ACTIVE = "status IN ('queued', 'running', 'sleeping', 'waiting')"
"""The condition of ``pregelkit_runs_active``, spelled as the index is, so
SQLite's planner sees a query on a thread's active run can use it."""


RunPlan: TypeAlias = Plan[T]


# one primary-key lookup: the run's row, if this lease is still its current one
FENCE = "SELECT 1 FROM pregelkit_runs WHERE run_id = ? AND fence = ? AND status = 'running'"


@dataclass(frozen=True, slots=True)
class Dialect(_plan.Dialect):
    """How one database spells what the queue needs. SQL is written with
    ``?`` placeholders and ``{now}`` (the database's clock, in seconds since
    the epoch: leases are judged by one clock, not by each worker's)."""

    name: str
    now: str
    skip_locked: str
    share_lock: str
    mark_cancelled: str
    placeholder: str = "?"
    writable_ctes: bool = False
    """Whether a ``WITH`` may hold an ``UPDATE`` (PostgreSQL), so two
    writes can be one statement."""
    index_hint: str = ""
    """How a claim names the index it walks (SQLite's ``INDEXED BY``):
    without statistics SQLite's planner took ``pregelkit_runs_queue`` for
    ``status IN (...)`` and sorted every sleeping and waiting run at each
    claim (an idle worker's CPU grew with them: 8.7 ms/s with none, 40
    with 10,000). PostgreSQL's planner picks the walks by itself."""
    lock_rows: str = ""
    """How a read locks the rows it reads until the transaction ends
    (PostgreSQL's ``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already
    serializes writers)."""
    materialized: str = ""
    """How a claim's ``WITH picked AS`` asks for its rows to be picked once
    (PostgreSQL's ``MATERIALIZED``; SQLite runs an ``IN`` list once by
    itself). See ``PICK``."""
    fence: str = field(init=False)
    """The fence check's SQL, spelled once: it runs in every write
    transaction of a leased run, so no per-call rewriting."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "fence", self.q(FENCE + "{share_lock}").sql)

    def q(
        self, sql: str, params: Sequence[Any] = (), fetch: Literal["one", "all"] | None = None
    ) -> Statement:
        sql = sql.replace("{now}", self.now).replace("{skip_locked}", self.skip_locked)
        sql = sql.replace("{share_lock}", self.share_lock)
        return self.statement(sql, tuple(params), fetch)


SQLITE = Dialect(
    name="sqlite",
    now="((julianday('now') - 2440587.5) * 86400.0)",
    skip_locked="",
    share_lock="",
    placeholder="?",
    index_hint=" INDEXED BY %s",
    mark_cancelled="""
        INSERT INTO pregelkit_thread_control (thread_id, mark, updated_at)
        VALUES (?, 'cancelled', datetime('now'))
        ON CONFLICT (thread_id) DO UPDATE SET mark = excluded.mark,
            updated_at = excluded.updated_at
    """,
)
POSTGRES = Dialect(
    name="postgres",
    now="extract(epoch from clock_timestamp())::float8",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    # a claim (an UPDATE of the row) waits for the writes that checked the
    # fence to commit: what they wrote happened while the lease was theirs
    share_lock=" FOR SHARE",
    placeholder="%s",
    writable_ctes=True,
    lock_rows=" FOR UPDATE",
    materialized=" MATERIALIZED",
    mark_cancelled="""
        INSERT INTO pregelkit_thread_control (thread_id, mark) VALUES (?, 'cancelled')
        ON CONFLICT (thread_id) DO UPDATE SET mark = excluded.mark, updated_at = now()
    """,
)


def lease_of(config: Any) -> tuple[str, int] | None:
    """The lease (run id, fence) a worker gave this run, from its config;
    ``None`` for a run no worker started (a dict lookup: all it costs them)."""
    lease: tuple[str, int] | None = (config.get(CONF) or {}).get(CONFIG_KEY_LEASE)
    return lease


def check_fence(d: Dialect, lease: tuple[str, int], operation: str) -> RunPlan[None]:
    """Part of a write transaction of a leased run: refuse it (rolled back
    whole) unless the lease is still the run's current one."""
    row = yield Statement(d.fence, lease, "one")
    if row is None:
        raise LeaseLostError(lease[0], lease[1], operation)


def fenced_insert(d: Dialect, insert: str) -> str:
    """``insert`` (``INSERT INTO t (...) VALUES (...) ...``, one row) made to
    insert nothing unless the lease whose (run id, fence) follow its
    parameters is the run's current one: the fence check inside the write
    it guards, no statement of its own. On PostgreSQL the check locks the
    run's row (``FOR SHARE``), so a claim waits for the transaction."""
    head, values, tail = insert.partition("VALUES (")
    row, close, rest = tail.partition(")")
    if not (values and close) or "(" in row:
        raise ValueError(f"not a one-row INSERT ... VALUES (...): {insert!r}")
    return f"{head}SELECT {row} WHERE EXISTS ({d.fence}){rest}"


def fenced(
    d: Dialect, insert: str, row: Sequence[Any], lease: tuple[str, int], operation: str
) -> RunPlan[None]:
    """The last write of a leased run's transaction: ``row`` inserted by
    ``insert`` (a :func:`fenced_insert`) if the lease is still ours. It
    changing nothing means the lease was lost, or an upsert kept the row it
    met (a task's write saved before, a start record after its end): only
    then is the fence asked on its own, to tell which."""
    if (yield Statement(insert, (*row, *lease), "count")) == 0:
        yield from check_fence(d, lease, operation)


# submitting and looking


_RUN_COLUMNS = """run_id, thread_id, workflow, status, priority, fence, worker,
    lease_until - {now}, attempts, cancel_requested, error, created_at, finished_at,
    due_at, wait_kind, wait_topic, parent_thread, queue, queue_key, not_before"""
RESULT_AT = 20
"""Where ``get``'s row has the stored result (its type, then its bytes)."""


def submit(
    d: Dialect,
    thread_id: str,
    workflow: str,
    priority: int,
    input: tuple[str, bytes],
    config: tuple[str, bytes],
    parent_thread: str | None = None,
    detached: bool = False,
) -> RunPlan[tuple[str, bool]]:
    """Queue a run of ``thread_id``; (run id, True) if queued now, or the
    thread's active run (queued, running, sleeping or waiting) and False.
    ``parent_thread``: the thread of the workflow that started this one as
    its child; its end wakes the parent waiting for it, and the parent's
    cancel cancels it unless ``detached``."""
    # time-ordered: runs of one priority submitted within the database clock's
    # resolution (a millisecond on SQLite) are still taken first come, first served
    run_id = uuid6()
    row = yield d.q(
        """
        INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority,
            input_type, input, config_type, config, parent_thread, detached, created_at,
            updated_at)
        VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, {now}, {now})
        ON CONFLICT (thread_id) WHERE status IN ('queued', 'running', 'sleeping', 'waiting')
        DO NOTHING
        RETURNING run_id
        """,
        (run_id, thread_id, workflow, priority, *input, *config, parent_thread, int(detached)),
        "one",
    )
    if row is None:
        existing = yield d.q(
            f"SELECT run_id FROM pregelkit_runs WHERE thread_id = ? AND {IS_ACTIVE}",
            (thread_id,),
            "one",
        )
        if existing is not None:
            return str(existing[0]), False
        raise RuntimeError(f"could not queue a run of thread {thread_id!r}: try again")
    # asking for a run of a thread is asking for it to run: a cancel mark
    # left by an earlier run no longer applies (as `pregelkit resume` does)
    yield d.q(
        "DELETE FROM pregelkit_thread_control WHERE thread_id = ? AND mark = 'cancelled'",
        (thread_id,),
    )
    return run_id, True


def get(d: Dialect, run_id: str) -> RunPlan[tuple[Any, ...] | None]:
    """The run's row: ``_RUN_COLUMNS`` then the stored result."""
    row: tuple[Any, ...] | None = yield d.q(
        f"SELECT {_RUN_COLUMNS}, result_type, result FROM pregelkit_runs WHERE run_id = ?",
        (run_id,),
        "one",
    )
    return row


def latest_of_thread(d: Dialect, thread_id: str) -> RunPlan[str | None]:
    """The thread's active run (queued, running, sleeping or waiting: a
    thread has one at most), else its newest: not a newer run that waits
    its turn outside the queue (``pregelkit serve``'s enqueued runs)."""
    row = yield d.q(
        f"SELECT run_id FROM pregelkit_runs WHERE thread_id = ? AND {IS_ACTIVE}",
        (thread_id,),
        "one",
    )
    if row is None:
        row = yield d.q(
            "SELECT run_id FROM pregelkit_runs WHERE thread_id = ? "
            "ORDER BY created_at DESC, run_id DESC LIMIT 1",
            (thread_id,),
            "one",
        )
    return None if row is None else str(row[0])


def list_runs(
    d: Dialect,
    status: str | None,
    limit: int,
    live_seconds: float,
    thread_id: str | None = None,
) -> RunPlan[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Runs newest first (of one status, or all; of one thread, or all), and
    the workers seen in the last ``live_seconds``: (worker id, workflows,
    seconds since seen). One thread's runs walk ``pregelkit_runs_thread``."""
    conditions, params = [], []
    if status:
        conditions.append("status = ?")
        params.append(status)
    if thread_id is not None:
        conditions.append("thread_id = ?")
        params.append(thread_id)
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    runs = yield d.q(
        f"SELECT {_RUN_COLUMNS} FROM pregelkit_runs {where} "
        "ORDER BY created_at DESC, run_id DESC LIMIT ?",
        (*params, limit),
        "all",
    )
    workers = yield d.q(
        "SELECT worker_id, workflows, {now} - seen_at FROM pregelkit_workers "
        "WHERE stopped = 0 AND seen_at > {now} - ? ORDER BY worker_id",
        (live_seconds,),
        "all",
    )
    return list(runs), list(workers)


def cancel(d: Dialect, run_id: str, now: float | None = None) -> RunPlan[str | None]:
    """A queued run is cancelled at once, and so is one that sleeps or waits
    with no process holding it; a running one, or one an ``invoke`` process
    waits in (it holds a lease), is asked to stop (its thread is marked,
    which its worker or process watches). Its active children that are not
    detached are cancelled too, theirs in turn. Returns the status it has
    then."""
    status = yield from _cancel_one(d, run_id, now)
    if status == CANCELLED or status in ACTIVE:
        parents = yield d.q(
            "SELECT thread_id FROM pregelkit_runs WHERE run_id = ?", (run_id,), "all"
        )
        while parents:
            thread = parents.pop()[0]
            children = yield d.q(
                "SELECT run_id, thread_id FROM pregelkit_runs WHERE parent_thread = ? "
                f"AND detached = 0 AND {IS_ACTIVE}",
                (thread,),
                "all",
            )
            for child_run, child_thread in children:
                yield from _cancel_one(d, str(child_run), now)
                parents.append((child_thread,))
    return status


def _cancel_one(d: Dialect, run_id: str, now: float | None) -> RunPlan[str | None]:
    row = yield d.q(
        """
        UPDATE pregelkit_runs SET status = 'cancelled', finished_at = {now}, updated_at = {now},
            error = CASE status WHEN 'queued' THEN 'cancelled before it started'
                WHEN 'sleeping' THEN 'cancelled while it slept'
                ELSE 'cancelled while it waited' END,
            due_at = NULL, wait_kind = NULL, wait_topic = NULL
        WHERE run_id = ? AND (status = 'queued' OR (status IN ('sleeping', 'waiting')
            AND (lease_until IS NULL OR lease_until < {now})))
        RETURNING thread_id, parent_thread
        """,
        (run_id,),
        "one",
    )
    if row is not None:
        if row[1] is not None:
            yield from wake(d, str(row[1]), "child", str(row[0]), due_now(now))
        return CANCELLED
    row = yield d.q(
        "UPDATE pregelkit_runs SET cancel_requested = 1, updated_at = {now} "
        "WHERE run_id = ? AND status IN ('running', 'sleeping', 'waiting') "
        "RETURNING thread_id, status",
        (run_id,),
        "one",
    )
    if row is not None:
        yield d.q(d.mark_cancelled, (row[0],))
        return str(row[1])
    row = yield d.q("SELECT status FROM pregelkit_runs WHERE run_id = ?", (run_id,), "one")
    return None if row is None else str(row[0])


def due_now(now: float | None) -> float:
    """The time due checks and wakes go by: the caller's, or the process
    clock's (``pregelkit.testing`` can move it); leases go by the database's."""
    return clock().now() if now is None else now


def wake(d: Dialect, thread_id: str, kind: str, topic: str, now: float) -> RunPlan[None]:
    """The run of ``thread_id`` waiting for ``kind`` on ``topic`` (a
    message topic, a child's thread) is due at ``now``, in the transaction
    of what it waited for. The thread's running row is updated too (to
    itself): on PostgreSQL that takes its row lock, so a wake that meets a
    run about to suspend waits for the suspend to commit, then sees it
    waiting (and a suspend that meets this wake reads after it committed:
    ``_waits.due_if_ready``). A thread with no such run: nothing to do."""
    yield d.q(
        f"""
        UPDATE pregelkit_runs SET due_at = CASE WHEN status = 'waiting' AND wait_kind = ?
            AND wait_topic = ? AND (due_at IS NULL OR due_at > ?) THEN ? ELSE due_at END
        WHERE thread_id = ? AND {IS_ACTIVE} AND status IN ('running', 'waiting')
        """,
        (kind, topic, now, now, thread_id),
    )


# serving


@dataclass(frozen=True, slots=True)
class Claimed:
    """A run a worker now holds, under lease ``fence``."""

    run_id: str
    thread_id: str
    workflow: str
    fence: int
    attempts: int
    input: tuple[str, bytes]
    config: tuple[str, bytes]
    parent_thread: str | None = None
    """The thread of the workflow that started this run as its child: the
    run's end wakes it."""
    queue: str = ""
    """The queue it was submitted to ('' is the default queue)."""


# a claim's parts, shared by ``claim`` and ``finish_and_claim``. The runs it
# may take are read through two indexes, each in the order it takes them and
# up to its LIMIT: sleeping and waiting runs now due through
# ``pregelkit_runs_due`` (migration 6), earliest due first (they started
# before anything queued), then ``pregelkit_runs_claim`` (migration 5); each
# index's condition is spelled out for SQLite's planner to see it holds. A
# due run an ``invoke`` process still holds (its lease) is left to it.
PICK = "WITH picked AS%s ("
"""A claim picks its runs in a CTE of their own, run once (PostgreSQL:
``MATERIALIZED``), and updates those (``PICKED``). Within the UPDATE's
``WHERE run_id IN (...)`` a planner may run the picking query again for
each row it compares (a nested-loop semi join, which PostgreSQL chose with
statistics taken while the table was empty: autovacuum after a mass
delete); each run skips the rows the statement already updated (locked by
itself) and picks the next ones, so a claim of one run took every queued
run (docs/scale-out.md, "One claim, at most its limit";
tests/test_claim_bound.py)."""
PICKED = " WHERE run_id IN (SELECT run_id FROM picked)"
CLAIM_SET = """
    UPDATE pregelkit_runs SET status = 'running', fence = fence + 1, worker = ?,
        lease_until = {now} + ?, attempts = attempts + 1, updated_at = {now},
        due_at = NULL, wait_kind = NULL, wait_topic = NULL"""
CLAIM_RETURNING = """
    RETURNING priority, created_at, run_id, thread_id, workflow, fence, attempts,
        input_type, input, config_type, config, parent_thread, queue
"""
# the default queue's claim (a worker serving named queues claims with
# ``_queues.claim``): its runs only, through the index of its own
_CLAIM = (
    """
    %(pick)s
        SELECT run_id FROM (
            SELECT run_id FROM pregelkit_runs%(due_index)s
            WHERE workflow IN (%(names)s)%(skip)s AND status IN ('sleeping', 'waiting')
              AND due_at IS NOT NULL AND due_at <= ? AND queue = ''
              AND (lease_until IS NULL OR lease_until < {now})
            ORDER BY due_at
            LIMIT ?{skip_locked}) AS due
        UNION ALL
        SELECT run_id FROM (
            SELECT run_id FROM pregelkit_runs%(claim_index)s
            WHERE workflow IN (%(names)s)%(skip)s AND status IN ('queued', 'running')
              AND queue = ''
              AND (status = 'queued' OR (status = 'running' AND lease_until < {now}))
            ORDER BY priority DESC, created_at, run_id
            LIMIT ?{skip_locked}) AS queued
        LIMIT ?)"""
    + CLAIM_SET
    + PICKED
    + CLAIM_RETURNING
)
FINISH = """
    UPDATE pregelkit_runs SET status = ?, result_type = ?, result = ?, error = ?,
        lease_until = NULL, finished_at = {now}, updated_at = {now}
    WHERE run_id = ? AND fence = ? AND status = 'running' RETURNING run_id
"""


def _claim_params(
    worker_id: str,
    workflows: Sequence[str],
    limit: int,
    lease_seconds: float,
    now: float | None,
    skip: Sequence[Any] = (),
) -> tuple[Any, ...]:
    due = (*workflows, *skip, due_now(now), limit)
    return (*due, *workflows, *skip, limit, limit, worker_id, lease_seconds)


def _claim_sql(d: Dialect, workflows: Sequence[str], skip: str = "") -> str:
    hint = d.index_hint
    return _CLAIM % {
        "pick": PICK % d.materialized,
        "names": ", ".join("?" for _ in workflows),
        "skip": skip,
        "due_index": hint % "pregelkit_runs_due" if hint else "",
        "claim_index": hint % "pregelkit_runs_claim" if hint else "",
    }


def claim(
    d: Dialect,
    worker_id: str,
    workflows: Sequence[str],
    limit: int,
    lease_seconds: float,
    now: float | None = None,
) -> RunPlan[list[Claimed]]:
    """Take up to ``limit`` runs of ``workflows``: sleeping and waiting ones
    due by ``now`` (default: the process clock's), earliest due first, then
    queued ones, highest priority first then oldest, and running ones whose
    lease expired."""
    if limit <= 0 or not workflows:
        return []
    # one statement, one round trip however many runs it takes: the rows
    # picked (SKIP LOCKED on PostgreSQL: not those another claim is taking)
    # are leased in the same UPDATE
    params = _claim_params(worker_id, workflows, limit, lease_seconds, now)
    rows = yield d.q(_claim_sql(d, workflows), params, "all")
    return claimed_rows(rows)


def claimed_rows(rows: Sequence[Sequence[Any]]) -> list[Claimed]:
    # RETURNING comes in no set order: started in the order they were taken
    rows = sorted(rows, key=lambda row: (-row[0], row[1], row[2]))
    return [
        Claimed(
            str(run),
            str(thread),
            str(workflow),
            int(fence),
            int(attempts),
            (str(itype), bytes(ivalue)),
            (str(ctype), bytes(cvalue)),
            None if parent is None else str(parent),
            str(queue),
        )
        for (
            _,
            _,
            run,
            thread,
            workflow,
            fence,
            attempts,
            itype,
            ivalue,
            ctype,
            cvalue,
            parent,
            queue,
        ) in rows
    ]


def pending(d: Dialect, workflows: Sequence[str], queues: Sequence[str] = ("",)) -> RunPlan[int]:
    """How many runs of ``workflows`` on ``queues`` are active (queued,
    running, sleeping or waiting), wherever: a run that waits is still a
    run to serve."""
    names = ", ".join("?" for _ in workflows)
    served = ", ".join("?" for _ in queues)
    row = yield d.q(
        f"SELECT count(*) FROM pregelkit_runs WHERE workflow IN ({names}) AND {IS_ACTIVE} "
        f"AND queue IN ({served})",
        (*workflows, *queues),
        "one",
    )
    return int(row[0])


HEARTBEAT_BATCH = 500


def heartbeat(
    d: Dialect,
    worker_id: str,
    workflows: Sequence[str],
    held: Sequence[tuple[str, int]],
    lease_seconds: float,
) -> RunPlan[set[tuple[str, int]]]:
    """Renew the leases still ours, in one statement, and say the worker is
    alive; returns the leases of ``held`` that were not renewed: lost to
    another worker, or their run ended meanwhile. Only those: a run claimed
    after ``held`` was read is not judged by this heartbeat."""
    yield d.q(
        """
        INSERT INTO pregelkit_workers (worker_id, workflows, seen_at, stopped)
        VALUES (?, ?, {now}, 0)
        ON CONFLICT (worker_id) DO UPDATE SET workflows = excluded.workflows,
            seen_at = excluded.seen_at, stopped = 0
        """,
        (worker_id, "\n".join(workflows)),
    )
    renewed: set[tuple[str, int]] = set()
    # a statement per HEARTBEAT_BATCH runs: within every database's limit
    # on parameters, however high the worker's concurrency
    for start in range(0, len(held), HEARTBEAT_BATCH):
        batch = held[start : start + HEARTBEAT_BATCH]
        pairs = ", ".join("(?, ?)" for _ in batch)
        rows = yield d.q(
            "UPDATE pregelkit_runs SET lease_until = {now} + ?, updated_at = {now} "
            f"WHERE (run_id, fence) IN (VALUES {pairs}) AND status = 'running' "
            # a named queue's claims counted a lapsed lease's slot free, maybe
            # gave it away: such a lease is lost, not renewed (_queues.py)
            "AND (queue = '' OR lease_until >= {now}) "
            "RETURNING run_id, fence",
            (lease_seconds, *(value for lease in batch for value in lease)),
            "all",
        )
        renewed.update((str(run_id), int(fence)) for run_id, fence in rows)
    return {(str(run_id), int(fence)) for run_id, fence in held} - renewed


def cancels(d: Dialect, run_ids: Sequence[str]) -> RunPlan[set[str]]:
    """Which of ``run_ids`` (at most ``HEARTBEAT_BATCH``) are asked to stop:
    cancelled through the queue (``RunHandle.cancel``), or their thread
    marked cancelled (``cancel(config)``, ``pregelkit cancel``). One read for
    all the runs a worker holds, instead of one per run."""
    names = ", ".join("?" for _ in run_ids)
    rows = yield d.q(
        f"SELECT run_id FROM pregelkit_runs AS r WHERE run_id IN ({names}) "
        "AND (cancel_requested = 1 OR EXISTS (SELECT 1 FROM pregelkit_thread_control AS c "
        "WHERE c.thread_id = r.thread_id AND c.mark = 'cancelled'))",
        tuple(run_ids),
        "all",
    )
    return {str(run_id) for (run_id,) in rows}


def finish(
    d: Dialect,
    lease: tuple[str, int],
    status: str,
    result: tuple[str, bytes] | None,
    error: str | None,
    *,
    child: tuple[str, str] | None = None,
    now: float | None = None,
) -> RunPlan[None]:
    """Record how a run ended, if the lease is still ours. ``child``: (its
    parent's thread, its own) for a child run, whose end wakes the parent
    waiting for it in the same transaction (a caller gives such a plan a
    transaction: ``single`` only without ``child``)."""
    row = yield d.q(FINISH, finish_params(lease, status, result, error), "one")
    if row is None:
        raise LeaseLostError(lease[0], lease[1], "recording how the run ended")
    if child is not None:
        yield from wake(d, child[0], "child", child[1], due_now(now))


def finish_and_claim(
    d: Dialect,
    lease: tuple[str, int],
    status: str,
    result: tuple[str, bytes] | None,
    error: str | None,
    *,
    worker_id: str,
    workflows: Sequence[str],
    lease_seconds: float,
    child: tuple[str, str] | None = None,
    now: float | None = None,
) -> RunPlan[tuple[bool, Claimed | None]]:
    """Record how a run ended, if the lease is still ours, and claim the
    run that takes its place (as ``claim``, one run): whether the end was
    recorded (``False``: the lease was lost), and the run claimed, if any.
    On PostgreSQL one statement, one transaction: a worker's runs end and
    start without a claim of their own. ``child``: as for ``finish``."""
    now = due_now(now)
    finished = finish_params(lease, status, result, error)
    # the run that ends is never the one taken (its lease may have expired)
    asked = _claim_params(worker_id, workflows, 1, lease_seconds, now, (lease[0],))
    take = _claim_sql(d, workflows, " AND run_id <> ?")
    if not d.writable_ctes:
        ended = yield d.q(FINISH, finished, "one")
        if ended is not None and child is not None:
            yield from wake(d, child[0], "child", child[1], now)
        taken = yield d.q(take, asked, "all")
        return ended is not None, next(iter(claimed_rows(taken)), None)
    # one row whatever was taken: the count of runs ended, then the run taken or NULLs
    rows = yield d.q(
        f"WITH ended AS ({FINISH}), taken AS ({take}) "
        "SELECT (SELECT count(*) FROM ended), taken.* FROM (VALUES (1)) AS one "
        "LEFT JOIN taken ON true",
        (*finished, *asked),
        "all",
    )
    ended = bool(rows[0][0])
    if ended and child is not None:
        yield from wake(d, child[0], "child", child[1], now)
    return ended, next(iter(claimed_rows([r[1:] for r in rows if r[3] is not None])), None)


def finish_params(
    lease: tuple[str, int], status: str, result: tuple[str, bytes] | None, error: str | None
) -> tuple[Any, ...]:
    rtype, rvalue = result if result is not None else (None, None)
    return (status, rtype, rvalue, error, *lease)


def hand_back(d: Dialect, lease: tuple[str, int]) -> RunPlan[bool]:
    """Give a run back to the queue (the worker is stopping); whether it was
    still ours to give."""
    run_id, fence = lease
    row = yield d.q(
        "UPDATE pregelkit_runs SET status = 'queued', worker = NULL, lease_until = NULL, "
        "updated_at = {now} WHERE run_id = ? AND fence = ? AND status = 'running' "
        "RETURNING run_id",
        (run_id, fence),
        "one",
    )
    return row is not None


def worker_stopped(d: Dialect, worker_id: str) -> RunPlan[None]:
    yield d.q("UPDATE pregelkit_workers SET stopped = 1 WHERE worker_id = ?", (worker_id,))
