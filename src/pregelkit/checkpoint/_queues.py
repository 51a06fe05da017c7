"""Named queues with limits: their SQL and decisions, written once for
SQLite and PostgreSQL as plans over the run queue's :class:`~._runqueue.Dialect`.

A queue's declaration is a row of ``pregelkit_queues`` (the latest wins), so
every worker enforces the same limits, read inside each claim. The limits
are enforced by the claim itself, with no coordinator: a run counts against
its queue while it is ``running`` under a lease that has not expired (a
worker killed or stopped frees its slots once their leases lapse; a run
that sleeps or waits counts against nothing), and a rate-limited queue's
starts are rows of ``pregelkit_queue_starts`` written in the claim's
transaction.

Claims of a limited queue are serialized: the claim first locks the
queue's row (PostgreSQL ``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE``
serializes every claim already) and then counts, in a statement of its own
that sees what the claim before it committed. Two workers never both take
the last slot. A worker builds its claim on the limits it last read
(:class:`Known`), so on PostgreSQL the lock, the claim and the COMMIT go out
as one query: the row is locked for no client round trip. The default
queue, and a named queue with no limits, take no lock: their claims stay
``SKIP LOCKED`` ones that never wait.

One claim statement walks each served queue's runs in the order it takes
them (due ones first, then by priority and age) up to the worker's free
slots, skipping runs whose key is at its limit while walking (a blocked key
never hides the runs behind it), then ranks what it walked: per key, then
per queue, each rank added to what already runs must stay within the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pregelkit._internal._ids import uuid6
from pregelkit._internal._plan import Statement, Together, Whole
from pregelkit.checkpoint._runqueue import (
    CLAIM_RETURNING,
    CLAIM_SET,
    FINISH,
    IS_ACTIVE,
    PICK,
    PICKED,
    Claimed,
    Dialect,
    RunPlan,
    claimed_rows,
    due_now,
    finish_params,
    wake,
)
from pregelkit.errors import UnknownQueueError

__all__ = [
    "REPLACED",
    "Known",
    "Limits",
    "claim",
    "declare",
    "declared",
    "finish_and_claim",
    "overview",
    "submit",
]

STARTS_KEPT = 60.0
"""Seconds a start is kept past its queue's rate window (at least)."""
SWEEP_EVERY = 32
"""A process deletes the starts older than that at every this many claims
that started runs of a rate-limited queue (not at each: a statement saved;
the count reads the window through its index whatever lies before it)."""
_SWEEPS = [0]
REPLACED = "replaced by run "
"""How the error of a debounced run a newer one replaced starts: the
replacing run's id follows, up to the first space."""

_LIMITS = "name, concurrency, worker_concurrency, key_concurrency, rate_count, rate_seconds"
_LIMITED = (
    "(concurrency IS NOT NULL OR worker_concurrency IS NOT NULL "
    "OR key_concurrency IS NOT NULL OR rate_count IS NOT NULL)"
)
_ORDER = "grp, due_at, priority DESC, created_at, run_id"
"""The order a claim takes runs in: due ones (sleeping, waiting) first,
earliest due first, then queued ones by priority, then oldest."""
HELD_GRACE = 1.0
"""Seconds a lapsed lease still holds its slot: a heartbeat that found the
lease live (it renews only live ones of a named queue) may still be
committing when a claim counts."""
_HELD = (
    "SELECT count(*) FROM pregelkit_runs AS h WHERE h.queue = ? AND h.queue <> '' "
    f"AND h.status = 'running' AND h.lease_until >= {{now}} - {HELD_GRACE}"
)
"""Runs of a queue that hold a slot: running under a lease not expired (or
expired within ``HELD_GRACE``). Once a lease of a named queue lapsed, no
heartbeat renews it: a slot counted free stays free."""
_STARTS = "SELECT count(*) FROM pregelkit_queue_starts WHERE queue = ? AND started_at > ?"
"""A queue's starts in the rate window, which is half open as most limiters'
are: a start exactly ``rate_seconds`` ago no longer counts, so a test that
advances its clock by the window's length frees the next start."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A queue's declaration as stored (``None``: no such limit)."""

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    key_concurrency: int | None = None
    rate_count: int | None = None
    rate_seconds: float | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Limits:
        name, conc, wconc, kconc, count, seconds = row
        return cls(
            str(name),
            None if conc is None else int(conc),
            None if wconc is None else int(wconc),
            None if kconc is None else int(kconc),
            None if count is None else int(count),
            None if seconds is None else float(seconds),
        )

    @property
    def limited(self) -> bool:
        return any(
            value is not None
            for value in (
                self.concurrency,
                self.worker_concurrency,
                self.key_concurrency,
                self.rate_count,
            )
        )


def declare(d: Dialect, limits: Sequence[Limits]) -> RunPlan[None]:
    """Store each queue's declaration, replacing the one before it."""
    for lim in limits:
        yield d.q(
            f"INSERT INTO pregelkit_queues ({_LIMITS}, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, {now}) "
            "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
            "worker_concurrency = excluded.worker_concurrency, "
            "key_concurrency = excluded.key_concurrency, rate_count = excluded.rate_count, "
            "rate_seconds = excluded.rate_seconds, updated_at = excluded.updated_at",
            (
                lim.name,
                lim.concurrency,
                lim.worker_concurrency,
                lim.key_concurrency,
                lim.rate_count,
                lim.rate_seconds,
            ),
        )


def declared(d: Dialect, names: Sequence[str] = ()) -> RunPlan[list[Limits]]:
    """The declared queues (all, or those of ``names``, each of which must
    be declared: ``UnknownQueueError`` otherwise), by name."""
    rows = yield d.q(f"SELECT {_LIMITS} FROM pregelkit_queues ORDER BY name", (), "all")
    queues = [Limits.from_row(row) for row in rows]
    known = {q.name for q in queues}
    for name in names:
        if name not in known:
            raise UnknownQueueError(name, sorted(known))
    return [q for q in queues if q.name in names] if names else queues


# submitting


def submit(
    d: Dialect,
    thread_id: str,
    workflow: str,
    priority: int,
    input: tuple[str, bytes],
    config: tuple[str, bytes],
    queue: str,
    key: str | None,
    dedup_id: str | None,
    debounce: float | None,
    now: float | None = None,
) -> RunPlan[tuple[str, str, bool]]:
    """Queue a run on a named queue, or with a dedup id: (run id, its
    thread, True) if queued now; else the run that stands for it, and False:
    the active run of the same (queue, dedup id), or the thread's active run.
    A debounced submit first cancels the key's debounced runs that have not
    started (each naming this run), and starts no sooner than ``debounce``
    seconds from now (the process clock)."""
    if queue:
        # a debounced submit holds the queue's row: two at once for one key
        # would each cancel the other's predecessor and both stay queued
        lock = d.lock_rows if debounce is not None else ""
        row = yield d.q(f"SELECT 1 FROM pregelkit_queues WHERE name = ?{lock}", (queue,), "one")
        if row is None:
            yield from declared(d, (queue,))
    if dedup_id is not None:
        first = yield from _deduped(d, queue, dedup_id)
        if first is not None:
            return (*first, False)
    run_id = uuid6()
    not_before = None
    if debounce is not None:
        # the thread's active run stands for this submit unless this submit
        # replaces it: then replacing the key's pending runs would name a
        # run never queued and leave the key none to start
        busy = yield d.q(
            f"SELECT run_id, thread_id FROM pregelkit_runs WHERE thread_id = ? AND {IS_ACTIVE} "
            "AND NOT (queue = ? AND queue_key = ? AND status = 'queued' "
            "AND not_before IS NOT NULL AND attempts = 0)",
            (thread_id, queue, key),
            "one",
        )
        if busy is not None:
            return str(busy[0]), str(busy[1]), False
        not_before = due_now(now) + debounce
        yield d.q(
            """
            UPDATE pregelkit_runs SET status = 'cancelled', error = ?, finished_at = {now},
                updated_at = {now}
            WHERE queue = ? AND queue_key = ? AND status = 'queued' AND not_before IS NOT NULL
              AND attempts = 0
            """,
            (f"{REPLACED}{run_id} (a newer submit with key {key!r}, debounced)", queue, key),
        )
    row = yield d.q(
        """
        INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority,
            input_type, input, config_type, config, queue, queue_key, dedup_id, not_before,
            created_at, updated_at)
        VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, {now}, {now})
        ON CONFLICT DO NOTHING
        RETURNING run_id
        """,
        (
            run_id,
            thread_id,
            workflow,
            priority,
            *input,
            *config,
            queue,
            key,
            dedup_id,
            not_before,
        ),
        "one",
    )
    if row is None:
        existing = yield d.q(
            f"SELECT run_id, thread_id FROM pregelkit_runs WHERE thread_id = ? AND {IS_ACTIVE}",
            (thread_id,),
            "one",
        )
        if existing is None and dedup_id is not None:
            existing = yield from _deduped(d, queue, dedup_id)
        if existing is not None:
            return str(existing[0]), str(existing[1]), False
        raise RuntimeError(f"could not queue a run of thread {thread_id!r}: try again")
    yield d.q(
        "DELETE FROM pregelkit_thread_control WHERE thread_id = ? AND mark = 'cancelled'",
        (thread_id,),
    )
    return run_id, thread_id, True


def _deduped(d: Dialect, queue: str, dedup_id: str) -> RunPlan[tuple[str, str] | None]:
    row = yield d.q(
        f"SELECT run_id, thread_id FROM pregelkit_runs WHERE queue = ? AND dedup_id = ? "
        f"AND dedup_id IS NOT NULL AND {IS_ACTIVE}",
        (queue, dedup_id),
        "one",
    )
    return None if row is None else (str(row[0]), str(row[1]))


# claiming


class _Sql:
    """A statement built in pieces, each with its parameters, in order."""

    __slots__ = ("params", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list[Any] = []

    def add(self, sql: str, *params: Any) -> _Sql:
        self.parts.append(sql)
        self.params.extend(params)
        return self

    def extend(self, other: _Sql) -> _Sql:
        self.parts.extend(other.parts)
        self.params.extend(other.params)
        return self

    @property
    def sql(self) -> str:
        return "".join(self.parts)


class Known:
    """The limits a worker last read of the queues it serves. With them its
    claim statement is built before the queues' rows are locked, so on
    PostgreSQL the lock, the claim and the COMMIT go out as one query
    (``Whole``): the rows stay locked for no client round trip. The claim
    takes nothing of a queue whose limits are not those any more (each
    queue's part checks its row, read after the lock); the limits the lock
    read replace these, for the next claim."""

    __slots__ = ("limits",)

    def __init__(self) -> None:
        self.limits: dict[str, Limits] | None = None


def claim(
    d: Dialect,
    worker_id: str,
    workflows: Sequence[str],
    queues: Sequence[str],
    limit: int,
    lease_seconds: float,
    now: float | None = None,
    known: Known | None = None,
) -> RunPlan[list[Claimed]]:
    """``_runqueue.claim`` for a worker that serves named queues besides
    the default one: up to ``limit`` runs, each within its queue's limits."""
    if limit <= 0 or not workflows:
        return []
    now = due_now(now)
    lock = _lock(d, queues)
    if lock is not None and known is not None and known.limits is not None and d.writable_ctes:
        take = _Take(d, worker_id, workflows, queues, known.limits, limit, lease_seconds, now)
        locked, rows, *_ = yield Whole((lock, take.statement(guard=True), *take.sweeps()))
        known.limits = _limits(locked)
        return claimed_rows(rows)
    limits: dict[str, Limits] = {}
    if lock is not None:
        # sent with the transaction's BEGIN (``Together``): one round trip
        (rows,) = yield Together((lock,))
        limits = _limits(rows)
        if known is not None:
            known.limits = limits
    take = _Take(d, worker_id, workflows, queues, limits, limit, lease_seconds, now)
    return (yield from take.plan())


def finish_and_claim(
    d: Dialect,
    lease: tuple[str, int],
    status: str,
    result: tuple[str, bytes] | None,
    error: str | None,
    *,
    worker_id: str,
    workflows: Sequence[str],
    queues: Sequence[str],
    lease_seconds: float,
    child: tuple[str, str] | None = None,
    now: float | None = None,
    known: Known | None = None,
) -> RunPlan[tuple[bool, Claimed | None]]:
    """``_runqueue.finish_and_claim`` for a worker that serves named
    queues: the end first, then the claim, in one transaction, so the slot
    the run leaves is free for the claim to count. The end is written before
    the queues' rows are locked: the lock is held for the claim alone (a
    claim never waits for a run's row: it skips locked ones). Without a
    parent to wake, the end and the lock need no result of each other: they
    go out together (``Together``), with BEGIN, in one round trip; with
    the limits ``known``, the claim and the COMMIT too (``Whole``)."""
    now = due_now(now)
    end = d.q(FINISH, finish_params(lease, status, result, error), "one")
    lock = _lock(d, queues)
    fast = lock is not None and known is not None and known.limits is not None
    if fast and child is None and d.writable_ctes:
        assert known is not None and known.limits is not None and lock is not None
        take = _Take(
            d, worker_id, workflows, queues, known.limits, 1, lease_seconds, now, skip=lease[0]
        )
        ended, locked, rows, *_ = yield Whole(
            (end, lock, take.statement(guard=True), *take.sweeps())
        )
        known.limits = _limits(locked)
        return ended is not None, next(iter(claimed_rows(rows)), None)
    limits: dict[str, Limits] = {}
    if child is None:
        ended, *locked = yield Together((end,) if lock is None else (end, lock))
        if locked:
            limits = _limits(locked[0])
    else:
        ended = yield end
        if ended is not None:
            yield from wake(d, child[0], "child", child[1], now)
        if lock is not None:
            limits = _limits((yield lock))
    if known is not None and lock is not None:
        known.limits = limits
    take = _Take(d, worker_id, workflows, queues, limits, 1, lease_seconds, now, skip=lease[0])
    taken = yield from take.plan()
    return ended is not None, next(iter(taken), None)


def _lock(d: Dialect, queues: Sequence[str]) -> Statement | None:
    """The statement reading the limits of the served queues that have any,
    their rows locked until the claim commits (in name order: claims never
    deadlock); ``None`` without named queues."""
    if not queues:
        return None
    names = ", ".join("?" for _ in queues)
    return d.q(
        f"SELECT {_LIMITS} FROM pregelkit_queues WHERE name IN ({names}) AND {_LIMITED} "
        f"ORDER BY name{d.lock_rows}",
        tuple(queues),
        "all",
    )


def _limits(rows: Sequence[Sequence[Any]]) -> dict[str, Limits]:
    return {str(row[0]): Limits.from_row(row) for row in rows}


class _Take:
    """One claim of up to ``limit`` runs from the default queue and
    ``queues``, within ``limits`` (those of the queues that have any)."""

    def __init__(
        self,
        d: Dialect,
        worker_id: str,
        workflows: Sequence[str],
        queues: Sequence[str],
        limits: dict[str, Limits],
        limit: int,
        lease_seconds: float,
        now: float,
        skip: str | None = None,
    ) -> None:
        self.d, self.worker_id, self.workflows, self.queues = d, worker_id, workflows, queues
        self.limits, self.limit, self.lease_seconds, self.now = limits, limit, lease_seconds, now
        self.skip = skip
        self.rated = sorted(name for name, lim in limits.items() if lim.rate_count)
        self.recorded = bool(self.rated) and d.writable_ctes
        """Whether the claim statement writes its rate-limited starts itself."""

    def statement(self, guard: bool = False) -> Statement:
        """The claim. ``guard``: each named queue's part takes runs only
        while the queue's row still holds the limits it was built with."""
        walk = _Walk(self.d, self.workflows, self.limit, self.now, self.skip)
        union = _Sql().add("SELECT run_id, grp, due_at, priority, created_at FROM (")
        union.extend(walk.default())
        for queue in self.queues:
            lim = self.limits.get(queue)
            part = walk.named(queue, lim, self.worker_id)
            union.add(" UNION ALL ").extend(_guarded(queue, lim, part) if guard else part)
        # picked once, then updated: never more than ``limit`` (_runqueue.PICK)
        stmt = _Sql().add(PICK % self.d.materialized + "SELECT run_id FROM (").extend(union)
        stmt.add(f") AS c) AS taken ORDER BY {_ORDER} LIMIT ?)", self.limit)
        stmt.add(CLAIM_SET, self.worker_id, self.lease_seconds).add(PICKED + CLAIM_RETURNING)
        if self.recorded:
            # the starts written by the claim itself: one statement less while
            # the queue's row is locked
            names = ", ".join("?" for _ in self.rated)
            stmt = (
                _Sql()
                .add("WITH taken AS (")
                .extend(stmt)
                .add(
                    "), started AS (INSERT INTO pregelkit_queue_starts (queue, started_at) "
                    "SELECT queue, CAST(? AS double precision) FROM taken "
                    f"WHERE queue IN ({names})) SELECT * FROM taken",
                    self.now,
                    *self.rated,
                )
            )
        return self.d.q(stmt.sql, stmt.params, "all")

    def sweeps(self) -> list[Statement]:
        """At every ``SWEEP_EVERY``-th claim of a rate-limited queue, the
        deletes of its starts long past its window (a minute past the
        window stays: the queue's recent starts, to look at)."""
        if not self.rated:
            return []
        _SWEEPS[0] += 1
        if _SWEEPS[0] % SWEEP_EVERY:
            return []
        return [
            self.d.q(
                "DELETE FROM pregelkit_queue_starts WHERE queue = ? AND started_at < ?",
                (queue, self.now - (self.limits[queue].rate_seconds or 0.0) - STARTS_KEPT),
            )
            for queue in self.rated
        ]

    def plan(self) -> RunPlan[list[Claimed]]:
        """The claim, then what it did not write itself: its starts, and
        now and then the sweeps of old ones."""
        claimed = claimed_rows((yield self.statement()))
        rated = [c.queue for c in claimed if c.queue in self.rated]
        if rated and not self.recorded:
            yield self.d.q(
                "INSERT INTO pregelkit_queue_starts (queue, started_at) VALUES "
                + ", ".join("(?, ?)" for _ in rated),
                tuple(value for queue in rated for value in (queue, self.now)),
            )
        sweeps = self.sweeps() if rated else []
        if sweeps:
            yield Together(sweeps)
        return claimed


_SAME = " AND ".join(f"{column} IS NOT DISTINCT FROM ?" for column in _LIMITS.split(", ")[1:])


def _guarded(queue: str, lim: Limits | None, part: _Sql) -> _Sql:
    """``part`` (a queue's runs to take), taken only while the queue's row
    holds ``lim`` (``None``: no limits): a condition on no run, which the
    database checks once before it walks (and locks) any."""
    if lim is None:
        condition = f"NOT EXISTS (SELECT 1 FROM pregelkit_queues WHERE name = ? AND {_LIMITED})"
        params: tuple[Any, ...] = (queue,)
    else:
        condition = f"EXISTS (SELECT 1 FROM pregelkit_queues WHERE name = ? AND {_SAME})"
        params = (
            queue,
            lim.concurrency,
            lim.worker_concurrency,
            lim.key_concurrency,
            lim.rate_count,
            lim.rate_seconds,
        )
    return _Sql().add("SELECT * FROM (").extend(part).add(f") AS g WHERE {condition}", *params)


class _Walk:
    """The pieces of one claim statement: each queue's runs walked in the
    order they are taken, up to the worker's free slots."""

    def __init__(
        self, d: Dialect, workflows: Sequence[str], limit: int, now: float, skip: str | None
    ) -> None:
        hint = d.index_hint
        self.due_index = hint % "pregelkit_runs_due" if hint else ""
        self.claim_index = hint % "pregelkit_runs_claim" if hint else ""
        self.queue_index = hint % "pregelkit_runs_claim_queue" if hint else ""
        self.names = ", ".join("?" for _ in workflows)
        self.workflows = tuple(workflows)
        self.skip = (skip,) if skip is not None else ()
        self.skip_sql = " AND run_id <> ?" if skip is not None else ""
        self.limit = limit
        self.now = now

    def _due(self, index: str, queue: Sequence[Any], key_ok: _Sql) -> _Sql:
        return (
            _Sql()
            .add(
                "SELECT run_id, 0 AS grp, due_at, priority, created_at, queue_key FROM ("
                "SELECT run_id, due_at, priority, created_at, queue_key "
                f"FROM pregelkit_runs{index} "
                f"WHERE workflow IN ({self.names}){self.skip_sql} "
                "AND status IN ('sleeping', 'waiting') AND due_at IS NOT NULL AND due_at <= ? "
                "AND queue = ? AND (lease_until IS NULL OR lease_until < {now})",
                *self.workflows,
                *self.skip,
                self.now,
                *queue,
            )
            .extend(key_ok)
            .add(" ORDER BY due_at LIMIT ?{skip_locked}) AS due", self.limit)
        )

    def default(self) -> _Sql:
        queued = (
            "SELECT run_id, 1 AS grp, due_at, priority, created_at, queue_key FROM ("
            f"SELECT run_id, due_at, priority, created_at, queue_key "
            f"FROM pregelkit_runs{self.claim_index} "
            f"WHERE workflow IN ({self.names}){self.skip_sql} "
            "AND status IN ('queued', 'running') AND queue = '' "
            "AND (status = 'queued' OR (status = 'running' AND lease_until < {now})) "
            "ORDER BY priority DESC, created_at, run_id LIMIT ?{skip_locked}) AS queued"
        )
        walk = self._due(self.due_index, ("",), _Sql()).add(" UNION ALL ")
        return walk.add(queued, *self.workflows, *self.skip, self.limit)

    def named(self, queue: str, lim: Limits | None, worker_id: str) -> _Sql:
        key_ok = _Sql()
        if lim is not None and lim.key_concurrency is not None:
            # a key at its limit is passed over while walking
            key_ok.add(
                f" AND (queue_key IS NULL OR ({_HELD} AND h.queue_key = pregelkit_runs.queue_key)"
                " < ?)",
                queue,
                lim.key_concurrency,
            )
        walked = self._due(self.due_index, (queue,), key_ok).add(" UNION ALL ")
        walked.add(
            "SELECT run_id, 1 AS grp, due_at, priority, created_at, queue_key FROM ("
            f"SELECT run_id, due_at, priority, created_at, queue_key "
            f"FROM pregelkit_runs{self.queue_index} "
            f"WHERE workflow IN ({self.names}){self.skip_sql} "
            "AND status IN ('queued', 'running') AND queue = ? AND queue <> '' "
            "AND (status = 'queued' OR (status = 'running' AND lease_until < {now})) "
            "AND (not_before IS NULL OR not_before <= ?)",
            *self.workflows,
            *self.skip,
            queue,
            self.now,
        )
        walked.extend(key_ok)
        walked.add(
            " ORDER BY priority DESC, created_at, run_id LIMIT ?{skip_locked}) AS queued",
            self.limit,
        )
        if lim is None or not lim.limited:
            return _Sql().add("SELECT * FROM (").extend(walked).add(") AS w")
        return self._ranked(queue, lim, worker_id, walked)

    def _ranked(self, queue: str, lim: Limits, worker_id: str, walked: _Sql) -> _Sql:
        """The walked runs that fit: ranked per key, those within the key's
        limit ranked per queue, those within the queue's limits kept."""
        keyed = _Sql()
        if lim.key_concurrency is not None:
            keyed.add(
                "SELECT * FROM (SELECT w.*, row_number() OVER (PARTITION BY queue_key "
                f"ORDER BY {_ORDER}) AS kn, ({_HELD} AND h.queue_key = w.queue_key) AS held_k "
                "FROM (",
                queue,
            )
            keyed.extend(walked).add(") AS w) AS k WHERE queue_key IS NULL OR kn + held_k <= ?")
            keyed.params.append(lim.key_concurrency)
        else:
            keyed.add("SELECT * FROM (").extend(walked).add(") AS w")
        ranked = _Sql().add(
            "SELECT run_id, grp, due_at, priority, created_at, queue_key FROM ("
            "SELECT run_id, grp, due_at, priority, created_at, queue_key, "
            f"row_number() OVER (ORDER BY {_ORDER}) AS qn FROM ("
        )
        ranked.extend(keyed).add(") AS kept) AS r")
        fits: list[tuple[str, tuple[Any, ...]]] = []
        if lim.concurrency is not None:
            fits.append((f"qn + ({_HELD}) <= ?", (queue, lim.concurrency)))
        if lim.worker_concurrency is not None:
            fits.append(
                (
                    f"qn + ({_HELD} AND h.worker = ?) <= ?",
                    (queue, worker_id, lim.worker_concurrency),
                )
            )
        if lim.rate_count is not None:
            since = self.now - (lim.rate_seconds or 0.0)
            fits.append((f"qn + ({_STARTS}) <= ?", (queue, since, lim.rate_count)))
        for at, (condition, params) in enumerate(fits):
            ranked.add((" AND " if at else " WHERE ") + condition, *params)
        return ranked


# looking


def overview(
    d: Dialect, now: float | None = None
) -> RunPlan[tuple[list[tuple[Limits, int, int]], dict[tuple[str, str], int]]]:
    """Each declared queue with its runs holding a slot and its starts in
    the rate window now; and the slots held per (queue, key)."""
    now = due_now(now)
    queues = yield from declared(d)
    rows = yield d.q(
        "SELECT queue, queue_key, count(*) FROM pregelkit_runs WHERE status = 'running' "
        f"AND queue <> '' AND lease_until >= {{now}} - {HELD_GRACE} GROUP BY queue, queue_key",
        (),
        "all",
    )
    per_key: dict[tuple[str, str], int] = {}
    per_queue: dict[str, int] = {}
    for queue, key, count in rows:
        per_queue[str(queue)] = per_queue.get(str(queue), 0) + int(count)
        if key is not None:
            per_key[(str(queue), str(key))] = int(count)
    result = []
    for q in queues:
        starts = 0
        if q.rate_count is not None:
            row = yield d.q(
                _STARTS,
                (q.name, now - (q.rate_seconds or 0.0)),
                "one",
            )
            starts = int(row[0])
        result.append((q, per_queue.get(q.name, 0), starts))
    return result, per_key
