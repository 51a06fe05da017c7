"""A replay check's run (``pregelkit.testing.replay_check``): replays only.

A check replays a recorded thread against new code to see whether a real
resume would raise ``NondeterminismError``. Every call whose result is
recorded is replayed as on a real resume (so every identity is checked);
the first call the run would have to *run* is the frontier of the recorded
run, and the check stops there: no task body runs and nothing waits.

The one exception is a call the recorded run started and left unfinished
after it made calls of its own: its body is code that orders recorded calls
(like an entrypoint's), so it runs to have them checked, up to its own
frontier.

The mode is decided once per run, when its step rules are built: a run
that is not a check pays nothing per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import ERROR

if TYPE_CHECKING:
    from pregelkit.pregel._core.calls import TaskCalls
    from pregelkit.pregel._exec.runner import ScheduleTask
    from pregelkit.pregel._graph.call import Call
    from pregelkit.pregel._plan.replay import ReplayProbe
    from pregelkit.types import PregelExecutableTask

__all__ = ["replays_only"]


def replays_only(accept: ScheduleTask, calls: TaskCalls, probe: ReplayProbe) -> ScheduleTask:
    """``accept`` (a loop's ``accept_push``) for a check: a call that would
    run gets a future failed with ``ReplayFrontier`` instead of a task, so
    its caller stops where it waits for it, after making the calls it makes
    before that wait (each checked against its record)."""

    def accept_replays(
        parent: PregelExecutableTask, idx: int, call: Call
    ) -> PregelExecutableTask | list[tuple[str, Any]] | None:
        pushed = accept(parent, idx, call)
        if pushed is None or isinstance(pushed, list) or pushed.writes:
            return pushed  # a replay (or a cache hit): nothing runs
        if calls.records.records and calls.recorded(pushed, 0)[1] is not None:
            return pushed  # it made recorded calls before the run stopped: check them
        calls.tasks.pop(pushed.id, None)
        return [(ERROR, probe.reach(f"call #{idx} of {parent.name!r}: {call.name!r}"))]

    return accept_replays
