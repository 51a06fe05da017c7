"""A ``Timeline`` as plain data: the ``pregelkit timeline --json`` schema,
which the HTML page embeds too, and the few facts every view shows alike
(what to call an attempt without an outcome, where a run's drawing ends).

The schema (``version`` 1); times are seconds since the epoch (UTC),
durations seconds, ``null`` where unknown::

    {"version": 1, "thread_id": str, "running": bool, "generated_at": float,
     "runs": [{"run_id": str, "started_at": float, "ended_at": float|null,
               "duration": float|null,
               "attempts": [{"task_id": str, "name": str, "checkpoint_ns": str,
                             "step": int, "attempt": int, "started_at": float,
                             "ended_at": float|null, "duration": float|null,
                             "outcome": "ok"|"error"|"interrupted"|"cached"|
                                        "replayed"|"timeout"|"cancelled"|null,
                             "error_type": str|null, "error_message": str|null,
                             "pid": int|null, "host": str|null,
                             "worker": str|null}]}]}

``running`` says a run holds the thread right now: its attempts without an
outcome are still going. Otherwise they are unfinished for good (their
process died). New keys may be added; existing ones keep their meaning.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint.attempts import AttemptRecord
    from pregelkit.observe.timeline import RunTimeline, Timeline

SCHEMA_VERSION = 1
OUTCOMES = ("ok", "error", "interrupted", "cached", "replayed", "timeout", "cancelled")
RUNNING = "running"
UNFINISHED = "unfinished"


def timeline_data(timeline: Timeline, *, running: bool, now: float) -> dict[str, Any]:
    """The ``--json`` document for ``timeline``."""
    return {
        "version": SCHEMA_VERSION,
        "thread_id": timeline.thread_id,
        "running": running,
        "generated_at": now,
        "runs": [
            {
                "run_id": run.run_id,
                "started_at": run.started_at,
                "ended_at": run.ended_at,
                "duration": None if run.ended_at is None else run.ended_at - run.started_at,
                "attempts": [_attempt_data(a) for a in run.attempts],
            }
            for run in timeline.runs
        ],
    }


def _attempt_data(a: AttemptRecord) -> dict[str, Any]:
    return {
        "task_id": a.task_id,
        "name": a.name,
        "checkpoint_ns": a.checkpoint_ns,
        "step": a.step,
        "attempt": a.attempt,
        "started_at": a.started_at,
        "ended_at": a.ended_at,
        "duration": a.duration,
        "outcome": a.outcome,
        "error_type": a.error_type,
        "error_message": a.error_message,
        "pid": a.pid,
        "host": a.host,
        "worker": a.worker,
    }


def size(timeline: Timeline) -> str:
    """``2 runs, 13 attempts``."""
    runs = len(timeline.runs)
    attempts = sum(len(r.attempts) for r in timeline.runs)
    return f"{runs} run{'' if runs == 1 else 's'}, {attempts} attempt{'' if attempts == 1 else 's'}"


def attempt_number(a: AttemptRecord) -> str:
    """The attempt's number, ``-`` for a result that came from the cache or
    the checkpoint (recorded as attempt 0: nothing ran)."""
    return str(a.attempt) if a.attempt > 0 else "-"


def status_of(a: AttemptRecord, *, live: bool) -> str:
    """The attempt's outcome, or ``running`` / ``unfinished`` without one
    (``live``: its run holds the thread now)."""
    if a.outcome is not None:
        return a.outcome
    return RUNNING if live else UNFINISHED


def drawn_end(run: RunTimeline, *, live: bool, now: float) -> float:
    """Where a run's drawing ends: its end; for the live run, now; for a run
    whose process died, the last moment anything of it was recorded (an
    unfinished attempt is drawn up to there)."""
    if run.ended_at is not None:
        return run.ended_at
    if live:
        return max(now, run.started_at)
    moments = [run.started_at]
    for a in run.attempts:
        moments.append(a.started_at)
        if a.ended_at is not None:
            moments.append(a.ended_at)
    return max(moments)


def counts(run: RunTimeline, *, live: bool) -> dict[str, int]:
    """How many attempts ended each way (statuses in a fixed order), and how
    many were retries (attempt number above 1)."""
    found: dict[str, int] = {}
    for a in run.attempts:
        status = status_of(a, live=live)
        found[status] = found.get(status, 0) + 1
    order = [*OUTCOMES, RUNNING, UNFINISHED]
    result = {k: found[k] for k in order if k in found}
    retries = sum(1 for a in run.attempts if a.attempt > 1)
    if retries:
        result["retries"] = retries
    return result


def summary(run: RunTimeline, *, live: bool) -> str:
    """``3 ok, 1 error, 1 retry``: the run's attempts at a glance."""
    parts = []
    for key, n in counts(run, live=live).items():
        label = ("retry" if n == 1 else "retries") if key == "retries" else key
        parts.append(f"{n} {label}")
    return ", ".join(parts) or "no attempts"


def run_title(run: RunTimeline, index: int, count: int, *, live: bool, now: float) -> str:
    """``run 2/3 (ID), started 2026-11-25 18:00:00, ran 1.2s: 3 ok, 1 retry``."""
    end = drawn_end(run, live=live, now=now)
    started = datetime.fromtimestamp(run.started_at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    span = seconds(end - run.started_at)
    if live:
        took = f"running for {span}"
    elif run.ended_at is not None:
        took = f"ran {span}"
    else:  # when its process died is not known: only what it last recorded
        took = f"never finished (last record at {span})"
    return (
        f"run {index}/{count} ({run.run_id}), started {started}, {took}: {summary(run, live=live)}"
    )


def seconds(value: float | None) -> str:
    """A duration for people: ``950ms``, ``12.3s``, ``4m05s``, ``2h03m``."""
    if value is None:
        return "-"
    if 0 < value < 0.01:
        return f"{value * 1000:.1f}ms"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"
