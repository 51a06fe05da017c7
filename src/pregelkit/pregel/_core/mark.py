"""The run core's side of run control (``pregel/_exec/stop.py``): the thread's mark.

A root run with a saver that keeps marks reads its thread's mark when it
starts (a cancelled thread does not run; a drained one runs and its mark is
cleared), has it polled while it runs (not a worker's run: its worker
watches the marks of all its runs in one query, and cancels the run through
its ``RunControl``) and leaves ``"drained"`` behind when a drain stopped
it. ``ThreadMark`` makes these decisions and returns the effects they
need; the performer reads and polls (``WATCHER`` or, async, its event
loop's ``awatch``). Nested runs share the stop of the run they are part of
and poll nothing.
"""

from __future__ import annotations

from typing import Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_LEASE, CONFIG_KEY_THREAD_ID
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.base._open import Gate
from pregelkit.errors import RunCancelledError, ThreadBusyError, ThreadStateError
from pregelkit.pregel._core.effects import OpenThread, SetMark, Wait
from pregelkit.pregel._exec.stop import CANCELLED, DRAINED, RunStop, StopRequested

__all__ = ["ThreadMark"]


class ThreadMark:
    """The run-control mark of one run's thread, and the run's stop."""

    __slots__ = ("controlled", "leased", "locks", "stop", "thread_id", "waits", "was_drained")

    def __init__(
        self,
        stop: RunStop,
        config: dict[str, Any],
        saver: BaseCheckpointSaver[Any] | None,
        nested: bool,
    ) -> None:
        conf = config[CONF]
        self.stop = stop
        self.thread_id = str(conf.get(CONFIG_KEY_THREAD_ID))
        self.leased = CONFIG_KEY_LEASE in conf
        """A worker runs this run of a queued run (it holds the lease)."""
        self.controlled = saver is not None and not nested and saver.has_thread_control
        self.locks = saver is not None and not nested and not self.leased
        """A root run holds its saver's lock on its thread; not when a worker's
        lease holds the thread: the lease's fence then refuses a stale
        holder's writes, which a lock held by a paused process could not
        hand over."""
        self.waits = bool(conf.get("wait_for_thread", False))
        """Taking the lock waits for another run of the thread to free it."""
        self.was_drained = False

    @property
    def polled(self) -> bool:
        """Whether the mark is polled while the run runs: a worker's run is
        watched by its worker instead (``worker._core``)."""
        return not self.leased

    def opening(self, config: dict[str, Any]) -> OpenThread:
        """What a run with a saver does first: its lock (a root run's), its
        gate (a controlled run's) and the checkpoint ``config`` names."""
        gate: Gate = None
        if self.controlled:
            gate = "mark" if self.leased else "gate"
        return OpenThread(self.thread_id, config, self.locks, self.waits, gate)

    def opened(self, mark: str | None, queued: str | None, resuming: bool = False) -> None:
        """At the start of a run: a cancelled thread does not run (until
        ``uncancel``); a drained one does, its mark cleared once the input is
        accepted. A run started here while a queued run of the thread waits
        for or has a worker would race it: refused, as while its run sleeps
        or waits in the queue (a worker takes no thread lock to resume it)."""
        if mark == CANCELLED:
            raise RunCancelledError(self.thread_id, starting=True)
        if queued == "running":
            raise ThreadBusyError(
                self.thread_id,
                "(A worker runs its queued run: cancel(config) stops it.)",
            )
        if queued == "parked" and resuming:
            # an invoke run waiting in its process: that process holds the
            # thread lock, so whoever got here after it is gone; its row is
            # taken over when this run waits again (or goes when it ends)
            queued = None
        if queued in ("sleeping", "waiting", "parked"):
            queued = "sleeping or waiting" if queued == "parked" else queued
            raise ThreadStateError(
                self.thread_id,
                f"{queued} in the run queue (a durable wait)",
                "run",
                "a worker serving its workflow resumes it when it is due; to run it here "
                "instead, cancel(config), uncancel(config), then invoke(None, config)",
            )
        if queued is not None:
            raise ThreadStateError(
                self.thread_id,
                "queued",
                "run",
                "a worker runs its queued run; cancel(config) cancels it, or wait for "
                "RunHandle.result()",
            )
        self.was_drained = mark is not None

    def accepted(self) -> SetMark | None:
        """The run's input was accepted: a drained thread's mark goes. Not
        before: a run refused at its input (``NothingToResumeError``) leaves
        the thread as it found it."""
        return SetMark(self.thread_id, None, "now") if self.was_drained else None

    def seen(self, mark: str | None) -> None:
        """A poll read ``mark`` while the run runs."""
        if mark == CANCELLED:
            self.stop.request(CANCELLED)

    def at_exit(self, exc: BaseException | None, done: bool, wait: Wait) -> SetMark | None:
        """A run a drain stopped leaves its thread marked ``"drained"``. A
        cancel that came while the run's last task ran is moot once the run
        ends done: a finished thread cannot be cancelled, so its mark goes
        (left, it would refuse every later run of a finished thread). A mark
        that lands after the run's last poll is not seen here."""
        if not self.controlled:
            return None
        reason = self.stop.reason
        if isinstance(exc, StopRequested) and reason == DRAINED:
            return SetMark(self.thread_id, DRAINED, wait)
        if exc is None and done and reason == CANCELLED:
            return SetMark(self.thread_id, None, wait)
        return None
