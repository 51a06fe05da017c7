"""``LoopPort``: the loop of a run as its runner sees it.

The runner saves each task's writes, replays and caches task calls, and
reports aborted tasks through the loop that plans the steps; the loop's
driver builds the runner. This protocol is the boundary between the two: the
runner never imports the loop, and takes everything it calls back into from
the port when it is built, so nothing is wired into it afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pregelkit.pregel._exec.recorder import AttemptRecorder
    from pregelkit.pregel._exec.stop import RunStop
    from pregelkit.types import PregelExecutableTask

__all__ = ["LoopPort"]


class LoopPort(Protocol):
    """What a ``PregelRunner`` needs from the loop of its run."""

    @property
    def checkpointer(self) -> object | None:
        """The run's saver: calls are recorded (and replayed) only with one."""

    @property
    def cache(self) -> object | None:
        """The run's cache: an async run reads it for a call off the event loop."""

    @property
    def run_stop(self) -> RunStop:
        """The run's stop, told of a task ended by Ctrl-C or cancellation."""

    @property
    def submit(self) -> Callable[..., Any]:
        """Start work on the run's executor; returns its future."""

    def put_writes(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> Any:
        """Record a task's writes; None, or something to await (an async save)."""

    def check_saved(self) -> None:
        """Raise the run's storage failure, if a save has failed."""

    def remember_call(self, task_id: str, writes: list[tuple[str, Any]]) -> None:
        """Keep a finished call's writes for a later attempt of its caller."""

    def recorded_call(self, parent: PregelExecutableTask, idx: int) -> tuple[str, str | None]:
        """The id of a call position and the identity recorded there."""

    def ended_calls(self, parent: PregelExecutableTask, calls: int) -> None:
        """``parent`` returned after ``calls`` calls: raise ``NondeterminismError``
        if the run it resumes recorded more."""

    def alookup_call(self, pushed: PregelExecutableTask) -> Awaitable[bool]:
        """Read the cache for a call; whether it was a hit."""

    def attempt_recorder(self) -> AttemptRecorder | None:
        """Where attempts are told, or None when nobody listens."""
