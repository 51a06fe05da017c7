"""What a prune removes, decided once for SQLite and PostgreSQL.

A prune is a *job*: a generator of steps, each a queue plan (``_runqueue``
vocabulary) that a driver runs as one short transaction of its own
(``saver.run_queue`` / ``arun_queue``), so no lock is held for long and a
prune killed at any point leaves a consistent database that the next prune
finishes. The job walks the threads in key order (a cursor, never the
deletions, moves it on, so a dry run ends too):

1. a *scan* reads a few threads: the latest and the N-th latest checkpoint
   of each namespace, the checkpoints their active runs' configs name (a
   fork a queued run starts from) and whether the thread has an active run;
2. each thread old enough for ``delete_threads_after`` is checked again
   and deleted whole in a transaction of its own if it has ended;
3. the history of the others goes in chunks of at most ``BATCH_ROWS``
   checkpoints, with their writes, then the blobs no kept checkpoint
   references; attempt records older than ``max_age``;
4. then ended runs older than ``ended_runs_max_age``, and schedule slot
   rows fired before it, in chunks.

A checkpoint is dropped when it is older than the ``keep``-th latest of its
namespace or older than the ``max_age`` cutoff, and never when it is its
namespace's latest or an active run's config names it. Checkpoint ids are
UUIDv6, time-ordered as text: an age is a comparison with the id made at
the cutoff, no decoding. What a resuming thread reads (the latest
checkpoint of each namespace, its pending writes, the blobs it references,
its messages, events, marks and active run) always stays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pregelkit._internal._ids import _timestamp
from pregelkit._internal._plan import Statement
from pregelkit.checkpoint import _parts
from pregelkit.checkpoint._runqueue import (
    ACTIVE,
    CANCELLED,
    DONE,
    FAILED,
    FINISHED,
    INTERRUPTED,
    IS_ACTIVE,
    Dialect,
    RunPlan,
)

BATCH_ROWS = 500
"""Checkpoints (or runs) one transaction removes at most: a few ms of the
write lock on SQLite, a short row-lock window on PostgreSQL."""
THREADS_PER_SCAN = 50
"""Threads one scan reads."""

TABLES = (
    "checkpoints",
    "writes",
    "blobs",
    "attempts",
    "runs",
    "messages",
    "events",
    "thread_control",
    "schedule_slots",
)

_ACTIVE_SQL = ", ".join(f"'{s}'" for s in ACTIVE)
_HOLDING_SQL = ", ".join(f"'{s}'" for s in (*ACTIVE, INTERRUPTED))
_ENDED_SQL = ", ".join(f"'{s}'" for s in FINISHED)
_INTERRUPT = "__interrupt__"
_ERROR = "__error__"


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """A policy made absolute at the prune's start (wall clock, seconds)."""

    keep: int | None
    history_before: str | None
    """Checkpoint id made at the ``max_age`` cutoff."""
    attempts_before: float | None
    runs_before: float | None
    threads_before: float | None


@dataclass(slots=True)
class Counts:
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    threads_deleted: int = 0
    scanned: int = 0
    """Checkpoint rows of the threads scanned so far (progress)."""

    def add(self, table: str, rows: int, size: int) -> None:
        self.rows[table] += int(rows)
        self.bytes[table] += int(size)

    def merge(self, other: Counts) -> None:
        for table in TABLES:
            self.add(table, other.rows[table], other.bytes[table])
        self.threads_deleted += other.threads_deleted
        self.scanned += other.scanned


def id_at(seconds: float) -> str:
    """The smallest UUIDv6 id made at ``seconds`` since the epoch: every id
    made before it sorts below it as text."""
    ts = int(seconds * 10_000_000) + 0x01B21DD213814000
    ts = max(ts, 0)
    value = (((ts >> 12) & 0xFFFFFFFFFFFF) << 80) | (((ts & 0x0FFF) | (6 << 12)) << 64)
    h = value.to_bytes(16, "big").hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def seconds_of(checkpoint_id: str) -> float | None:
    """When a UUIDv6 checkpoint id was made (``None`` for another form)."""
    ts = _timestamp(checkpoint_id)
    return None if ts == 0 else (ts - 0x01B21DD213814000) / 10_000_000


@dataclass(frozen=True, slots=True)
class _Spelling:
    size: str
    """``%s``: the byte length of a column."""
    pairs: str
    """``%s``: the (key, value) rows of a JSON object column, as ``v``."""
    source: str
    """The metadata's ``source`` of checkpoint row ``c``."""


_SPELLINGS = {
    "sqlite": _Spelling(
        "length(%s)", "json_each(%s) AS v", "json_extract(c.metadata_json, '$.source')"
    ),
    "postgres": _Spelling(
        "octet_length(%s)", "jsonb_each_text(%s) AS v", "c.metadata_json ->> 'source'"
    ),
}


def _spell(d: Dialect) -> _Spelling:
    return _SPELLINGS[d.name]


def _marks(n: int) -> str:
    return ", ".join("?" for _ in range(n))


# the job's steps

Step: TypeAlias = Callable[[Dialect], RunPlan[Any]]
Job: TypeAlias = Generator[Step, Any, Counts]
Decode: TypeAlias = Callable[[tuple[str, bytes]], Any]


@dataclass(frozen=True, slots=True)
class Group:
    """One thread namespace's history to drop: ids below ``below``, except
    ``protected`` (named by an active run's config)."""

    thread_id: str
    ns: str
    below: str
    protected: tuple[str, ...]


@dataclass(slots=True)
class Scan:
    last: str | None
    """The last thread read; ``None``: no thread after the cursor."""
    groups: list[Group] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    """Threads old enough to delete whole, if they ended."""
    rows: int = 0


def job(
    cut: Cutoffs, decode: Decode, dry_run: bool, progress: Callable[[Counts], object] | None = None
) -> Job:
    """The whole prune, as steps; returns what it removed (or would).
    ``progress`` is told the totals after each scan (a progress bar)."""
    total = Counts()
    after = ""
    history = cut.keep is not None or cut.history_before is not None
    while history or cut.threads_before is not None:
        scan: Scan = yield _step(_scan, after=after, cut=cut, decode=decode)
        if scan.last is None:
            break
        total.scanned += scan.rows
        if progress is not None:
            progress(total)
        deleted: set[str] = set()
        for thread_id in scan.candidates:
            counts: Counts = yield _step(
                _delete_thread, thread_id=thread_id, cut=cut, dry_run=dry_run
            )
            if counts.threads_deleted:
                deleted.add(thread_id)
            total.merge(counts)
        groups = [g for g in scan.groups if g.thread_id not in deleted]
        at = (0, "")
        while at[0] < len(groups):
            counts, at = yield _step(_history, groups=groups, at=at, dry_run=dry_run)
            total.merge(counts)
        if cut.attempts_before is not None:
            counts = yield _step(
                _attempts, low=after, high=scan.last, before=cut.attempts_before, dry_run=dry_run
            )
            total.merge(counts)
        after = scan.last
    if cut.runs_before is not None:
        run_after: str | None = ""
        while run_after is not None:
            counts, run_after = yield _step(
                _ended_runs, after=run_after, before=cut.runs_before, dry_run=dry_run
            )
            total.merge(counts)
        slot_after: tuple[str, float] | None = ("", -math.inf)
        while slot_after is not None:
            counts, slot_after = yield _step(
                _fired_slots, after=slot_after, before=cut.runs_before, dry_run=dry_run
            )
            total.merge(counts)
    return total


def _step(plan: Callable[..., RunPlan[Any]], **kwargs: Any) -> Step:
    def make(d: Dialect) -> RunPlan[Any]:
        return plan(d, **kwargs)

    make.__name__ = plan.__name__
    return make


def count_checkpoints(d: Dialect) -> RunPlan[int]:
    """Every checkpoint row: what a progress bar counts to."""
    (n,) = yield d.q("SELECT count(*) FROM pregelkit_checkpoints", (), "one")
    return int(n)


def _scan(d: Dialect, after: str, cut: Cutoffs, decode: Decode) -> RunPlan[Scan]:
    threads = yield d.q(
        "SELECT DISTINCT thread_id FROM pregelkit_checkpoints WHERE thread_id > ? "
        "ORDER BY thread_id LIMIT ?",
        (after, THREADS_PER_SCAN),
        "all",
    )
    if not threads:
        return Scan(None)
    last = str(threads[-1][0])
    window = (after, last)
    rows = yield d.q(
        """
        SELECT thread_id, checkpoint_ns, checkpoint_id, rn, n FROM (
            SELECT thread_id, checkpoint_ns, checkpoint_id,
                row_number() OVER (PARTITION BY thread_id, checkpoint_ns
                                   ORDER BY checkpoint_id DESC) AS rn,
                count(*) OVER (PARTITION BY thread_id, checkpoint_ns) AS n
            FROM pregelkit_checkpoints WHERE thread_id > ? AND thread_id <= ?
        ) AS r WHERE rn = 1 OR rn = ? OR rn = n
        """,
        (*window, cut.keep or 1),
        "all",
    )
    active = yield d.q(
        f"SELECT thread_id, config_type, config FROM pregelkit_runs "
        f"WHERE thread_id > ? AND thread_id <= ? AND {IS_ACTIVE}",
        window,
        "all",
    )
    busy = {str(r[0]) for r in active}
    named = _named_checkpoints(decode, active)
    return plan_scan(last, rows, busy, named, cut)


def _named_checkpoints(
    decode: Decode, active: Iterable[Sequence[Any]]
) -> set[tuple[str, str, str]]:
    """(thread, namespace, checkpoint id) each active run's config names."""
    named = set()
    for thread_id, config_type, config in active:
        conf = (decode((str(config_type), bytes(config))) or {}).get("configurable") or {}
        checkpoint_id = conf.get("checkpoint_id")
        if checkpoint_id:
            named.add((str(thread_id), str(conf.get("checkpoint_ns") or ""), str(checkpoint_id)))
    return named


def plan_scan(
    last: str,
    rows: Iterable[Sequence[Any]],
    busy: set[str],
    named: set[tuple[str, str, str]],
    cut: Cutoffs,
) -> Scan:
    """Which namespaces lose history and which threads may go whole, from
    the scan's rows: (thread, namespace, id, rank from the newest, count)
    for the newest, the ``keep``-th and the oldest of each namespace."""
    latest: dict[tuple[str, str], str] = {}
    nth: dict[tuple[str, str], str] = {}
    oldest: dict[tuple[str, str], str] = {}
    sizes: dict[tuple[str, str], int] = {}
    for thread_id, ns, checkpoint_id, rank, count in rows:
        key = (str(thread_id), str(ns))
        if rank == 1:
            latest[key] = str(checkpoint_id)
        if cut.keep is not None and rank == cut.keep:
            nth[key] = str(checkpoint_id)
        if rank == count:
            oldest[key] = str(checkpoint_id)
        sizes[key] = int(count)
    scan = Scan(last, rows=sum(sizes.values()))
    newest: dict[str, str] = {}
    for key, top in latest.items():
        newest[key[0]] = max(newest.get(key[0], ""), top)
        below = min(top, max(nth.get(key, ""), cut.history_before or ""))
        if oldest[key] < below:
            protected = tuple(sorted(i for t, n, i in named if (t, n) == key and i < below))
            scan.groups.append(Group(key[0], key[1], below, protected))
    if cut.threads_before is not None:
        idle_before = id_at(cut.threads_before)
        scan.candidates = sorted(
            t for t, top in newest.items() if top < idle_before and t not in busy
        )
    return scan


def _take(
    d: Dialect, table: str, where: str, params: Sequence[Any], size: str, dry_run: bool
) -> RunPlan[tuple[int, int]]:
    """Count and measure the rows of ``table`` ``where`` matches, then delete
    them (unless ``dry_run``): one predicate for the report and the delete.
    PostgreSQL deletes and measures in one statement (half the round trips
    of a prune: 4,954 checkpoints/s before, on 20,000)."""
    if d.writable_ctes and not dry_run:
        rows, total = yield d.q(
            f"WITH gone AS (DELETE FROM {table} WHERE {where} RETURNING {size} AS n) "
            "SELECT count(*), coalesce(sum(n), 0) FROM gone",
            params,
            "one",
        )
        return int(rows), int(total)
    rows, total = yield d.q(
        f"SELECT count(*), coalesce(sum({size}), 0) FROM {table} WHERE {where}", params, "one"
    )
    if rows and not dry_run:
        yield d.q(f"DELETE FROM {table} WHERE {where}", params)
    return int(rows), int(total)


def _history(
    d: Dialect, groups: Sequence[Group], at: tuple[int, str], dry_run: bool
) -> RunPlan[tuple[Counts, tuple[int, str]]]:
    """At most ``BATCH_ROWS`` checkpoints of ``groups`` from ``at`` (group
    index, last id done), their writes, and each finished group's blobs
    that no kept checkpoint references; returns the counts and where the
    next chunk starts."""
    sp = _spell(d)
    counts = Counts()
    index, done_to = at
    budget = BATCH_ROWS
    while index < len(groups) and budget > 0:
        g = groups[index]
        keep_named = (
            f" AND checkpoint_id NOT IN ({_marks(len(g.protected))})" if g.protected else ""
        )
        ids = yield d.q(
            "SELECT checkpoint_id FROM pregelkit_checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? AND checkpoint_id > ? AND checkpoint_id < ? "
            "ORDER BY checkpoint_id LIMIT ?",
            (g.thread_id, g.ns, done_to, g.below, budget),
            "all",
        )
        if ids:
            upto = str(ids[-1][0])
            where = (
                "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id > ? AND checkpoint_id <= ? "
                "AND checkpoint_id < ?" + keep_named
            )
            params = (g.thread_id, g.ns, done_to, upto, g.below, *g.protected)
            counts.add(
                "writes",
                *(
                    yield from _take(
                        d, "pregelkit_writes", where, params, sp.size % "value", dry_run
                    )
                ),
            )
            size = f"{sp.size % 'checkpoint'} + {sp.size % 'metadata'}"
            counts.add(
                "checkpoints",
                *(yield from _take(d, "pregelkit_checkpoints", where, params, size, dry_run)),
            )
            budget -= len(ids)
            done_to = upto
        if budget > 0:  # the group is done: its blobs no kept checkpoint references
            counts.add(
                "blobs",
                *(
                    yield from _take(
                        d,
                        "pregelkit_blobs AS b",
                        _unreferenced(sp, g),
                        (g.thread_id, g.ns, g.below, *g.protected),
                        f"coalesce({sp.size % 'b.blob'}, 0)",
                        dry_run,
                    )
                ),
            )
            index, done_to = index + 1, ""
    return counts, (index, done_to)


def _unreferenced(sp: _Spelling, g: Group) -> str:
    """Blobs of ``g``'s namespace that no checkpoint it keeps references:
    judged against the kept ones, so a dry run (which deletes nothing)
    counts what the prune would remove."""
    named = f" OR c.checkpoint_id IN ({_marks(len(g.protected))})" if g.protected else ""
    return (
        "b.thread_id = ? AND b.checkpoint_ns = ? AND NOT EXISTS ("
        f"SELECT 1 FROM pregelkit_checkpoints AS c, {sp.pairs % 'c.channel_versions'} "
        "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
        f"AND (c.checkpoint_id >= ?{named}) AND v.key = b.channel AND v.value = b.version)"
    )


def _attempts(d: Dialect, low: str, high: str, before: float, dry_run: bool) -> RunPlan[Counts]:
    """Attempt records that ended before ``before`` of threads in
    (``low``, ``high``] with no active run (an active run's own records
    stay: its timeline and retries read them)."""
    counts = Counts()
    sp = _spell(d)
    where = (
        "thread_id > ? AND thread_id <= ? AND ended_at IS NOT NULL AND ended_at < ? "
        "AND NOT EXISTS (SELECT 1 FROM pregelkit_runs AS r "
        f"WHERE r.thread_id = pregelkit_attempts.thread_id AND r.{IS_ACTIVE})"
    )
    size = f"{sp.size % 'name'} + coalesce({sp.size % 'error_message'}, 0)"
    counts.add(
        "attempts",
        *(yield from _take(d, "pregelkit_attempts", where, (low, high, before), size, dry_run)),
    )
    return counts


_THREAD_STATE = f"""
SELECT
    (SELECT count(*) FROM pregelkit_runs WHERE thread_id = ? AND {IS_ACTIVE}),
    (SELECT status FROM pregelkit_runs WHERE thread_id = ?
        ORDER BY created_at DESC, run_id DESC LIMIT 1),
    (SELECT max(updated_at) FROM pregelkit_runs WHERE thread_id = ?),
    (SELECT count(*) FROM pregelkit_runs AS c JOIN pregelkit_runs AS p
        ON p.thread_id = c.parent_thread
        WHERE c.thread_id = ? AND p.status IN ({_HOLDING_SQL})),
    (SELECT max(created_at) FROM pregelkit_messages WHERE thread_id = ?),
    (SELECT max(checkpoint_id) FROM pregelkit_checkpoints WHERE thread_id = ?),
    (SELECT count(*) FROM pregelkit_writes AS w WHERE w.thread_id = ? AND w.channel = ?
        AND w.checkpoint_id = (SELECT max(k.checkpoint_id) FROM pregelkit_checkpoints AS k
            WHERE k.thread_id = w.thread_id AND k.checkpoint_ns = w.checkpoint_ns))
"""


@dataclass(frozen=True, slots=True)
class ThreadState:
    """What decides whether a thread has ended (``ended``)."""

    active_runs: int
    last_run: str | None
    run_changed_at: float | None
    held_by_parent: int
    """Its runs whose parent thread has an active or interrupted run."""
    message_at: float | None
    newest_checkpoint: str | None
    interrupts: int
    """Interrupt writes on the latest checkpoint of a namespace."""
    source: str | None
    """The root namespace's latest checkpoint's metadata source."""
    channels: frozenset[str]
    """The channels of that checkpoint's pending writes."""


def ended(state: ThreadState, idle_before: float) -> bool:
    """A thread may be deleted whole: nothing waits on it or for it, no run
    of it is active, interrupted or wanted by its parent, and nothing
    happened in it since ``idle_before``. Without a queue run, its latest
    checkpoint says, as ``pregelkit threads`` does (``cli._status``): done
    (no pending writes, not an input not run yet) or failed (a task's error
    is among its pending writes: deleted like a failed run)."""
    if state.active_runs or state.held_by_parent or state.interrupts:
        return False
    if state.last_run == INTERRUPTED:
        return False
    for at in (state.run_changed_at, state.message_at):
        if at is not None and at >= idle_before:
            return False
    if state.newest_checkpoint is not None:
        made = seconds_of(state.newest_checkpoint)
        if made is None or made >= idle_before:
            return False
    if state.last_run in (DONE, FAILED, CANCELLED) or _ERROR in state.channels:
        return True
    return not state.channels and state.source != "input"


_WHOLE = (
    ("checkpoints", "pregelkit_checkpoints", "%(checkpoint)s + %(metadata)s"),
    ("writes", "pregelkit_writes", "%(value)s"),
    ("blobs", "pregelkit_blobs", "coalesce(%(blob)s, 0)"),
    ("attempts", "pregelkit_attempts", "%(name)s + coalesce(%(error_message)s, 0)"),
    ("runs", "pregelkit_runs", "%(input)s + %(config)s + coalesce(%(result)s, 0)"),
    ("messages", "pregelkit_messages", "%(value)s"),
    ("events", "pregelkit_events", "%(value)s"),
    ("thread_control", "pregelkit_thread_control", "0"),
)


class _Sizes(dict[str, str]):
    def __init__(self, sp: _Spelling) -> None:
        super().__init__()
        self.sp = sp

    def __missing__(self, column: str) -> str:
        return self.sp.size % column


def _delete_thread(d: Dialect, thread_id: str, cut: Cutoffs, dry_run: bool) -> RunPlan[Counts]:
    """Delete ``thread_id`` whole if it has ended and been idle since the
    cutoff, judged again inside this transaction."""
    assert cut.threads_before is not None
    sp = _spell(d)
    row = yield d.q(_THREAD_STATE, (*(thread_id,) * 7, _INTERRUPT), "one")
    root = yield d.q(
        f"SELECT c.checkpoint_id, {sp.source} FROM pregelkit_checkpoints AS c "
        "WHERE c.thread_id = ? AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id DESC LIMIT 1",
        (thread_id,),
        "one",
    )
    channels: list[Any] = []
    if root is not None:
        channels = yield d.q(
            "SELECT DISTINCT channel FROM pregelkit_writes WHERE thread_id = ? "
            "AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, root[0]),
            "all",
        )
    state = ThreadState(
        int(row[0]),
        row[1],
        None if row[2] is None else float(row[2]),
        int(row[3]),
        None if row[4] is None else float(row[4]),
        row[5],
        int(row[6]),
        None if root is None else root[1],
        frozenset(str(c[0]) for c in channels),
    )
    counts = Counts()
    if not ended(state, cut.threads_before):
        return counts
    sizes = _Sizes(sp)
    for name, table, size in _WHOLE:
        # only ended runs: on PostgreSQL a run submitted to the thread since
        # the state above was read (committed before this delete) would go too
        where = f"thread_id = ? AND status IN ({_ENDED_SQL})" if name == "runs" else "thread_id = ?"
        counts.add(name, *(yield from _take(d, table, where, (thread_id,), size % sizes, dry_run)))
    counts.threads_deleted = 1
    return counts


def _ended_runs(
    d: Dialect, after: str, before: float, dry_run: bool
) -> RunPlan[tuple[Counts, str | None]]:
    """Up to ``BATCH_ROWS`` ended runs (after ``after`` in id order) that
    finished before ``before``; not a thread's latest run if it was
    interrupted (its answer is awaited), nor a child whose parent thread
    has an active or interrupted run (the parent may read its outcome).
    Returns the counts and the next cursor (``None``: done)."""
    sp = _spell(d)
    rows = yield d.q(
        f"""
        SELECT r.run_id, {sp.size % "r.input"} + {sp.size % "r.config"}
            + coalesce({sp.size % "r.result"}, 0)
        FROM pregelkit_runs AS r
        WHERE r.run_id > ? AND r.status IN ({_ENDED_SQL}) AND r.finished_at < ?
          AND NOT (r.status = '{INTERRUPTED}' AND NOT EXISTS (
              SELECT 1 FROM pregelkit_runs AS n
              WHERE n.thread_id = r.thread_id AND n.created_at > r.created_at))
          AND NOT EXISTS (
              SELECT 1 FROM pregelkit_runs AS p
              WHERE r.parent_thread IS NOT NULL AND p.thread_id = r.parent_thread
                AND p.status IN ({_HOLDING_SQL}))
        ORDER BY r.run_id LIMIT ?
        """,
        (after, before, BATCH_ROWS),
        "all",
    )
    counts = Counts()
    if not rows:
        return counts, None
    ids = [str(r[0]) for r in rows]
    counts.add("runs", len(ids), sum(int(r[1]) for r in rows))
    if not dry_run:
        yield d.q(f"DELETE FROM pregelkit_runs WHERE run_id IN ({_marks(len(ids))})", ids)
        yield from _parts.delete(d, ids)
    return counts, (ids[-1] if len(ids) == BATCH_ROWS else None)


def _fired_slots(
    d: Dialect, after: tuple[str, float], before: float, dry_run: bool
) -> RunPlan[tuple[Counts, tuple[str, float] | None]]:
    """Up to ``BATCH_ROWS`` schedule slot rows (after ``after`` in key
    order) fired before ``before``, with ``ended_runs_max_age``: each one
    before its schedule's next slot (a slot is fired from ``next_at`` on,
    so a slot behind it never fires again), not its schedule's latest (what
    ``pregelkit schedules`` shows as last fired), and not the slot of an
    active run. Returns the counts and the next cursor (``None``: done)."""
    rows = yield d.q(
        f"""
        SELECT s.schedule_id, s.slot_at FROM pregelkit_schedule_slots AS s
        LEFT JOIN pregelkit_schedules AS sc ON sc.schedule_id = s.schedule_id
        WHERE (s.schedule_id > ? OR (s.schedule_id = ? AND s.slot_at > ?)) AND s.fired_at < ?
          AND (sc.next_at IS NULL OR s.slot_at < sc.next_at)
          AND s.slot_at < (SELECT max(l.slot_at) FROM pregelkit_schedule_slots AS l
                           WHERE l.schedule_id = s.schedule_id)
          AND NOT EXISTS (SELECT 1 FROM pregelkit_runs AS r
                          WHERE r.run_id = s.run_id AND r.{IS_ACTIVE})
        ORDER BY s.schedule_id, s.slot_at LIMIT ?
        """,
        (after[0], after[0], after[1], before, BATCH_ROWS),
        "all",
    )
    counts = Counts()
    if not rows:
        return counts, None
    keys = [(str(r[0]), float(r[1])) for r in rows]
    counts.add("schedule_slots", len(keys), 0)
    if not dry_run:
        yield Statement(
            d.sql("DELETE FROM pregelkit_schedule_slots WHERE schedule_id = ? AND slot_at = ?"),
            keys,
            "many",
        )
    return counts, (keys[-1] if len(keys) == BATCH_ROWS else None)


# one worker at a time

_ROW = 1


def take_turn(d: Dialect, holder: str, lease: float, every: float) -> RunPlan[bool]:
    """Whether ``holder`` may prune now: no other worker's lease holds the
    turn and the last prune ended ``every`` seconds ago or more (both by
    the database's clock). Taking it leases it for ``lease`` seconds."""
    yield d.q("INSERT INTO pregelkit_retention (id) VALUES (?) ON CONFLICT DO NOTHING", (_ROW,))
    row = yield d.q(
        "UPDATE pregelkit_retention SET holder = ?, lease_until = {now} + ? WHERE id = ? "
        "AND (lease_until IS NULL OR lease_until < {now} OR holder = ?) "
        "AND (pruned_at IS NULL OR pruned_at <= {now} - ?) RETURNING 1",
        (holder, lease, _ROW, holder, every),
        "one",
    )
    return row is not None


def renew_turn(d: Dialect, holder: str, lease: float) -> RunPlan[bool]:
    """Extend ``holder``'s lease; ``False``: it lapsed and another took it."""
    row = yield d.q(
        "UPDATE pregelkit_retention SET lease_until = {now} + ? WHERE id = ? AND holder = ? "
        "RETURNING 1",
        (lease, _ROW, holder),
        "one",
    )
    return row is not None


def end_turn(d: Dialect, holder: str, finished: bool) -> RunPlan[None]:
    """Give the turn back; ``finished``: the prune ran to its end, so the
    next one is due ``every`` seconds from now."""
    stamp = ", pruned_at = {now}" if finished else ""
    yield d.q(
        f"UPDATE pregelkit_retention SET holder = NULL, lease_until = NULL{stamp} "
        "WHERE id = ? AND holder = ?",
        (_ROW, holder),
    )
