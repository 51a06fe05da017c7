"""Timelines built by hand for the timeline views' tests: every outcome, a
retry, a cache hit, a resume that replays, an attempt whose process died,
and hostile text where users put text (names, error messages)."""

from __future__ import annotations

from pregelkit.checkpoint.attempts import AttemptRecord, Outcome
from pregelkit.observe.timeline import RunTimeline, Timeline

HOSTILE_NAME = "<script>window.__pwned = 1</script>"
HOSTILE_ERROR = 'bad "quote" & \'apostrophe\' <img src=x onerror="window.__pwned = 2"> end'


def attempt(
    name: str,
    start: float,
    end: float | None,
    outcome: Outcome | None,
    *,
    run: str,
    step: int = 1,
    number: int = 1,
    task_id: str | None = None,
    error: tuple[str, str] | None = None,
) -> AttemptRecord:
    return AttemptRecord(
        thread_id="t-1",
        checkpoint_ns="",
        run_id=run,
        step=step,
        task_id=task_id or f"id-{name}-{step}",
        name=name,
        attempt=number,
        started_at=start,
        ended_at=end,
        outcome=outcome,
        error_type=error[0] if error else None,
        error_message=error[1] if error else None,
        pid=4242,
        host="box",
        worker=None,
    )


def sample_timeline() -> Timeline:
    """Two runs: the first ran everything once (a retry, a cache hit, a
    timeout, a hostile task) and stopped at an interrupt; the resume,
    a day later, replayed a task and was killed mid-task."""
    t = 1_800_000_000.0
    first = (
        attempt("report", t, t + 3.0, "interrupted", run="r1", step=0),
        attempt("fetch", t + 0.1, t + 0.4, "error", run="r1", error=("KeyError", "'missing'")),
        attempt("fetch", t + 0.9, t + 1.2, "ok", run="r1", number=2),
        attempt("cached_square", t + 1.3, t + 1.3, "cached", run="r1", number=0),
        attempt("slow", t + 1.4, t + 2.4, "timeout", run="r1", error=("NodeTimeoutError", "1s")),
        attempt(
            HOSTILE_NAME, t + 2.5, t + 2.6, "error", run="r1", error=("ValueError", HOSTILE_ERROR)
        ),
        attempt("stop_me", t + 2.6, t + 2.8, "cancelled", run="r1"),
    )
    later = t + 86_400.0
    second = (
        attempt("fetch", later, later, "replayed", run="r2", number=0),
        attempt("report", later + 0.05, None, None, run="r2", step=0),
        attempt("fetch_more", later + 0.1, later + 0.6, "ok", run="r2"),
    )
    return Timeline(
        thread_id="t-1",
        runs=(
            RunTimeline(run_id="r1", started_at=t, ended_at=t + 3.0, attempts=first),
            RunTimeline(run_id="r2", started_at=later, ended_at=None, attempts=second),
        ),
    )


ATTEMPTS = sum(len(r.attempts) for r in sample_timeline().runs)


def guide_timeline() -> Timeline:
    """What the guide's screenshot shows: a report that fetched three pages
    (one retried), summarised them from the cache, stopped at an interrupt
    for review and, resumed, replayed its fetches and published."""
    t = 1_800_000_000.0
    first = (
        attempt("report", t, t + 2.9, "interrupted", run="9f1c2e", step=0),
        attempt("fetch_page", t + 0.05, t + 0.9, "ok", run="9f1c2e", task_id="a"),
        attempt("fetch_page", t + 0.05, t + 0.6, "ok", run="9f1c2e", task_id="b"),
        attempt(
            "fetch_page",
            t + 0.05,
            t + 0.4,
            "error",
            run="9f1c2e",
            task_id="c",
            error=("ConnectionError", "server closed the connection"),
        ),
        attempt("fetch_page", t + 0.9, t + 1.7, "ok", run="9f1c2e", task_id="c", number=2),
        attempt("summarize", t + 1.75, t + 1.75, "cached", run="9f1c2e", number=0),
        attempt("check_links", t + 1.8, t + 2.85, "ok", run="9f1c2e"),
    )
    later = t + 3600.0
    second = (
        attempt("report", later, later + 1.6, "ok", run="4b7d01", step=0),
        attempt(
            "fetch_page",
            later + 0.01,
            later + 0.01,
            "replayed",
            run="4b7d01",
            number=0,
            task_id="a",
        ),
        attempt(
            "fetch_page",
            later + 0.01,
            later + 0.01,
            "replayed",
            run="4b7d01",
            number=0,
            task_id="b",
        ),
        attempt(
            "fetch_page",
            later + 0.01,
            later + 0.01,
            "replayed",
            run="4b7d01",
            number=0,
            task_id="c",
        ),
        attempt("summarize", later + 0.02, later + 0.02, "replayed", run="4b7d01", number=0),
        attempt("publish", later + 0.1, later + 1.55, "ok", run="4b7d01"),
    )
    return Timeline(
        thread_id="weekly-report",
        runs=(
            RunTimeline(run_id="9f1c2e", started_at=t, ended_at=t + 2.9, attempts=first),
            RunTimeline(run_id="4b7d01", started_at=later, ended_at=later + 1.6, attempts=second),
        ),
    )
