"""What a saver keeps of each task or node attempt, for timelines.

Savers store these beside checkpoints (same thread, deleted and pruned with
it), so a run's history is read from the database the run already writes.
A thread's records grouped by run are a ``Timeline`` (defined here, below the
graph layer, so ``Pregel.get_timeline`` can build one; users import it from
``pregelkit.observe.timeline``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pregelkit._internal._dataclass import lazy_dataclass

Outcome = Literal["ok", "error", "interrupted", "cached", "replayed", "timeout", "cancelled"]


@lazy_dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of one task or node. ``ended_at`` and ``outcome`` are None
    while it runs, and stay None when its process was killed."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = (  # noqa: RUF023
        "thread_id",
        "checkpoint_ns",
        "run_id",
        "step",
        "task_id",
        "name",
        "attempt",
        "started_at",
        "ended_at",
        "outcome",
        "error_type",
        "error_message",
        "pid",
        "host",
        "worker",
    )

    thread_id: str
    checkpoint_ns: str
    run_id: str
    step: int
    task_id: str
    name: str
    attempt: int
    started_at: float
    ended_at: float | None
    outcome: Outcome | None
    error_type: str | None
    error_message: str | None
    pid: int | None
    host: str | None
    worker: str | None

    def __init__(
        self,
        thread_id: str,
        checkpoint_ns: str,
        run_id: str,
        step: int,
        task_id: str,
        name: str,
        attempt: int,
        started_at: float,
        ended_at: float | None,
        outcome: Outcome | None,
        error_type: str | None = None,
        error_message: str | None = None,
        pid: int | None = None,
        host: str | None = None,
        worker: str | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "thread_id", thread_id)
        _set(self, "checkpoint_ns", checkpoint_ns)
        _set(self, "run_id", run_id)
        _set(self, "step", step)
        _set(self, "task_id", task_id)
        _set(self, "name", name)
        _set(self, "attempt", attempt)
        _set(self, "started_at", started_at)
        _set(self, "ended_at", ended_at)
        _set(self, "outcome", outcome)
        _set(self, "error_type", error_type)
        _set(self, "error_message", error_message)
        _set(self, "pid", pid)
        _set(self, "host", host)
        _set(self, "worker", worker)

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, None while unfinished."""
        return None if self.ended_at is None else self.ended_at - self.started_at


def error_fields(exc: BaseException) -> tuple[str, str]:
    """The type name and message an attempt record keeps of ``exc`` (the
    message cut at 2,000 characters; an exception whose ``str()`` fails still
    gets a record)."""
    try:
        message = str(exc)[:2000]
    except Exception:
        message = f"<{type(exc).__name__}: str() failed>"
    return type(exc).__name__, message


def attempt_order(record: AttemptRecord) -> tuple[float, str, int, str]:
    """The order timelines list attempts in: by start, then run, attempt, task."""
    return (record.started_at, record.run_id, record.attempt, record.task_id)


@lazy_dataclass(frozen=True, slots=True)
class RunTimeline:
    """One invoke, stream or resume of a thread: its attempts in start order."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("run_id", "started_at", "ended_at", "attempts")  # noqa: RUF023

    run_id: str
    started_at: float
    ended_at: float | None
    attempts: tuple[AttemptRecord, ...]

    def __init__(
        self,
        run_id: str,
        started_at: float,
        ended_at: float | None,
        attempts: tuple[AttemptRecord, ...],
    ) -> None:
        object.__setattr__(self, "run_id", run_id)
        object.__setattr__(self, "started_at", started_at)
        object.__setattr__(self, "ended_at", ended_at)
        object.__setattr__(self, "attempts", attempts)


@lazy_dataclass(frozen=True, slots=True)
class Timeline:
    """Every run of one thread, oldest first."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("thread_id", "runs")  # noqa: RUF023

    thread_id: str
    runs: tuple[RunTimeline, ...]

    def __init__(self, thread_id: str, runs: tuple[RunTimeline, ...]) -> None:
        object.__setattr__(self, "thread_id", thread_id)
        object.__setattr__(self, "runs", runs)


def group_attempts(thread_id: str, records: Iterable[AttemptRecord]) -> Timeline:
    """A thread's records as runs, oldest first. A run ends when its last
    attempt ended; one with an unfinished attempt (a killed process) has no
    end."""
    by_run: dict[str, list[AttemptRecord]] = {}
    for rec in sorted(records, key=attempt_order):
        by_run.setdefault(rec.run_id, []).append(rec)
    runs = []
    for run_id, attempts in by_run.items():
        ends = [a.ended_at for a in attempts]
        ended_at = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        runs.append(RunTimeline(run_id, attempts[0].started_at, ended_at, tuple(attempts)))
    runs.sort(key=lambda run: (run.started_at, run.run_id))
    return Timeline(thread_id, tuple(runs))


AttemptRow = tuple[Any, ...]
AttemptList = list[AttemptRecord]
"""What ``list_attempts`` returns (an alias: savers have a method named ``list``)."""


def attempt_row(rec: AttemptRecord) -> AttemptRow:
    """A record as the SQL savers store it: its fields in declaration order."""
    return (
        rec.thread_id,
        rec.checkpoint_ns,
        rec.run_id,
        rec.step,
        rec.task_id,
        rec.name,
        rec.attempt,
        rec.started_at,
        rec.ended_at,
        rec.outcome,
        rec.error_type,
        rec.error_message,
        rec.pid,
        rec.host,
        rec.worker,
    )


def attempt_from_row(row: AttemptRow) -> AttemptRecord:
    return AttemptRecord(*row)


ATTEMPT_COLUMNS = (
    "thread_id, checkpoint_ns, run_id, step, task_id, name, attempt, started_at, ended_at, "
    "outcome, error_type, error_message, pid, host, worker"
)
"""The columns of an attempt row (SQL savers), in ``AttemptRecord`` field order."""
_KEY = ("thread_id", "run_id", "checkpoint_ns", "task_id", "attempt")


ATTEMPT_KEY = tuple(ATTEMPT_COLUMNS.split(", ").index(name) for name in _KEY)
"""Where the key's columns are in an attempt row."""


def attempt_conflict() -> str:
    """How an attempt row meets one stored under its key: a finished record
    replaces the start record; a start record replaces nothing."""
    names = ATTEMPT_COLUMNS.split(", ")
    updates = ",\n    ".join(f"{n} = excluded.{n}" for n in names if n not in _KEY)
    return (
        f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET\n    {updates}\n"
        "WHERE excluded.outcome IS NOT NULL"
    )


def attempt_sql(mark: str) -> tuple[str, str, str]:
    """The upsert, the select of a thread's rows, and the copy to another
    thread (parameters: target, source) of the attempt table, with ``mark``
    as the parameter placeholder (``?`` or ``%s``). A finished record
    replaces the start record; a start record replaces nothing."""
    names = ATTEMPT_COLUMNS.split(", ")
    upsert = (
        f"INSERT INTO pregelkit_attempts ({ATTEMPT_COLUMNS})\n"
        f"VALUES ({', '.join([mark] * len(names))})\n" + attempt_conflict()
    )
    select = (
        f"SELECT {ATTEMPT_COLUMNS} FROM pregelkit_attempts WHERE thread_id = {mark}\n"
        "ORDER BY started_at, run_id, attempt, task_id"
    )
    copy = (
        f"INSERT INTO pregelkit_attempts ({ATTEMPT_COLUMNS})\n"
        f"SELECT {mark}, {', '.join(names[1:])}\n"
        f"FROM pregelkit_attempts WHERE thread_id = {mark}\n"
        "ON CONFLICT DO NOTHING"
    )
    return upsert, select, copy
