"""Retention: drop the history a durable database no longer needs.

Checkpoints, their writes and blobs, attempt records and ended runs grow
for ever unless something removes them. A :class:`RetentionPolicy` says what
may go; :func:`prune` (or ``Worker(..., retention=policy)``, in the
background) removes it in short transactions of at most a few hundred rows
(``_retention``), so workers keep claiming and saving meanwhile.

What a thread needs to go on is never removed: the latest checkpoint of
each of its namespaces with its pending writes and the blobs it references,
a checkpoint an active run's config names (a fork waiting in the queue),
its messages, events and marks, and its active or interrupted run. Only
``delete_threads_after`` removes whole threads, and only ended ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pregelkit.checkpoint import _retention
from pregelkit.checkpoint._retention import TABLES, Counts, Cutoffs, Step

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = ["PruneReport", "RetentionPolicy", "aprune", "prune"]

T = TypeVar("T")
Duration = timedelta | float | int


def _seconds(name: str, value: Duration | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(
            f"RetentionPolicy({name}=...) takes a timedelta or a number of seconds, "
            f"got {type(value).__name__} {value!r}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(
            f"RetentionPolicy({name}=...) must be a finite duration >= 0, got {value!r} "
            "(None keeps everything)"
        )
    return seconds


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What a prune may remove; ``None`` keeps that kind of row for ever.

    ``keep_checkpoints=N``: each thread namespace keeps its N latest
    checkpoints (N >= 1; 1 keeps only the latest). ``max_age``: checkpoints
    and attempt records older than that go. A checkpoint goes when either
    says so; the latest of each namespace always stays. ``ended_runs_max_age``:
    run records that ended that long ago go (a ``RunHandle`` for one then
    finds no run). ``delete_threads_after``: a thread that ended (its last
    run done, failed or cancelled, or its latest checkpoint waits for
    nothing) and saw nothing happen for that long is deleted whole.
    Durations are a ``timedelta`` or seconds, judged by the wall clock
    (checkpoint ids carry their creation time)."""

    keep_checkpoints: int | None = None
    max_age: Duration | None = None
    ended_runs_max_age: Duration | None = None
    delete_threads_after: Duration | None = None

    def __post_init__(self) -> None:
        keep = self.keep_checkpoints
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ValueError(
                f"RetentionPolicy(keep_checkpoints=...) must be an int >= 1, got {keep!r}: "
                "each thread's latest checkpoint always stays (1 keeps only it; None keeps all)"
            )
        if keep is not None and keep > 2**31 - 1:
            # a query's OFFSET: SQLite's OverflowError past 2**63, PostgreSQL's past 2**63 - 1
            raise ValueError(
                f"RetentionPolicy(keep_checkpoints=...) is at most {2**31 - 1}, got {keep}: "
                "None keeps all"
            )
        ages = [
            _seconds(name, getattr(self, name))
            for name in ("max_age", "ended_runs_max_age", "delete_threads_after")
        ]
        if keep is None and all(age is None for age in ages):
            raise ValueError(
                "RetentionPolicy() keeps everything: give keep_checkpoints, max_age, "
                "ended_runs_max_age or delete_threads_after"
            )

    def cutoffs(self, now: float) -> Cutoffs:
        """The policy made absolute at ``now`` (seconds since the epoch)."""
        max_age, runs, threads = (
            _seconds(name, getattr(self, name))
            for name in ("max_age", "ended_runs_max_age", "delete_threads_after")
        )
        return Cutoffs(
            keep=self.keep_checkpoints,
            history_before=None if max_age is None else _retention.id_at(now - max_age),
            attempts_before=None if max_age is None else now - max_age,
            runs_before=None if runs is None else now - runs,
            threads_before=None if threads is None else now - threads,
        )


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune removed (a dry run: would remove), per table: ``rows``
    and ``bytes`` (of the stored payloads: checkpoints with their metadata,
    blobs, write values, run inputs, configs and results, message and event
    values; not index or page overhead, so the file shrinks by more or, on
    SQLite without VACUUM, not at all)."""

    dry_run: bool
    rows: Mapping[str, int]
    bytes: Mapping[str, int]
    threads_deleted: int

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    @classmethod
    def of(cls, counts: Counts, dry_run: bool) -> PruneReport:
        return cls(dry_run, dict(counts.rows), dict(counts.bytes), counts.threads_deleted)

    def __str__(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        parts = [f"{self.rows[t]:,} {t}" for t in TABLES if self.rows[t]]
        what = ", ".join(parts) if parts else "nothing"
        whole = f"; {self.threads_deleted:,} threads deleted whole" if self.threads_deleted else ""
        return f"prune {verb} {self.total_rows:,} rows ({_size(self.total_bytes)}): {what}{whole}"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError


def prune_job(
    saver: BaseCheckpointSaver[Any],
    policy: RetentionPolicy,
    dry_run: bool,
    progress: Callable[[Counts], object] | None = None,
) -> Generator[Step, Any, Counts]:
    """The steps of one prune of ``saver``'s database (``_retention.job``)."""
    if not isinstance(policy, RetentionPolicy):
        raise TypeError(f"prune() takes a RetentionPolicy, got {type(policy).__name__}")
    if not saver.has_run_queue:
        raise TypeError(
            f"{type(saver).__name__} cannot be pruned: prune() works on a SqliteSaver or "
            "PostgresSaver (or their async twins); an InMemorySaver's history goes with "
            "its process, and saver.prune(thread_ids) drops chosen threads' history"
        )
    cut = policy.cutoffs(time.time())
    return _retention.job(cut, saver.serde.loads_typed, dry_run, progress)


def run_steps(
    saver: BaseCheckpointSaver[Any],
    steps: Generator[Step, Any, T],
    between: Callable[[], object] = lambda: None,
) -> T:
    """Run each step in a transaction of its own; ``between`` after each."""
    try:
        step = next(steps)
        while True:
            result = saver.run_queue(step, "prune")
            between()
            step = steps.send(result)
    except StopIteration as end:
        value: T = end.value
        return value


async def arun_steps(
    saver: BaseCheckpointSaver[Any],
    steps: Generator[Step, Any, T],
    between: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """:func:`run_steps` on the saver's async side."""
    try:
        step = next(steps)
        while True:
            result = await saver.arun_queue(step, "prune")
            if between is not None:
                await between()
            step = steps.send(result)
    except StopIteration as end:
        value: T = end.value
        return value


def prune(
    saver: BaseCheckpointSaver[Any], policy: RetentionPolicy, *, dry_run: bool = False
) -> PruneReport:
    """Apply ``policy`` once to ``saver``'s database, in short transactions
    (safe while workers run: what a thread needs to go on stays; a prune
    stopped at any point leaves a consistent database, and the next one
    finishes it). ``dry_run``: count what would go and delete nothing.
    Returns what was removed per table."""
    return PruneReport.of(run_steps(saver, prune_job(saver, policy, dry_run)), dry_run)


async def aprune(
    saver: BaseCheckpointSaver[Any], policy: RetentionPolicy, *, dry_run: bool = False
) -> PruneReport:
    """:func:`prune` on an async saver."""
    counts = await arun_steps(saver, prune_job(saver, policy, dry_run))
    return PruneReport.of(counts, dry_run)
