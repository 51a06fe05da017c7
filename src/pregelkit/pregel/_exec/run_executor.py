"""The executor of one run: where its runner submits the tasks it does not
run itself, settled when the run exits.

Kept apart from ``executor`` (the shared thread pool and its futures) so a
run that submits nothing, a chain whose lone tasks run in the driver, never
loads the pool, ``concurrent.futures`` and the ``logging`` it brings: half
the imports of such a run's first ``invoke`` (28M of 55M instructions).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager, suppress
from contextvars import copy_context
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pregelkit._internal._eager import next_turn
from pregelkit._internal._threads import running_loop
from pregelkit.errors import GraphBubbleUp

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

    from pregelkit.pregel._exec.deferred import DeferredCall
    from pregelkit.pregel._exec.executor import Job, _Pool

T = TypeVar("T")

SWEEP_AT = 64
"""The fewest jobs a run's executor keeps before it sweeps out the finished ones."""

__all__ = ["AsyncBackgroundExecutor", "BackgroundExecutor"]


_POOL: ModuleType | None = None
_DEFERRED: type[DeferredCall] | None = None


def pool_module() -> ModuleType:
    """The thread pool's module (``executor``): loaded by the first run that
    uses it, not with the run, then kept (a dotted import statement cost
    ~4k instructions a run, the AttributeError of its ``__path__`` formatted)."""
    global _POOL
    if _POOL is None:
        import pregelkit.pregel._exec.executor as executor

        _POOL = executor
    return _POOL


def _load_deferred() -> type[DeferredCall]:
    """The call futures of async runs: asyncio is imported with the first
    async run, and they with it; then kept."""
    global _DEFERRED
    import pregelkit.pregel._exec.deferred as deferred

    _DEFERRED = call = deferred.DeferredCall
    return call


class BackgroundExecutor(AbstractContextManager["BackgroundExecutor"]):
    """Runs callables on worker threads for one run, and settles them on exit.

    On exit it cancels what was marked ``__cancel_on_exit__``, waits for the
    rest, and re-raises the first failure marked ``__reraise_on_exit__``.
    ``max_concurrency`` (from the config) caps how many run at once. The
    shared pool is found at the first ``submit``.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.pool: _Pool | None = None
        self.job: type[Job[Any]] | None = None
        self.tasks: dict[concurrent.futures.Future[Any], tuple[bool, bool]] = {}
        self.lock = threading.Lock()
        limit = (config or {}).get("max_concurrency")
        self.limit: int | None = int(limit) if limit else None
        self.running = 0
        self.backlog: deque[Job[Any]] = deque()
        self.unlimited: set[concurrent.futures.Future[Any]] = set()
        """Work that takes no slot (``__limited__=False``): its end frees none."""
        self.sweep_at = SWEEP_AT
        self.ended: frozenset[str] = frozenset()

    def _start(self) -> _Pool:
        """The first submit: load the pool and its futures."""
        executor = pool_module()
        self.job = executor.Job
        self.ended = executor.ENDED
        pool: _Pool = executor._get_pool()
        self.pool = pool
        return pool

    def submit(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        __limited__: bool = True,
        **kwargs: Any,
    ) -> Job[T]:
        """Schedule ``fn``. Work is always queued, never run inside ``submit``, so
        ``__next_tick__`` holds by construction: the submitter finishes what it
        is doing (e.g. registering the task) before the work can start.
        ``__limited__=False``: the work takes none of ``max_concurrency``'s slots."""
        pool = self.pool
        if pool is None:
            pool = self._start()
        assert self.job is not None
        job: Job[T] = self.job(fn, args, kwargs)
        tasks = self.tasks
        if self.limit is None:
            # no done callback per job (a task call's cost): finished jobs are
            # swept here instead, once there are twice as many as last time
            with self.lock:
                tasks[job] = (__cancel_on_exit__, __reraise_on_exit__)
                if len(tasks) >= self.sweep_at:
                    self._sweep()
        else:
            with self.lock:
                tasks[job] = (__cancel_on_exit__, __reraise_on_exit__)
                if not __limited__:
                    self.unlimited.add(job)  # before it can end
            job.add_done_callback(self._done)
        if self.limit is None or not __limited__:
            if __next_tick__:
                pool.defer(job)
            else:
                pool.put(job)
        else:
            job._on_start = self._started
            with self.lock:
                if self.running < self.limit:
                    self.running += 1
                    job._on_start = None
                    pool.put(job)
                else:
                    self.backlog.append(job)
        return job

    def _sweep(self) -> None:
        """Forget the jobs that ended well or were cancelled (what ``_done``
        does per job when a limit needs it); the failed ones stay, to be
        re-raised at exit."""
        tasks, ended = self.tasks, self.ended
        for job in [j for j in tasks if j._state in ended and j._exception is None]:
            del tasks[job]
        self.sweep_at = max(SWEEP_AT, 2 * len(tasks))

    def _started(self) -> None:
        # a backlogged job taken by a waiting caller: it now counts as running
        with self.lock:
            self.running += 1

    def _done(self, job: concurrent.futures.Future[Any]) -> None:
        """A job of a run with ``max_concurrency`` ended: forget it (unless it
        failed) and, if it took a slot, start the next of the backlog."""
        with self.lock:
            flags = self.tasks.get(job)
            if flags is not None and (job.cancelled() or job.exception() is None):
                del self.tasks[job]
            if job in self.unlimited:
                self.unlimited.discard(job)
                return
            from concurrent.futures._base import PENDING

            assert self.pool is not None and self.limit is not None
            self.running -= 1
            while self.backlog and self.running < self.limit:
                nxt = self.backlog.popleft()
                if nxt.done() or nxt._state != PENDING:
                    continue
                nxt._on_start = None
                self.running += 1
                self.pool.put(nxt)

    def walk_away(self) -> None:
        """Never wait for the jobs still running (a second Ctrl-C): the exit
        passes them by, and those not started never start."""
        with self.lock:
            jobs = list(self.tasks)
        abandon = pool_module().abandon
        for job in jobs:
            if not job.done():
                abandon(job)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self.lock:
            tasks = dict(self.tasks)
        if not tasks:
            return
        abandoned = pool_module().ABANDONED
        for job, (cancel, _) in tasks.items():
            if cancel:
                job.cancel()
        tasks = {t: f for t, f in tasks.items() if t not in abandoned}
        pending = [t for t in tasks if not t.done()]
        for job in pending:
            if job in abandoned:  # a second Ctrl-C meanwhile walked away from it
                continue
            import concurrent.futures  # only for a job still running: ~1.5k instructions

            # waits (or runs it, not started) without raising its own exception:
            # a KeyboardInterrupt from here is a Ctrl-C, the caller's to handle
            with suppress(concurrent.futures.CancelledError):
                job.exception()
        if exc_type is None:
            for job, (_, reraise) in tasks.items():
                exc = None if job.cancelled() else job.exception()
                if reraise and exc is not None and not isinstance(exc, GraphBubbleUp):
                    raise exc
        self.tasks.clear()  # the run is over: its last calls, not yet swept, go now


async def _gated(semaphore: asyncio.Semaphore, coro: Awaitable[T]) -> T:
    async with semaphore:
        return await coro


class AsyncBackgroundExecutor(AbstractAsyncContextManager["AsyncBackgroundExecutor"]):
    """Runs coroutines as asyncio tasks for one run, and settles them on exit."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        loop = running_loop()
        assert loop is not None, "an async run's executor is made on its event loop"
        self.loop = loop
        self.tasks: dict[asyncio.Future[Any] | concurrent.futures.Future[Any], tuple[bool, bool]]
        self.tasks = {}
        limit = (config or {}).get("max_concurrency")
        self.semaphore: asyncio.Semaphore | None = None
        if limit:
            import asyncio

            self.semaphore = asyncio.Semaphore(int(limit))
        self.deferred = _DEFERRED or _load_deferred()
        self.turn = next_turn(self.loop)
        self.sweep_at = SWEEP_AT

    def submit(
        self,
        fn: Callable[..., Coroutine[Any, Any, T]],
        /,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        __limited__: bool = True,
        **kwargs: Any,
    ) -> asyncio.Future[T] | concurrent.futures.Future[T]:
        """Start ``fn(*args)`` as a task. From the event loop's thread this returns
        an asyncio task, or for a task call (``__next_tick__``) a ``DeferredCall``
        that its awaiter runs; from another thread (a sync function running in
        a worker) a concurrent future it can block on."""
        coro: Coroutine[Any, Any, T] = fn(*args, **kwargs)
        fut: asyncio.Future[T] | concurrent.futures.Future[T]
        running = running_loop()
        if running is self.loop and __next_tick__:
            call = self.deferred(self.loop, coro, copy_context(), self.semaphore, self.turn)
            tasks = self.tasks
            # no done hook per call: finished calls are swept, as a sync run's jobs are
            tasks[call] = (__cancel_on_exit__, __reraise_on_exit__)
            if len(tasks) >= self.sweep_at:
                self._sweep()
            return call
        if self.semaphore is not None and __limited__:
            coro = _gated(self.semaphore, coro)
        if running is self.loop:
            fut = self.loop.create_task(coro, name=__name__, context=copy_context())
        else:
            import asyncio

            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        self.tasks[fut] = (__cancel_on_exit__, __reraise_on_exit__)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is None:
            self.tasks.pop(fut, None)

    def _sweep(self) -> None:
        """Forget the calls that ended well or were cancelled; the failed ones
        stay, to be re-raised at exit."""
        tasks = self.tasks
        for fut in [f for f in tasks if f.done() and (f.cancelled() or f.exception() is None)]:
            del tasks[fut]
        self.sweep_at = max(SWEEP_AT, 2 * len(tasks))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self.tasks:
            return  # every task ended well: nothing to wait for or raise (most runs)
        abandoned = pool_module().ABANDONED
        tasks = {t: f for t, f in self.tasks.items() if t not in abandoned}
        for fut, (cancel, _) in tasks.items():
            if cancel:
                fut.cancel()
        pending = [f for f in tasks if not f.done()]
        if pending:  # imported only then: an import statement costs ~1.5k instructions
            import asyncio
            import concurrent.futures

            await asyncio.gather(
                *(
                    asyncio.wrap_future(f) if isinstance(f, concurrent.futures.Future) else f
                    for f in pending
                ),
                return_exceptions=True,
            )
        if exc_type is None:
            for fut, (_, reraise) in tasks.items():
                exc = None if fut.cancelled() else fut.exception()
                if reraise and exc is not None and not isinstance(exc, GraphBubbleUp):
                    raise exc
        self.tasks.clear()  # the run is over: its last calls, not yet swept, go now
