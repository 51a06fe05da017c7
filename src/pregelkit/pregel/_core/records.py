"""The run core's side of attempt records and tracing hooks.

Records reach the saver with the run's own saves: a task's end record with
its writes (same call, one transaction), anything else buffered with the
next save. An attempt still running ``START_SAVE_DELAY`` (2 ms) after it
started has its start saved on the run's lane (``SaveStarts``), put there
by the performer's start saver thread: a process killed while a body runs
leaves that start behind, and a quick task (most of them) costs no save
beyond its result's. With ``durability="exit"`` records are saved at exit,
like everything else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pregelkit._internal._ids import uuid6
from pregelkit.checkpoint.attempts import AttemptRow, Outcome
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.errors import GraphInterrupt, NondeterminismError
from pregelkit.pregel._core.effects import SaveAttempts, SaveStarts, Wait
from pregelkit.pregel._exec.hooks import AttemptHooks, run_hooks
from pregelkit.pregel._exec.recorder import START_SAVE_DELAY, AttemptLog, AttemptRecorder, _Run
from pregelkit.pregel._graph.scope import RunContext, TaskScope
from pregelkit.types import PregelExecutableTask

__all__ = ["AttemptRecords"]


class AttemptRecords:
    """Attempt records and tracing hooks of one run."""

    __slots__ = ("_closed", "_lock", "_queued", "_watched", "hooks", "log", "starts")

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any] | None,
        thread_id: str | None,
        ns: str,
        parent: TaskScope | None,
        run: RunContext,
        starts: bool,
    ) -> None:
        self.log: AttemptLog | None = None
        self.starts = starts
        """Starts are saved as they go stale (not with ``durability="exit"``)."""
        self._watched = False
        self._queued = False
        self._closed = False
        self._lock = threading.Lock()
        records = saver is not None and thread_id is not None and saver.records_attempts
        self.hooks: AttemptHooks | None = run_hooks(thread_id or "", parent is not None)
        if not records and self.hooks is None:
            return
        run_id = parent.run.run_id if parent is not None else None
        run.run_id = run_id = run_id or uuid6()
        if records:
            self.log = AttemptLog(str(thread_id), ns, run_id)
        if self.hooks is not None:
            self.hooks.run_started(run_id)

    def events(self, run: _Run) -> AttemptRecorder | None:
        """What the runner tells of attempts, or None when nobody listens."""
        if self.log is None and self.hooks is None:
            return None
        return AttemptRecorder(
            self.log, run, self.hooks, lambda task, outcome: self.instant(task, run.step, outcome)
        )

    def watch(self) -> bool:
        """Whether the start saver should look at this run from now on (once)."""
        if self.log is None or self._watched or not self.starts:
            return False
        self._watched = True
        return True

    def instant(self, task: PregelExecutableTask, step: int, outcome: Outcome) -> None:
        """A task's result came without running it (``cached``, ``replayed``)."""
        if self.log is not None:
            self.log.instant(task.id, task.name, step, outcome)
        if self.hooks is not None:
            self.hooks.attempt_skipped(task, step, outcome)

    def stale(self, before: float, perform: Callable[[SaveStarts], object]) -> None:
        """Have the buffered records saved if an attempt started before
        ``before`` is still running unsaved (asked by the start saver's
        thread); one at a time. ``perform`` puts the save on the run's lane
        under the lock ``close`` takes, so a run exiting meanwhile waits for
        it: handed over after the exit, the save would reach a lane already
        waited for, or an async run's event loop already closed (the start
        saver's thread died of that, and no later run saved a start)."""
        log = self.log
        if log is None or not log.stale(before):
            return
        with self._lock:
            if self._closed or self._queued:
                return
            self._queued = True
            perform(SaveStarts(self, "async"))

    def take_starts(self) -> tuple[str, list[AttemptRow]]:
        """The starts to save now (``SaveStarts`` is being made)."""
        self._queued = False
        log = self.log
        assert log is not None
        return log.thread_id, log.take_starts(time.time() - START_SAVE_DELAY)

    def buffered(self, wait: Wait) -> SaveAttempts | None:
        """The save of what is buffered, along the run's other saves."""
        log = self.log
        if log is None or not (rows := log.take()):
            return None
        return SaveAttempts(log.thread_id, rows, wait)

    def close(self) -> bool:
        """No start is saved on its own from now on (the run is exiting);
        whether the start saver watched this run."""
        with self._lock:
            self._closed = True
        return self._watched

    def at_exit(self, exc: BaseException | None, wait: Wait) -> SaveAttempts | None:
        """The run ends: attempts still open saved no result. A replay
        mismatch ended them (``error``; the records are saved, the run's
        writes are not); otherwise they were cancelled or cut short by a
        stop. Returns the save of what is left, and ends the run's span."""
        log = self.log
        save = None
        if log is not None:
            mismatch = isinstance(exc, NondeterminismError)
            for task_id in list(log.open):
                log.end(task_id, "error" if mismatch else "cancelled", exc if mismatch else None)
            save = self.buffered(wait)
        hooks = self.hooks
        if hooks is not None:
            if isinstance(exc, GraphInterrupt) and exc.interrupts:
                hooks.interrupted(exc.interrupts)
            hooks.run_ended(exc)
        return save
