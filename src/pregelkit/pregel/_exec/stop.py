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

import contextvars
import itertools
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pregelkit.errors import GraphBubbleUp, GraphDrained, RunCancelledError, RunSuspended

if TYPE_CHECKING:
    import asyncio

    from pregelkit.pregel._exec.runner import PregelRunner
    from pregelkit.types import PregelExecutableTask

__all__ = [
    "CANCELLED",
    "DRAINED",
    "INTERRUPTED",
    "LEFT",
    "POLL_SECONDS",
    "SUSPENDED",
    "WATCHER",
    "RunStop",
    "StopRequested",
    "awatch",
]

LEFT = "left"
"""The caller stopped reading the stream (break, close, garbage collection)."""
INTERRUPTED = "interrupted"
"""Ctrl-C (``KeyboardInterrupt``) or the cancellation of the run's asyncio task."""
CANCELLED = "cancelled"
"""``cancel()`` marked the thread in the saver; also the name of that mark."""
DRAINED = "drained"
"""A ``RunControl`` asked for a drain; also the mark a drained thread keeps."""
SUSPENDED = "suspended"
"""A run on a worker stopped to wait (``pregelkit.durable``); a worker
resumes it when it is due. Like a drain, started tasks finish and are saved."""
LETS_TASKS_FINISH = (DRAINED, SUSPENDED)
"""The stops whose started tasks run to their end and are saved, errors included."""

POLL_SECONDS = 0.1
"""How often a running thread's cancel mark is read from its saver: a
background read, never on a task's path, so unused it costs tasks nothing."""


class StopRequested(GraphBubbleUp):
    """Raised in a task whose task call came after the run was asked to stop,
    and by the driver at the step boundary where it stops. Control flow: the
    task records nothing, and the run ends as ``RunStop.reason`` says."""


class RunStop:
    """Whether, and why, one run (with its nested runs) is stopping."""

    __slots__ = (
        "abandoned",
        "control",
        "ctrl_c",
        "detail",
        "owner",
        "reason",
        "refused",
        "runners",
        "suspension",
    )

    def __init__(self) -> None:
        self.control: Any = None
        """The ``RunControl`` tasks see as ``runtime.control``: the caller's,
        or one made when a task first asks (runs that never ask pay nothing)."""
        self.reason: str | None = None
        self.detail: str | None = None
        self.refused: set[str] = set()
        self.runners: list[PregelRunner] = []
        self.owner: Any = None
        """The asyncio task driving the run (async runs), to tell its own
        cancellation from that of one of its tasks."""
        self.ctrl_c: BaseException | None = None
        """The first ``KeyboardInterrupt`` that reached the run."""
        self.abandoned = False
        """A second Ctrl-C: the run walks away from the tasks still running,
        and nothing they finish afterwards is saved."""
        self.suspension: RunSuspended | None = None
        """What a run stopped to wait for (``suspend``) waits for."""

    def request(self, reason: str, detail: str | None = None) -> None:
        """Stop the run; the first reason given is the one it stops for."""
        if self.reason is not None:
            return
        self.detail = detail
        self.reason = reason
        if reason not in LETS_TASKS_FINISH:
            for runner in list(self.runners):
                futures = runner.futures
                for fut in list(futures or ()):
                    if not fut.done():
                        # not started: never starts; an asyncio task: cancelled;
                        # a thread already running a task: finishes and is saved
                        fut.cancel()

    def forget(self, runner: PregelRunner | None) -> None:
        """A (nested) run is over: its runner has nothing left to cancel."""
        if runner in self.runners:
            self.runners.remove(runner)

    def drain(self, reason: str) -> None:
        self.request(DRAINED, reason)

    def suspend(self, wait: RunSuspended, now: float) -> None:
        """A task of a run on a worker waits for ``wait``: the run stops and
        is resumed when it is due. Tasks of the step waiting for something
        else too leave one row to wake the run by: the earliest due time,
        and a look again within a second when the waits differ (the row
        names one thing to wake it)."""
        held = self.suspension
        if held is None:
            if self.reason is None:
                self.suspension = wait
                self.request(SUSPENDED, wait.kind)
            return
        dues = [d for d in (held.due_at, wait.due_at) if d is not None]
        if (held.kind, held.topic) != (wait.kind, wait.topic):
            dues.append(now + 1.0)
        held.due_at = min(dues) if dues else None

    def refuses_calls(self) -> bool:
        """Whether a task call is refused now (the run was asked to stop).
        A suspend refuses none: the step's started tasks go on until they
        end or wait themselves (``suspend`` keeps the earliest due time). A
        sibling's call refused there left its work, its own shorter sleep
        included, undone until the first wait's due time."""
        return self.reason is not None and self.reason != SUSPENDED

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
        the stream, or the cancellation of the run's own asyncio task stop it; a second Ctrl-C
        walks away from the tasks still running."""
        if isinstance(exc, Exception):
            return
        if isinstance(exc, GeneratorExit):
            self.request(LEFT)
        elif isinstance(exc, KeyboardInterrupt):
            if self.ctrl_c is None:
                self.ctrl_c = exc
            elif exc is not self.ctrl_c:
                self.walk_away()
            self.request(INTERRUPTED)
        elif isinstance(exc, SystemExit) or self._owner_cancelled():
            self.request(INTERRUPTED)

    def settle(
        self, wait: Callable[[], object], exc_value: BaseException | None
    ) -> KeyboardInterrupt | None:
        """Run ``wait`` (the executor's exit, which lets tasks still running
        finish); a Ctrl-C meanwhile stops the run (a second one walks away
        from those tasks) and the wait goes on. Returns that Ctrl-C, for the
        loop to raise once it has saved what it could. The exception the run
        exits with is told to the stop first: a Ctrl-C that escaped the tick
        before the runner saw it would otherwise let every task run on."""
        if exc_value is not None:
            self.aborted(exc_value)
        ctrl_c = None
        while True:
            try:
                wait()
                return ctrl_c
            except KeyboardInterrupt as exc:
                if exc is ctrl_c or exc is exc_value:
                    raise  # a task's own, raised again: not a new Ctrl-C
                ctrl_c = exc
                self.aborted(exc)

    def walk_away(self) -> None:
        """Ctrl-C again: stop waiting for the tasks still running (a sync
        task cannot be stopped); what they finish later is never saved."""
        self.abandoned = True
        for runner in list(self.runners):
            futures = runner.futures
            if futures is not None:
                for fut in list(futures):
                    futures.drop(fut)

    def _owner_cancelled(self) -> bool:
        if self.owner is None:
            return False
        import asyncio

        try:
            current = asyncio.current_task()
        except RuntimeError:
            return False
        # asked to cancel (a task call run in the owner's stack may end
        # cancelled on its own: that stops nothing, as in a task of its own)
        return current is self.owner and current.cancelling() > 0

    def outcome(self, exc: BaseException, thread_id: str | None) -> BaseException | None:
        """What the caller sees instead of ``exc`` once the run has stopped:
        ``RunCancelledError`` or ``GraphDrained``; None to let ``exc`` through
        (leaving the stream, Ctrl-C and a cancelled task are the caller's own)."""
        if self.reason not in (CANCELLED, DRAINED, SUSPENDED):
            return None
        if not isinstance(exc, Exception) and (
            isinstance(exc, (GeneratorExit, KeyboardInterrupt, SystemExit))
            or (self.owner is not None and self.owner.cancelling())
        ):
            return None
        if self.reason == CANCELLED:
            return RunCancelledError(str(thread_id))
        if self.reason == SUSPENDED and self.suspension is not None:
            return self.suspension
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


class _LoopWatcher:
    """The async runs' twin of ``WATCHER``: one timer on an event loop reads
    the marks of the loop's running runs every ``POLL_SECONDS``. A task and
    a timer per run (made, then cancelled, on every ``ainvoke``) cost a short
    run two trips through the event loop; registering costs a dict entry.

    The timer and the reads run in a context of their own: the context of
    whichever run armed the timer (its config, a saver's open grouped block)
    is not theirs. A run's end cancels its read in flight and waits for it,
    so that nothing of the run is left half done on the loop once the run has
    returned: a loop that is not run again (a caller's ``runner.run``) would
    otherwise keep the read's database transaction open forever."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # weak: the registry's value must not keep its key, the loop, alive
        self.loop = weakref.ref(loop)
        self.polls: dict[int, tuple[Callable[[], Awaitable[None]], RunStop]] = {}
        self.reading: dict[int, asyncio.Task[None]] = {}
        """Reads in flight, by run: a run that ends cancels its own."""
        self.timer: asyncio.TimerHandle | None = None
        self.keys = itertools.count()

    def add(
        self, poll: Callable[[], Awaitable[None]], stop: RunStop
    ) -> Callable[[], Awaitable[None]]:
        key = next(self.keys)
        self.polls[key] = (poll, stop)
        loop = self.loop()
        if self.timer is None and loop is not None:
            self.timer = loop.call_later(POLL_SECONDS, self._fire, context=contextvars.Context())

        async def remove() -> None:
            self.polls.pop(key, None)
            reading = self.reading.pop(key, None)
            if reading is not None:
                reading.cancel()
                await _finished(reading)

        return remove

    def _fire(self) -> None:
        self.timer = None
        loop = self.loop()
        if not self.polls or loop is None:
            return  # no run: the next one to start sets the timer again
        for key, (poll, stop) in list(self.polls.items()):
            if stop.reason is None and key not in self.reading:
                self.reading[key] = loop.create_task(
                    self._read(key, poll), context=contextvars.Context()
                )
        self.timer = loop.call_later(POLL_SECONDS, self._fire, context=contextvars.Context())

    async def _read(self, key: int, poll: Callable[[], Awaitable[None]]) -> None:
        try:
            await poll()
        except Exception:  # a failed read is retried next time; the run's own saves report
            pass
        finally:
            self.reading.pop(key, None)


async def _finished(task: asyncio.Task[None]) -> None:
    """Wait for ``task`` to end, whatever it ends with (the caller's own
    cancellation still reaches the caller)."""
    import asyncio

    await asyncio.wait((task,))


_LOOP_WATCHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWatcher] = (
    weakref.WeakKeyDictionary()
)


def awatch(
    loop: asyncio.AbstractEventLoop, poll: Callable[[], Awaitable[None]], stop: RunStop
) -> Callable[[], Awaitable[None]]:
    """Have ``poll`` called every ``POLL_SECONDS`` on ``loop`` (its thread
    only) until the run stops or the returned coroutine function is awaited
    (which waits for a read in flight to end)."""
    watcher = _LOOP_WATCHERS.get(loop)
    if watcher is None:
        watcher = _LOOP_WATCHERS[loop] = _LoopWatcher(loop)
    return watcher.add(poll, stop)
