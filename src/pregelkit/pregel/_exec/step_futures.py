"""The futures of one tick: counted as they land, failures kept for the
runner, the rest dropped at once; and how a step's failures and
interrupts come out of them (the runner's half that holds no task)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Union

from pregelkit._internal._main_wait import on_main_thread, wait_sliced
from pregelkit.errors import GraphBubbleUp, GraphInterrupt
from pregelkit.pregel._graph.call import Call
from pregelkit.types import Interrupt, PregelExecutableTask

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = [
    "AnyFuture",
    "FuturesDict",
    "Wake",
    "exception_of",
    "panic_or_proceed",
]

AnyFuture = Union["concurrent.futures.Future[Any]", "asyncio.Future[Any]"]


def exception_of(fut: AnyFuture) -> BaseException | None:
    if fut.cancelled():
        return None
    return fut.exception()


class Wake:
    """The ``threading.Event`` a sync tick waits on, made only when the tick
    actually waits: a lone task run inline never does, and making an
    ``Event`` (a ``Condition`` whose setup raises and catches three
    ``AttributeError``s) cost a short run ~7% of its time, spent by the task
    calls that set it as they finish. Until then a flag holds the state."""

    __slots__ = ("_event", "_flag")

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self._flag = False

    def set(self) -> None:
        with _WAKE_LOCK:
            event = self._event
            if event is None:
                self._flag = True
                return
        event.set()

    def clear(self) -> None:
        with _WAKE_LOCK:
            self._flag = False
            event = self._event
        if event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        with _WAKE_LOCK:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
                if self._flag:
                    event.set()
        if on_main_thread():
            return wait_sliced(event.wait, timeout)
        return event.wait(timeout)


_WAKE_LOCK = threading.Lock()


class FuturesDict(dict[Any, PregelExecutableTask]):
    """The futures of one tick; counts those in flight and wakes the runner
    when all are done or one has failed."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self.wake = wake
        self.counter = 0
        self.done: list[AnyFuture] = []
        self.failed = False
        self.lock = threading.Lock()
        self.dropped: set[AnyFuture] = set()
        self.inline: BaseException | None = None
        """How the tick's task run in the driver (not on the executor) ended."""

    def __setitem__(self, fut: AnyFuture, task: PregelExecutableTask) -> None:
        super().__setitem__(fut, task)
        with self.lock:
            self.counter += 1
        # a Job or a DeferredCall: at once, in the thread that ends it, not next turn
        when_done = getattr(fut, "when_done", None)
        if when_done is not None:
            when_done(self.on_done)
        else:
            fut.add_done_callback(self.on_done)

    def is_call(self, fut: AnyFuture) -> bool:
        """Whether ``fut`` is a functional-API call's: its failure belongs to
        the caller, who gets it from ``.result()``; it neither stops sibling
        tasks nor is re-raised by the runner. (Asked of futures still here:
        running, or kept because they raised.)"""
        task = self.get(fut)
        return task is not None and type(task.proc) is Call

    def on_done(self, fut: AnyFuture) -> None:
        # Finished futures are dropped at once (only the ones that raised are
        # kept, for panic_or_proceed): a 100k-task run must not keep 100k
        # futures alive for the garbage collector to walk again and again.
        failure = getattr(fut, "failure", None)  # a Job's or a DeferredCall's: one frame
        exc = failure() if failure is not None else exception_of(fut)
        failed = exc is not None and not isinstance(exc, GraphBubbleUp) and not self.is_call(fut)
        with self.lock:
            if fut in self.dropped:
                self.dropped.discard(fut)
                return
            self.counter -= 1
            if exc is not None:
                self.done.append(fut)
            else:
                self.pop(fut, None)
            if failed:
                self.failed = True
            last = self.counter == 0
        if last or failed:
            self.wake()

    def drop(self, fut: AnyFuture) -> None:
        """Walk away from ``fut`` (its attempt timed out): stop counting it,
        cancel it if it has not started, and never wait for it."""
        with self.lock:
            if fut.done() or fut not in self:
                return
            super().pop(fut, None)
            self.dropped.add(fut)
            self.counter -= 1
            last = self.counter == 0
        import pregelkit.pregel._exec.executor as executor

        executor.abandon(fut)
        if last:
            self.wake()

    def drop_dead(self) -> None:
        """Drop the futures of tasks whose attempt (or an attempt above) timed out."""
        for fut, task in list(self.items()):
            scope = task.scope
            if scope is not None and scope.attempt is not None and scope.attempt.is_dead():
                self.drop(fut)

    def drop_all(self) -> list[str]:
        """Drop every future still running (the step timed out); their task names."""
        names = []
        for fut, task in list(self.items()):
            if not fut.done():
                names.append(task.name)
                self.drop(fut)
        return sorted(set(names))


def merge_interrupts(excs: Iterable[GraphInterrupt]) -> GraphInterrupt:
    """One GraphInterrupt carrying every distinct interrupt of the step."""
    seen: dict[str, Interrupt] = {}
    for exc in excs:
        for i in exc.interrupts:
            seen.setdefault(i.id or str(id(i)), i)
    return GraphInterrupt(tuple(seen.values()))


def panic_or_proceed(
    futs: Iterable[AnyFuture],
    inline: BaseException | None,
    is_call: Callable[[AnyFuture], bool] | None = None,
) -> None:
    """Raise the step's first real failure (a call's is its caller's), else
    its merged interrupts."""
    interrupts: list[GraphInterrupt] = []
    failures: list[BaseException] = []
    if inline is not None:
        if isinstance(inline, GraphInterrupt):
            interrupts.append(inline)
        else:
            failures.append(inline)
    for fut in futs:
        exc = exception_of(fut)
        if exc is None:
            continue
        if isinstance(exc, GraphInterrupt):
            interrupts.append(exc)
        elif is_call is None or not is_call(fut):
            failures.append(exc)
    if failures:
        raise failures[0]
    if interrupts:
        raise merge_interrupts(interrupts)
