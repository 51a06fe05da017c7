"""The loop's side of attempt records and tracing hooks.

Records reach the saver with the loop's own saver calls: a task's end record
with its writes (same call, one transaction), anything else buffered with the
next call. An attempt's start asks for a save at once (``flush_attempts``):
with ``durability="sync"`` before the body runs, with ``"async"`` on the
saver lane (one queued save takes every record buffered when it runs), with
``"exit"`` at exit, like everything else that run saves.

``LoopAttempts`` is a base of ``PregelLoop``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pregelkit._internal._ids import uuid6
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.errors import GraphInterrupt
from pregelkit.pregel._attempts import (
    AttemptEvents,
    AttemptHooks,
    AttemptLog,
    has_hooks,
    run_hooks,
)
from pregelkit.pregel._scope import RunContext, TaskScope

__all__ = ["LoopAttempts"]


class LoopAttempts:
    """Attempt records and tracing hooks of one run."""

    checkpointer: BaseCheckpointSaver[Any] | None
    durability: str
    step: int
    run: RunContext

    def _init_attempts(self, parent: TaskScope | None, thread_id: Any, ns: str) -> None:
        self.attempt_log: AttemptLog | None = None
        self.hooks: AttemptHooks | None = None
        self._flush_queued = False
        saver = self.checkpointer
        records = saver is not None and thread_id is not None and saver.records_attempts
        if not records and not has_hooks():
            return
        run_id = parent.run.run_id if parent is not None else None
        self.run.run_id = run_id = run_id or uuid6()
        if records:
            self.attempt_log = AttemptLog(str(thread_id), ns, run_id)
        self.hooks = run_hooks(str(thread_id or ""), run_id, parent is not None)

    def attempt_events(self) -> AttemptEvents | None:
        """What the runner tells of attempts, or None when nobody listens."""
        if self.attempt_log is None and self.hooks is None:
            return None
        return AttemptEvents(self.attempt_log, self.flush_attempts, self.hooks, self._step)

    def _step(self) -> int:
        return self.step

    def flush_attempts(self) -> Any:
        """Save the buffered records now (an attempt starts: a process killed
        while its body runs must leave the start behind)."""
        log = self.attempt_log
        if log is None or self.durability == "exit" or not log.buffer:
            return None
        saver = self.checkpointer
        assert saver is not None
        if self.durability == "sync":
            return self._persist(saver.put_attempts, saver.aput_attempts, log.thread_id, log.take())
        if not self._flush_queued:
            self._flush_queued = True
            self._background(self._put_buffered, self._aput_buffered)
        return None

    def _put_buffered(self) -> None:
        self._flush_queued = False
        log = self.attempt_log
        assert log is not None and self.checkpointer is not None
        if records := log.take():
            self.checkpointer.put_attempts(log.thread_id, records)

    async def _aput_buffered(self) -> None:
        self._flush_queued = False
        log = self.attempt_log
        assert log is not None and self.checkpointer is not None
        if records := log.take():
            await self.checkpointer.aput_attempts(log.thread_id, records)

    def _save_buffered(self) -> None:
        """Save what is buffered along the loop's other saves (a step ends)."""
        log = self.attempt_log
        if log is None or not log.buffer:
            return
        saver = self.checkpointer
        assert saver is not None
        self._persist(saver.put_attempts, saver.aput_attempts, log.thread_id, log.take())

    def _attempts_at_exit(self, exc: BaseException | None) -> None:
        """The run ends: attempts still open had no result (cancelled, or cut
        short by the stop); save what is left, and end the run's span."""
        log = self.attempt_log
        if log is not None:
            for task_id in list(log.open):
                log.end(task_id, "cancelled")
            self._save_buffered()
        hooks = self.hooks
        if hooks is not None:
            if isinstance(exc, GraphInterrupt) and exc.interrupts:
                hooks.interrupted(exc.interrupts)
            hooks.run_ended(exc)

    # how a saver call is made: the loop decides
    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _background(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> None:
        raise NotImplementedError
