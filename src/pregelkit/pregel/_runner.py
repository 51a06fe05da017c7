"""The runner: run one batch of tasks, commit each result as it lands.

It does not know what the next step is (that is planning) nor how work is
executed (that is the executor); it decides what a finished task means:
which writes to record, whether to stop the others, what to raise.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

from pregelkit._internal._constants import ERROR, INTERRUPT, NO_WRITES, RESUME, RETURN
from pregelkit.errors import GraphBubbleUp, GraphInterrupt
from pregelkit.pregel._call import Call
from pregelkit.pregel._executor import Done
from pregelkit.pregel._retry import arun_with_retry, run_with_retry
from pregelkit.types import Interrupt, PregelExecutableTask, RetryPolicy

if TYPE_CHECKING:
    import asyncio

__all__ = ["SKIP_RERAISE_SET", "FuturesDict", "PregelRunner"]

AnyFuture = Union["concurrent.futures.Future[Any]", "asyncio.Future[Any]"]

SKIP_RERAISE_SET: weakref.WeakSet[AnyFuture] = weakref.WeakSet()
"""Futures of functional-API calls: their failure belongs to the caller, who
gets it from ``.result()``; it neither stops sibling tasks nor is re-raised by
the runner."""

ScheduleTask = Callable[[PregelExecutableTask, int, Call], PregelExecutableTask | None]


def _exception(fut: AnyFuture) -> BaseException | None:
    if fut.cancelled():
        return None
    return fut.exception()


def _is_failure(fut: AnyFuture) -> bool:
    exc = _exception(fut)
    return exc is not None and not isinstance(exc, GraphBubbleUp) and fut not in SKIP_RERAISE_SET


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

    def __setitem__(self, fut: AnyFuture, task: PregelExecutableTask) -> None:
        super().__setitem__(fut, task)
        with self.lock:
            self.counter += 1
        fut.add_done_callback(self.on_done)

    def on_done(self, fut: AnyFuture) -> None:
        # Finished futures are dropped at once (only the ones that raised are
        # kept, for panic_or_proceed): a 100k-task run must not keep 100k
        # futures alive for the garbage collector to walk again and again.
        failed = _is_failure(fut)
        raised = _exception(fut) is not None
        with self.lock:
            self.counter -= 1
            if raised:
                self.done.append(fut)
            else:
                self.pop(fut, None)
            if failed:
                self.failed = True
            last = self.counter == 0
        if last or failed:
            self.wake()


def merge_interrupts(excs: Iterable[GraphInterrupt]) -> GraphInterrupt:
    """One GraphInterrupt carrying every distinct interrupt of the step."""
    seen: dict[str, Interrupt] = {}
    for exc in excs:
        for i in exc.interrupts:
            seen.setdefault(i.id or str(id(i)), i)
    return GraphInterrupt(tuple(seen.values()))


def panic_or_proceed(
    futs: Iterable[AnyFuture], inline: BaseException | None, *, panic: bool = True
) -> None:
    """Raise the step's first real failure, else its merged interrupts."""
    interrupts: list[GraphInterrupt] = []
    failures: list[BaseException] = []
    if inline is not None:
        if isinstance(inline, GraphInterrupt):
            interrupts.append(inline)
        else:
            failures.append(inline)
    for fut in futs:
        exc = _exception(fut)
        if exc is None:
            continue
        if isinstance(exc, GraphInterrupt):
            interrupts.append(exc)
        elif fut not in SKIP_RERAISE_SET:
            failures.append(exc)
    if failures and panic:
        raise failures[0]
    if interrupts:
        raise merge_interrupts(interrupts)


class PregelRunner:
    """Runs the tasks of a step (``tick`` or ``atick``) and the task calls they make."""

    def __init__(
        self,
        *,
        submit: Callable[..., AnyFuture],
        put_writes: Callable[[str, Sequence[tuple[str, Any]]], Awaitable[None] | None],
        is_async: bool = False,
        node_finished: Callable[[str], None] | None = None,
    ) -> None:
        self.submit = submit
        self.put_writes = put_writes
        self.is_async = is_async
        self.node_finished = node_finished
        self.retry_policy: Sequence[RetryPolicy] | None = None
        self.schedule_task: ScheduleTask | None = None
        self.futures: FuturesDict | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.aborted: Callable[[BaseException], None] | None = None
        """Told of a task ended by Ctrl-C or cancellation (``RunStop.aborted``)."""

    # the decision: what a finished task leaves behind
    def commit(self, task: PregelExecutableTask, exception: BaseException | None) -> Any:
        if exception is None:
            if self.node_finished is not None:
                self.node_finished(task.name)
            if not task.writes:
                task.writes.append((NO_WRITES, None))
            return self.put_writes(task.id, task.writes)
        if not isinstance(exception, Exception):
            # Ctrl-C or a cancelled asyncio task: no result to record, and the run may stop
            if self.aborted is not None:
                self.aborted(exception)
            return None
        if isinstance(exception, GraphInterrupt):
            writes: list[tuple[str, Any]] = [(INTERRUPT, list(exception.interrupts))]
            resumes = [w for w in task.writes if w[0] == RESUME]
            if resumes:
                writes.append(resumes[-1])
            return self.put_writes(task.id, writes)
        if isinstance(exception, GraphBubbleUp):
            return None
        return self.put_writes(task.id, [(ERROR, exception)])

    # running one task
    def _run_and_commit(self, task: PregelExecutableTask) -> Any:
        try:
            value = run_with_retry(task, self.retry_policy)
        except BaseException as exc:
            self.commit(task, exc)
            raise
        finally:
            task.scope = None  # task <-> scope is a cycle; break it once the task is over
        self.commit(task, None)
        return value

    async def _arun_and_commit(self, task: PregelExecutableTask) -> Any:
        try:
            value = await arun_with_retry(task, self.retry_policy)
        except BaseException as exc:
            pending = self.commit(task, exc)
            if pending is not None:
                await pending
            raise
        finally:
            task.scope = None  # task <-> scope is a cycle; break it once the task is over
        pending = self.commit(task, None)
        if pending is not None:
            await pending
        return value

    # functional-API task calls
    def call(self, parent: PregelExecutableTask, call: Call) -> AnyFuture:
        """Schedule a task call made by ``parent``; return its future.

        A call whose result was saved (a replay) or cached returns a finished
        future without running or saving anything again.
        """
        assert self.schedule_task is not None and self.futures is not None
        idx = parent.scope.next_call_index()
        task = self.schedule_task(parent, idx, call)
        if task is None:
            raise RuntimeError(f"could not schedule task {call.name!r}")
        if task.writes:
            return self._finished(task)
        fut: AnyFuture
        if self.is_async:
            fut = self.submit(
                self._arun_and_commit, task, __next_tick__=True, __reraise_on_exit__=False
            )
        else:
            fut = self.submit(
                self._run_and_commit, task, __next_tick__=True, __reraise_on_exit__=False
            )
        SKIP_RERAISE_SET.add(fut)
        self.futures[fut] = task
        return fut

    def _finished(self, task: PregelExecutableTask) -> AnyFuture:
        value = None
        for chan, v in task.writes:
            if chan == RETURN:
                value = v
        if self.is_async and self.loop is not None and _on_loop(self.loop):
            fut = self.loop.create_future()
            fut.set_result(value)
            return fut
        return Done(value)

    # a step, sync
    def tick(
        self,
        tasks: Iterable[PregelExecutableTask],
        *,
        reraise: bool = True,
        timeout: float | None = None,
        retry_policy: Sequence[RetryPolicy] | None = None,
        get_waiter: Callable[[], Any] | None = None,
        schedule_task: ScheduleTask,
        wake: threading.Event | None = None,
    ) -> Iterator[None]:
        """Run ``tasks``; yields whenever there may be output to stream.

        A lone task runs in this thread (no hand-off) unless the caller streams
        live (``get_waiter``), in which case everything runs on workers and
        this thread only relays output.
        """
        tasks = tuple(tasks)
        event = wake or threading.Event()
        futures = FuturesDict(event.set)
        self.futures = futures
        self.schedule_task = schedule_task
        self.retry_policy = retry_policy
        yield
        inline: BaseException | None = None
        if len(tasks) == 1 and timeout is None and get_waiter is None:
            try:
                self._run_and_commit(tasks[0])
            except BaseException as exc:
                inline = exc
            if not futures:
                if inline is not None and reraise:
                    panic_or_proceed((), inline)
                return
        else:
            for t in tasks:
                futures[self.submit(self._run_and_commit, t, __reraise_on_exit__=reraise)] = t
        deadline = None if timeout is None else time.monotonic() + timeout
        while futures.counter > 0 and not futures.failed:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            event.wait(remaining)
            event.clear()
            yield
        if _stops_others(futures, inline):
            concurrent.futures.wait(
                [f for f in _cancel_others(futures) if isinstance(f, concurrent.futures.Future)]
            )
        yield
        _settle(futures, inline, reraise=reraise, timeout=timeout)

    # a step, async
    async def atick(
        self,
        tasks: Iterable[PregelExecutableTask],
        *,
        reraise: bool = True,
        timeout: float | None = None,
        retry_policy: Sequence[RetryPolicy] | None = None,
        get_waiter: Callable[[], Any] | None = None,
        schedule_task: ScheduleTask,
        wake: asyncio.Event | None = None,
    ) -> AsyncIterator[None]:
        """The async twin of ``tick``: tasks are asyncio tasks."""
        import asyncio

        tasks = tuple(tasks)
        loop = asyncio.get_running_loop()
        self.loop = loop
        event = wake or asyncio.Event()

        def wake_up() -> None:
            if _on_loop(loop):
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)

        futures = FuturesDict(wake_up)
        self.futures = futures
        self.schedule_task = schedule_task
        self.retry_policy = retry_policy
        yield
        inline: BaseException | None = None
        if len(tasks) == 1 and timeout is None and get_waiter is None:
            try:
                await self._arun_and_commit(tasks[0])
            except BaseException as exc:
                inline = exc
            if not futures:
                if inline is not None and reraise:
                    panic_or_proceed((), inline)
                return
        else:
            for t in tasks:
                futures[self.submit(self._arun_and_commit, t, __reraise_on_exit__=reraise)] = t
        deadline = None if timeout is None else loop.time() + timeout
        while futures.counter > 0 and not futures.failed:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                break
            event.clear()
            yield
        if _stops_others(futures, inline) and (running := _cancel_others(futures)):
            await asyncio.gather(
                *(
                    asyncio.wrap_future(f) if isinstance(f, concurrent.futures.Future) else f
                    for f in running
                ),
                return_exceptions=True,
            )
        yield
        _settle(futures, inline, reraise=reraise, timeout=timeout)


def _stops_others(futures: FuturesDict, inline: BaseException | None) -> bool:
    """A real failure (not an interrupt, not a task call's own) stops the step."""
    return futures.failed or (inline is not None and not isinstance(inline, GraphBubbleUp))


def _cancel_others(futures: FuturesDict) -> list[AnyFuture]:
    """Cancel what has not started; return what is still running, to wait for."""
    running = []
    for fut in list(futures):
        if fut not in SKIP_RERAISE_SET and not fut.done():
            fut.cancel()
        if not fut.done():
            running.append(fut)
    return running


def _settle(
    futures: FuturesDict, inline: BaseException | None, *, reraise: bool, timeout: float | None
) -> None:
    """End the step: raise its failure or its interrupts, or say it timed out."""
    inflight = [f for f in futures if not f.done()]
    panic_or_proceed(list(futures.done), inline, panic=reraise)
    if inflight:
        raise TimeoutError(
            f"step timed out after {timeout}s with tasks still running: "
            f"{sorted({futures[f].name for f in inflight})}"
        )


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    import asyncio

    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
