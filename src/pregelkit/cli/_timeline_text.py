"""``pregelkit timeline THREAD``: a thread's attempts as a Gantt chart in the
terminal, one row and one bar per attempt, each run its own section drawn
to its own scale (runs of one thread may be days apart).

Outcomes show in words and, on a colour terminal, in colour; the bar's
shape tells apart what colour alone would: a solid bar finished, a light
one had no end (still running, or its process died), a diamond took no
time (a cache hit, or a result replayed from the checkpoint)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TextIO

from pregelkit.cli._render import clean
from pregelkit.cli._timeline_data import (
    RUNNING,
    UNFINISHED,
    attempt_number,
    drawn_end,
    run_title,
    seconds,
    size,
    status_of,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pregelkit.checkpoint.attempts import AttemptRecord
    from pregelkit.observe.timeline import Timeline

_COLORS = {
    "ok": "32",
    "error": "31;1",
    "interrupted": "33",
    "cached": "36",
    "replayed": "34",
    "timeout": "35;1",
    "cancelled": "90",
    RUNNING: "37;1",
    UNFINISHED: "33;1",
}
_SOLID, _OPEN, _INSTANT = "█", "░", "◆"
_MIN_BAR = 10
_NAME_MAX = 28


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(
    timeline: Timeline, out: TextIO, *, color: bool, width: int, running: bool, now: float
) -> None:
    """Draw ``timeline`` on ``out``, ``width`` columns wide; ``running``: its
    last run holds the thread now (attempts without an outcome still go)."""
    paint = _painter(color)
    runs = timeline.runs
    total = sum(len(r.attempts) for r in runs)
    out.write(f"thread {clean(timeline.thread_id)}: {size(timeline)}\n")
    if not total:
        out.write("no attempts recorded\n")
        return
    names = [clean(a.name) for r in runs for a in r.attempts]
    name_w = min(_NAME_MAX, max(4, *(len(n) for n in names)))
    status_w = len(UNFINISHED) + 2
    fixed = 6 + 2 + name_w + 2 + 3 + 2 + status_w + 2 + 7 + 2 + 2
    bar_w = max(_MIN_BAR, width - fixed)
    for i, run in enumerate(runs, 1):
        live = running and i == len(runs)
        end = drawn_end(run, live=live, now=now)
        out.write("\n")
        out.write(f"── {clean(run_title(run, i, len(runs), live=live, now=now))}\n")
        head = (
            f"{'STEP':>6}  {'TASK':<{name_w}}  {'TRY':>3}  {'OUTCOME':<{status_w}}  {'TIME':>7}  "
        )
        axis = "0s".ljust(bar_w - 8) + seconds(end - run.started_at).rjust(8)
        out.write(head + " " + axis + "\n")
        for a in run.attempts:
            status = status_of(a, live=live)
            retry = "↻" if a.attempt > 1 else " "
            bar = _bar(a, run.started_at, end, bar_w)
            name = _fit(clean(a.name), name_w)
            line = (
                f"{a.step:>6}  {name:<{name_w}}  {attempt_number(a):>2}{retry}  "
                f"{paint(status, status.ljust(status_w))}  {seconds(a.duration):>7}  "
                f"│{paint(status, bar)}│"
            )
            out.write(line + "\n")
            if a.error_type or a.error_message:
                error = clean(f"{a.error_type or 'error'}: {a.error_message or ''}")
                out.write(" " * 8 + _fit(f"↳ {error}", max(20, width - 8)) + "\n")


def _bar(a: AttemptRecord, start: float, end: float, width: int) -> str:
    """The attempt's bar in a field of ``width`` cells spanning start..end."""
    span = end - start
    if span <= 0:
        return (_INSTANT if a.ended_at is not None else _OPEN).ljust(width)

    def cell(t: float) -> float:
        return (min(max(t, start), end) - start) / span * width

    first = min(width - 1, math.floor(cell(a.started_at)))
    if a.ended_at is None:
        return " " * first + _OPEN * (width - first)
    last = max(first + 1, min(width, math.ceil(cell(a.ended_at))))
    if a.ended_at - a.started_at < span / width / 2:
        return " " * first + _INSTANT + " " * (width - first - 1)
    return " " * first + _SOLID * (last - first) + " " * (width - last)


def _painter(color: bool) -> Callable[[str, str], str]:
    def plain(status: str, text: str) -> str:
        return text

    def paint(status: str, text: str) -> str:
        code = _COLORS.get(status)
        return f"\033[{code}m{text}\033[0m" if code else text

    return paint if color else plain
