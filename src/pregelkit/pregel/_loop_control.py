"""The loop's side of run control (``pregel/_control.py``): the thread's mark.

``LoopControl`` is a base of ``PregelLoop``. A root run with a saver that
keeps marks reads its thread's mark when it starts (a cancelled thread does
not run; a drained one runs and its mark is cleared), has it polled while it
runs (by ``WATCHER`` or, async, its event loop's ``awatch``) and leaves
``"drained"`` behind when a drain stopped it. Nested runs share the stop of
the run they are part of and poll nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_LEASE, CONFIG_KEY_THREAD_ID
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.errors import RunCancelledError, ThreadBusyError, ThreadStateError
from pregelkit.pregel._control import (
    CANCELLED,
    DRAINED,
    WATCHER,
    RunStop,
    StopRequested,
    awatch,
)
from pregelkit.pregel._scope import RunContext, TaskScope

if TYPE_CHECKING:
    import asyncio

__all__ = ["LoopControl"]


class LoopControl:
    """Reads, polls and leaves the run-control mark of the loop's thread."""

    config: dict[str, Any]
    checkpointer: BaseCheckpointSaver[Any] | None
    run: RunContext
    is_nested: bool
    status: str
    _aloop: asyncio.AbstractEventLoop

    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _init_control(self, parent: TaskScope | None) -> None:
        # a nested run stops with the run it is part of
        stop = parent.run.stop if parent is not None else None
        self.run_stop: RunStop = RunStop() if stop is None else stop
        self.run.stop = self.run_stop
        saver = self.checkpointer
        self._controlled = saver is not None and parent is None and saver.has_thread_control
        self._unwatch: Callable[[], None] | None = None
        self._aunwatch: Callable[[], Awaitable[None]] | None = None

    def _thread_locker(self) -> BaseCheckpointSaver[Any] | None:
        """The saver whose lock a root run holds on its thread; none when a
        worker's lease holds the thread: the lease's fence then refuses a
        stale holder's writes, which a lock held by a paused process could
        not hand over."""
        if self.is_nested or CONFIG_KEY_LEASE in self.config[CONF]:
            return None
        return self.checkpointer

    @property
    def _thread_id(self) -> str:
        return str(self.config[CONF][CONFIG_KEY_THREAD_ID])

    def _marked(self, mark: str | None) -> bool:
        """At the start of a run: a cancelled thread does not run (until
        ``uncancel``); a drained one does, its mark cleared (returns True)."""
        if mark == CANCELLED:
            raise RunCancelledError(self._thread_id, starting=True)
        return mark is not None

    def _start_control(self) -> None:
        saver = self.checkpointer
        self._was_drained = False
        if not self._controlled or saver is None:
            return
        if self._leased:
            mark = saver.get_thread_control(self._thread_id)
        else:
            mark, queued = saver.get_thread_gate(self._thread_id)
            self._refuse_queued(mark, queued)
        self._was_drained = self._marked(mark)
        self._unwatch = WATCHER.add(self._poll)

    async def _astart_control(self) -> None:
        saver = self.checkpointer
        self._was_drained = False
        if not self._controlled or saver is None:
            return
        if self._leased:
            mark = await saver.aget_thread_control(self._thread_id)
        else:
            mark, queued = await saver.aget_thread_gate(self._thread_id)
            self._refuse_queued(mark, queued)
        self._was_drained = self._marked(mark)
        self._aunwatch = awatch(self._aloop, self._apoll, self.run_stop)

    @property
    def _leased(self) -> bool:
        """A worker runs this run of a queued run (it holds the lease)."""
        return CONFIG_KEY_LEASE in self.config[CONF]

    def _refuse_queued(self, mark: str | None, queued: str | None) -> None:
        """A run started here while a queued run of the thread waits for or
        has a worker would race it: refused (a cancelled thread says so)."""
        if queued is None or mark == CANCELLED:
            return
        if queued == "running":
            raise ThreadBusyError(
                self._thread_id,
                "(A worker runs its queued run: cancel(config) stops it.)",
            )
        raise ThreadStateError(
            self._thread_id,
            "queued",
            "run",
            "a worker runs its queued run; cancel(config) cancels it, or wait for "
            "RunHandle.result()",
        )

    def _accepted_control(self) -> None:
        """The run's input was accepted: a drained thread's mark goes. Not
        before: a run refused at its input (``NothingToResumeError``) leaves
        the thread as it found it."""
        if self._was_drained and self.checkpointer is not None:
            self.checkpointer.put_thread_control(self._thread_id, None)

    async def _aaccepted_control(self) -> None:
        if self._was_drained and self.checkpointer is not None:
            await self.checkpointer.aput_thread_control(self._thread_id, None)

    def _poll(self) -> None:
        """Read the mark (``WATCHER``'s thread calls this while the run runs)."""
        assert self.checkpointer is not None
        if self.checkpointer.get_thread_control(self._thread_id) == CANCELLED:
            self.run_stop.request(CANCELLED)

    async def _apoll(self) -> None:
        assert self.checkpointer is not None
        if await self.checkpointer.aget_thread_control(self._thread_id) == CANCELLED:
            self.run_stop.request(CANCELLED)

    def _end_control(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    async def _aend_control(self) -> None:
        """Stop polling; a read in flight is cancelled and waited for, so the
        run leaves nothing running on its event loop."""
        if self._aunwatch is not None:
            unwatch, self._aunwatch = self._aunwatch, None
            await unwatch()

    def _mark_drained(self, exc: BaseException | None) -> None:
        """A run a drain stopped leaves its thread marked ``"drained"``."""
        saver = self.checkpointer
        if not (self._controlled and saver is not None and isinstance(exc, StopRequested)):
            return
        if self.run_stop.reason == DRAINED:
            self._persist(
                saver.put_thread_control, saver.aput_thread_control, self._thread_id, DRAINED
            )

    def _drop_moot_cancel(self, exc: BaseException | None) -> None:
        """A cancel that came while the run's last task ran is moot once the
        run ends done: a finished thread cannot be cancelled, so its mark
        goes (left, it would refuse every later run of a finished thread).
        A mark that lands after the run's last poll is not seen here."""
        saver = self.checkpointer
        if (
            exc is None
            and self._controlled
            and saver is not None
            and self.status == "done"
            and self.run_stop.reason == CANCELLED
        ):
            self._persist(
                saver.put_thread_control, saver.aput_thread_control, self._thread_id, None
            )
