"""Run control: every way a run stops before its end, handled one way.

A run stops early when its caller leaves (``break`` out of ``stream()``, the
generator collected, ``aclose()`` of ``astream()``), on Ctrl-C or the
cancellation of the asyncio task running it, when ``cancel()`` marks its
thread in the saver (the loop polls the mark, see ``WATCHER``), or when a
``RunControl`` asks it to drain. Each of these is one ``RunStop.request``.
From then on no task starts: a task call raises ``StopRequested`` in the
task that made it, and tasks scheduled but not started are cancelled, as are
running asyncio tasks (a drain lets them finish instead). The loop then exits
as it does on an error, so what finished is saved, the writes are flushed
and the thread lock is freed before the caller gets control back; the driver
raises what the caller should see (``RunCancelledError``, ``GraphDrained``,
or the ``KeyboardInterrupt``/``CancelledError`` that stopped it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pregelkit.errors import GraphBubbleUp, GraphDrained, RunCancelledError

if TYPE_CHECKING:
    from pregelkit.types import PregelExecutableTask

__all__ = [
    "CANCELLED",
    "DRAINED",
    "INTERRUPTED",
    "LEFT",
    "POLL_SECONDS",
    "WATCHER",
    "RunStop",
    "StopRequested",
    "apoll",
]

LEFT = "left"
"""The caller stopped reading the stream (break, close, garbage collection)."""
INTERRUPTED = "interrupted"
"""Ctrl-C (``KeyboardInterrupt``) or the cancellation of the run's asyncio task."""
CANCELLED = "cancelled"
"""``cancel()`` marked the thread in the saver; also the name of that mark."""
DRAINED = "drained"
"""A ``RunControl`` asked for a drain; also the mark a drained thread keeps."""

POLL_SECONDS = 0.1
"""How often a running thread's cancel mark is read from its saver: a
background read, never on a task's path, so unused it costs tasks nothing."""


class StopRequested(GraphBubbleUp):
    """Raised in a task whose task call came after the run was asked to stop,
    and by the driver at the step boundary where it stops. Control flow: the
    task records nothing, and the run ends as ``RunStop.reason`` says."""


class RunStop:
    """Whether, and why, one run (with its nested runs) is stopping."""

    __slots__ = ("control", "detail", "owner", "reason", "refused", "runners")

    def __init__(self) -> None:
        self.control: Any = None
        """The ``RunControl`` tasks see as ``runtime.control``: the caller's,
        or one made when a task first asks (runs that never ask pay nothing)."""
        self.reason: str | None = None
        self.detail: str | None = None
        self.refused: set[str] = set()
        self.runners: list[Any] = []
        self.owner: Any = None
        """The asyncio task driving the run (async runs), to tell its own
        cancellation from that of one of its tasks."""

    def request(self, reason: str, detail: str | None = None) -> None:
        """Stop the run; the first reason given is the one it stops for."""
        if self.reason is not None:
            return
        self.detail = detail
        self.reason = reason
        if reason != DRAINED:
            for runner in list(self.runners):
                futures = runner.futures
                for fut in list(futures or ()):
                    if not fut.done():
                        # not started: never starts; an asyncio task: cancelled;
                        # a thread already running a task: finishes and is saved
                        fut.cancel()

    def forget(self, runner: Any) -> None:
        """A (nested) run is over: its runner has nothing left to cancel."""
        if runner in self.runners:
            self.runners.remove(runner)

    def drain(self, reason: str) -> None:
        self.request(DRAINED, reason)

    def refuse(self, caller: PregelExecutableTask | None) -> StopRequested:
        """The error for a task call made after the stop; the caller's own
        result, if it goes on anyway, is never saved."""
        if caller is not None:
            self.refused.add(caller.id)
        return StopRequested(self.reason)

    def unfinished(self, tasks: Mapping[str, PregelExecutableTask]) -> bool:
        """Whether a step cut short by the stop left tasks without a result."""
        refused = self.refused
        return any(not t.writes or t.id in refused for t in tasks.values())

    def aborted(self, exc: BaseException) -> None:
        """What an exception reaching the run means for it: Ctrl-C, leaving
        the stream, or the cancellation of the run's own asyncio task stop it."""
        if isinstance(exc, Exception):
            return
        if isinstance(exc, GeneratorExit):
            self.request(LEFT)
        elif isinstance(exc, (KeyboardInterrupt, SystemExit)) or self._owner_cancelled():
            self.request(INTERRUPTED)

    def _owner_cancelled(self) -> bool:
        if self.owner is None:
            return False
        import asyncio

        try:
            return asyncio.current_task() is self.owner
        except RuntimeError:
            return False

    def outcome(self, exc: BaseException, thread_id: str | None) -> BaseException | None:
        """What the caller sees instead of ``exc`` once the run has stopped:
        ``RunCancelledError`` or ``GraphDrained``; None to let ``exc`` through
        (leaving the stream, Ctrl-C and a cancelled task are the caller's own)."""
        if self.reason not in (CANCELLED, DRAINED):
            return None
        if not isinstance(exc, Exception) and (
            isinstance(exc, (GeneratorExit, KeyboardInterrupt, SystemExit))
            or (self.owner is not None and self.owner.cancelling())
        ):
            return None
        if self.reason == CANCELLED:
            return RunCancelledError(str(thread_id))
        return GraphDrained(self.detail or "shutdown")


class _Watcher:
    """One daemon thread polling the cancel marks of this process's sync runs.

    A run registers a poll (a loop method reading its thread's mark) for as
    long as it runs; the thread sleeps when no run is registered."""

    def __init__(self) -> None:
        self.polls: dict[int, Callable[[], None]] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, poll: Callable[[], None]) -> Callable[[], None]:
        key = id(poll)
        with self.lock:
            self.polls[key] = poll
            start = self.thread is None
            if start:
                self.thread = threading.Thread(
                    target=self._run, name="pregelkit-run-control", daemon=True
                )
        if start:
            assert self.thread is not None
            self.thread.start()
        self.wake.set()

        def remove() -> None:
            with self.lock:
                self.polls.pop(key, None)

        return remove

    def _run(self) -> None:
        while True:
            with self.lock:
                polls = list(self.polls.values())
                if not polls:
                    self.wake.clear()
            if not polls:
                self.wake.wait()
                continue
            time.sleep(POLL_SECONDS)
            for poll in polls:
                if id(poll) not in self.polls:
                    continue  # the run ended while we slept
                try:
                    poll()
                except Exception:  # a failed read is retried next time; the run's own saves report
                    continue

    def _after_fork(self) -> None:
        self.__init__()  # type: ignore[misc]  # the thread did not survive the fork


WATCHER = _Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHER._after_fork)


async def apoll(poll: Callable[[], Awaitable[None]], stop: RunStop) -> None:
    """The async runs' twin of ``WATCHER``: a task on the run's event loop."""
    import asyncio

    while stop.reason is None:
        await asyncio.sleep(POLL_SECONDS)
        try:
            await poll()
        except Exception:
            continue
