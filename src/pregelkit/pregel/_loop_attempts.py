"""The loop's side of attempt records and tracing hooks.

Records reach the saver with the loop's own saver calls: a task's end record
with its writes (same call, one transaction), anything else buffered with the
next call. An attempt still running ``START_SAVE_DELAY`` (2 ms) after it
started has its start saved on the loop's saver lane (joining the calls
queued there: one transaction), put there by one process-wide thread
(``_StartSaver``) that looks at the running loops every ``START_SAVE_DELAY``:
a process killed while a body runs leaves that start behind, and a quick task
(most of them) costs no save beyond its result's. Saving each start before
its body would close the last few ms, at one more commit per task call.
With ``durability="exit"`` records are saved at exit, like everything else.

``LoopAttempts`` is a base of ``PregelLoop``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from pregelkit._internal._ids import uuid6
from pregelkit.checkpoint.attempts import Outcome
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.errors import GraphInterrupt, NondeterminismError
from pregelkit.pregel._attempts import START_SAVE_DELAY, AttemptEvents, AttemptLog
from pregelkit.pregel._hooks import AttemptHooks, run_hooks
from pregelkit.pregel._scope import RunContext, TaskScope
from pregelkit.types import PregelExecutableTask

__all__ = ["LoopAttempts"]


class _StartSaver:
    """One daemon thread per process, awake while runs record attempts and
    for ``PARK_AFTER`` looks after the last one ended (so runs one after
    another do not wake it each time: a run's ``watch`` is a dictionary
    store and a flag test)."""

    PARK_AFTER = 100

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loops: dict[int, LoopAttempts] = {}
        self.awake = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def watch(self, loop: LoopAttempts) -> None:
        self.loops[id(loop)] = loop
        if not self.awake.is_set():
            with self.lock:
                if self.thread is None:
                    self.thread = threading.Thread(
                        target=self._run, name="pregelkit-attempt-starts", daemon=True
                    )
                    self.thread.start()
            self.awake.set()

    def forget(self, loop: LoopAttempts) -> None:
        self.loops.pop(id(loop), None)

    def _run(self) -> None:
        idle = 0
        while True:
            if not self.loops:
                idle += 1
                if idle >= self.PARK_AFTER:
                    idle = 0
                    self.awake.clear()
                    if not self.loops:  # a watch between the test and the clear sets it again
                        self.awake.wait()
                    continue
            else:
                idle = 0
            time.sleep(START_SAVE_DELAY)
            before = time.time() - START_SAVE_DELAY
            for loop in list(self.loops.values()):
                loop._save_stale(before)


_START_SAVER = _StartSaver()
# a forked child has no such thread: its first run starts its own
os.register_at_fork(after_in_child=_START_SAVER.reset)


class LoopAttempts:
    """Attempt records and tracing hooks of one run."""

    checkpointer: BaseCheckpointSaver[Any] | None
    durability: str
    step: int
    run: RunContext

    def _init_attempts(self, parent: TaskScope | None, thread_id: Any, ns: str) -> None:
        self.attempt_log: AttemptLog | None = None
        self.hooks: AttemptHooks | None = None
        self.watched = False
        self._save_queued = False
        self._attempts_closed = False
        self._attempts_lock = threading.Lock()
        saver = self.checkpointer
        records = saver is not None and thread_id is not None and saver.records_attempts
        self.hooks = hooks = run_hooks(str(thread_id or ""), parent is not None)
        if not records and hooks is None:
            return
        run_id = parent.run.run_id if parent is not None else None
        self.run.run_id = run_id = run_id or uuid6()
        if records:
            self.attempt_log = AttemptLog(str(thread_id), ns, run_id)
        if hooks is not None:
            hooks.run_started(run_id)

    def attempt_events(self) -> AttemptEvents | None:
        """What the runner tells of attempts, or None when nobody listens."""
        if self.attempt_log is None and self.hooks is None:
            return None
        if self.attempt_log is not None and not self.watched and self.durability != "exit":
            self.watched = True  # have the start saver look at this run
            _START_SAVER.watch(self)
        return AttemptEvents(self.attempt_log, self, self.hooks, self._attempt_instant)

    def _attempt_instant(self, task: PregelExecutableTask, outcome: Outcome) -> None:
        """A task's result came without running it (``cached``, ``replayed``)."""
        if self.attempt_log is not None:
            self.attempt_log.instant(task, self.step, outcome)
        if self.hooks is not None:
            self.hooks.attempt_skipped(task, self.step, outcome)

    def _save_stale(self, before: float) -> None:
        """Save the buffered records if an attempt started before ``before``
        is still running unsaved (called by the start saver's thread)."""
        log = self.attempt_log
        if log is None or not log.stale(before):
            return
        with self._attempts_lock:
            if self._attempts_closed or self._save_queued:
                return
            self._save_queued = True
            self._background(self._put_buffered, self._aput_buffered)

    def _put_buffered(self) -> None:
        self._save_queued = False
        log = self.attempt_log
        assert log is not None and self.checkpointer is not None
        if records := log.take_starts(time.time() - START_SAVE_DELAY):
            self.checkpointer.put_attempts(log.thread_id, records)

    async def _aput_buffered(self) -> None:
        self._save_queued = False
        log = self.attempt_log
        assert log is not None and self.checkpointer is not None
        if records := log.take_starts(time.time() - START_SAVE_DELAY):
            await self.checkpointer.aput_attempts(log.thread_id, records)

    def _save_buffered(self) -> None:
        """Save what is buffered along the loop's other saves (a step ends)."""
        log = self.attempt_log
        if log is None or not (rows := log.take()):
            return
        saver = self.checkpointer
        assert saver is not None
        self._persist(saver.put_attempts, saver.aput_attempts, log.thread_id, rows)

    def _close_attempts(self) -> None:
        """No start is saved on its own from now on (the run is exiting)."""
        if self.watched:
            _START_SAVER.forget(self)
        with self._attempts_lock:
            self._attempts_closed = True

    def _attempts_at_exit(self, exc: BaseException | None) -> None:
        """The run ends: attempts still open saved no result. A replay
        mismatch ended them (``error``; the records are saved, the run's
        writes are not); otherwise they were cancelled or cut short by a
        stop. Save what is left, and end the run's span."""
        log = self.attempt_log
        if log is not None:
            mismatch = isinstance(exc, NondeterminismError)
            for task_id in list(log.open):
                log.end(task_id, "error" if mismatch else "cancelled", exc if mismatch else None)
            self._save_buffered()
        hooks = self.hooks
        if hooks is not None:
            if isinstance(exc, GraphInterrupt) and exc.interrupts:
                hooks.interrupted(exc.interrupts)
            hooks.run_ended(exc)

    # how a saver call is made: the loop decides
    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _background(
        self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any, apart: bool = False
    ) -> None:
        raise NotImplementedError
