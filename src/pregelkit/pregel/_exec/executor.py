"""Executors: run callables in the background. They know nothing of tasks.

``BackgroundExecutor`` runs on a process-wide pool of worker threads, so a
run does not pay for starting threads. Its futures are
``concurrent.futures.Future`` objects with one addition: a caller that waits
on a future whose work has not started yet runs that work itself, in its own
thread. The caller would only block otherwise, so what it observes is the
same, and a chain of calls costs no thread hand-off.
"""

from __future__ import annotations

import _thread
import concurrent.futures
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from contextlib import AbstractAsyncContextManager, AbstractContextManager, suppress
from contextvars import Context, copy_context
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pregelkit.errors import GraphBubbleUp

T = TypeVar("T")

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ABANDONED",
    "DEFER_SECONDS",
    "AsyncBackgroundExecutor",
    "BackgroundExecutor",
    "Detached",
    "Submit",
    "abandon",
    "detach",
    "in_background",
]

_MAX_WORKERS = int(os.environ.get("PREGELKIT_MAX_WORKERS", "64"))

DEFER_SECONDS = 0.0005
"""How long deferred work waits for its caller before a pool thread takes it,
while the callers leave work to the pool (see ``_Pool``)."""

MAX_PAUSE_SECONDS = 0.002
"""How long deferred work may wait after a spell in which the callers took
all of it themselves."""


class Submit(Protocol):
    """The executor interface the loop and runner use; a remote executor can
    implement it to run work elsewhere."""

    def __call__(
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        **kwargs: Any,
    ) -> concurrent.futures.Future[Any] | asyncio.Future[Any]: ...


class _Pool:
    """Daemon worker threads fed from one queue; grows on demand.

    Task calls are *deferred* rather than queued at once: most calls are
    waited on right away by their caller, who then runs them itself, and
    waking a worker only to find the job taken costs two GIL hand-offs per
    call. A deferred job reaches the workers when a second one is deferred
    (a fan-out wants parallelism now), when a caller is about to block, or
    through a poller thread, whichever comes first.

    The poller looks every ``DEFER_SECONDS`` while it finds jobs nobody
    took; each look that finds none doubles its pause, up to
    ``MAX_PAUSE_SECONDS``. Every look takes the GIL, and a thread that
    wakes while the caller is in a call that released it (a SQLite
    statement) makes the caller wait for it on the way back: at a look per
    half millisecond that cost a short run on SQLite 10-15% of its time,
    while the callers had taken every job themselves. So a job left alone
    reaches the workers within ``MAX_PAUSE_SECONDS`` after a quiet spell,
    within ``DEFER_SECONDS`` while jobs keep being left.
    """

    DEFER_SECONDS = DEFER_SECONDS
    MAX_PAUSE_SECONDS = MAX_PAUSE_SECONDS
    PARK_AFTER = 50  # looks that found nothing before the poller sleeps until needed

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self.queue: queue.SimpleQueue[Job[Any] | None] = queue.SimpleQueue()
        self.idle = threading.Semaphore(0)
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.deferred: deque[Job[Any]] = deque()
        self.poller: threading.Thread | None = None
        self.poller_parked = False
        self.poller_wake = threading.Event()

    def defer(self, job: Job[Any], *, quiet: bool = False) -> None:
        """Defer ``job``; a ``quiet`` one (background saves) never counts as a
        fan-out: only the poller, a waiting caller or a real fan-out hands it over."""
        job._quiet = quiet
        with self.lock:
            deferred = self.deferred
            while deferred and deferred[0]._state != PENDING:
                deferred.popleft()  # taken by its caller already
            deferred.append(job)
            fan_out = not quiet and sum(1 for j in deferred if not j._quiet) > 1
            wake = self.poller_parked
            self.poller_parked = False
            start = self.poller is None
            if start:
                self.poller = threading.Thread(
                    target=self._poll, name="pregelkit-poller", daemon=True
                )
        if start:
            assert self.poller is not None
            self.poller.start()
        elif wake:
            self.poller_wake.set()
        if fan_out:
            self.flush()

    def flush(self) -> int:
        """Hand every deferred job that nobody has started to the workers;
        how many there were."""
        with self.lock:
            if not self.deferred:
                return 0
            jobs = [j for j in self.deferred if j._state == PENDING]
            self.deferred.clear()
        for job in jobs:
            self.put(job)
        return len(jobs)

    def _poll(self) -> None:
        idle = 0
        pause = self.DEFER_SECONDS
        while True:
            time.sleep(pause)
            if self.flush():
                idle = 0
                pause = self.DEFER_SECONDS
                continue
            pause = min(pause * 2, self.MAX_PAUSE_SECONDS)
            idle += 1
            if idle < self.PARK_AFTER:
                continue
            with self.lock:
                if self.deferred:
                    continue
                self.poller_parked = True
                self.poller_wake.clear()
            self.poller_wake.wait()
            idle = 0
            pause = self.DEFER_SECONDS

    def put(self, job: Job[Any]) -> None:
        self.queue.put(job)
        if self.idle.acquire(blocking=False):
            return
        with self.lock:
            if len(self.threads) < self.max_workers:
                t = threading.Thread(
                    target=self._work, name=f"pregelkit-{len(self.threads)}", daemon=True
                )
                self.threads.append(t)
                t.start()

    def replace_stuck(self) -> None:
        """A worker is stuck in work its owner walked away from: add a thread,
        so the pool never runs dry of workers that can take new work."""
        with self.lock:
            t = threading.Thread(
                target=self._work, name=f"pregelkit-{len(self.threads)}", daemon=True
            )
            self.threads.append(t)
        t.start()

    def _work(self) -> None:
        get = self.queue.get
        while True:
            job = get()
            if job is None:
                return
            job.run()
            del job
            self.idle.release()


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _Pool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _Pool(_MAX_WORKERS)
    return _pool


def _reset_pool_after_fork() -> None:
    global _pool, _pool_lock, _detached
    _pool = None
    _pool_lock = threading.Lock()
    _detached = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_after_fork)


_LOCK = threading.RLock()
_CONDITION = threading.Condition(_LOCK)


class Job(concurrent.futures.Future[T]):
    """A future that carries its own work, so whoever gets to it first runs it.

    A ``concurrent.futures.Future`` to its users (``result``, ``wait``,
    ``as_completed``, ``asyncio.wrap_future`` all work), but lean: the stock
    future allocates a condition, a lock and three lists per instance, and a
    fan-out of 100k calls kept alive by the caller would make the garbage
    collector walk a million objects again and again. Jobs share one lock
    (state changes are a few attribute writes) and create a wait event only
    when a caller actually has to block.
    """

    _condition = _CONDITION  # what concurrent.futures.wait/as_completed lock

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._fn: Callable[..., T] | None = fn
        self._args = args
        self._kwargs = kwargs
        self._ctx: Context | None = copy_context()
        self._on_start: Callable[[], None] | None = None
        self._callbacks: list[Callable[[Any], object]] | None = None
        self._event: threading.Event | None = None
        self._waiter_list: list[Any] | None = None
        self._abandoned = False
        self._quiet = False

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        if self._waiter_list is None:
            self._waiter_list = []
        return self._waiter_list

    def _claim(self) -> bool:
        with _LOCK:
            if self._state != PENDING:
                return False
            self._state = RUNNING
            return True

    def run(self) -> None:
        """Run the work unless someone else already did (or it was cancelled)."""
        if not self._claim():
            return
        fn, self._fn = self._fn, None
        ctx, self._ctx = self._ctx, None
        assert fn is not None and ctx is not None
        if self._on_start is not None:
            self._on_start()
        try:
            result = ctx.run(fn, *self._args, **self._kwargs)
        except BaseException as exc:
            self.set_exception(exc)
        else:
            self.set_result(result)
        finally:
            self._args = ()
            self._kwargs = {}

    def _finish(self, state: str, notify: str) -> None:
        with _LOCK:
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED):
                raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")
            self._state = state
            if self._waiter_list:
                for waiter in self._waiter_list:
                    getattr(waiter, notify)(self)
            event = self._event
        if event is not None:
            event.set()
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for cb in callbacks:
                try:
                    cb(self)
                except Exception:
                    concurrent.futures._base.LOGGER.exception("exception calling callback")

    def set_result(self, result: T) -> None:
        self._result = result
        self._finish(FINISHED, "add_result")

    def set_exception(self, exception: BaseException | None) -> None:
        self._exception = exception
        self._finish(FINISHED, "add_exception")

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[T]], object]) -> None:
        with _LOCK:
            if self._state not in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED):
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        try:
            fn(self)
        except Exception:
            concurrent.futures._base.LOGGER.exception("exception calling callback")

    def cancel(self) -> bool:
        with _LOCK:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            self._state = CANCELLED
            self._fn = None
            self._ctx = None
            event = self._event
        if event is not None:
            event.set()
        self._run_callbacks()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        with _LOCK:
            if self._state == CANCELLED:
                self._state = CANCELLED_AND_NOTIFIED
                if self._waiter_list:
                    for waiter in self._waiter_list:
                        waiter.add_cancelled(self)
                return False
            if self._state == PENDING:
                self._state = RUNNING
                return True
            raise RuntimeError(f"Future in unexpected state: {self._state}")

    def cancelled(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def running(self) -> bool:
        return self._state == RUNNING

    def done(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)

    def _wait(self, timeout: float | None) -> None:
        state = self._state
        if state == FINISHED:
            return  # final: no lock needed to know it (the done callbacks ask)
        if state == PENDING:
            self.run()  # nobody started it: run it here rather than wait for a worker
        with _LOCK:
            if self.done():
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if _pool is not None:
            _pool.flush()  # about to block: let deferred work start meanwhile
        if not event.wait(timeout):
            raise concurrent.futures.TimeoutError()

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        if self.cancelled():
            raise concurrent.futures.CancelledError()
        if self._exception is not None:
            raise self._exception
        value: T = self._result
        return value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        if self.cancelled():
            raise concurrent.futures.CancelledError()
        return self._exception

    def __repr__(self) -> str:
        return f"<Job at {id(self):#x} state={self._state}>"


class Done(Job[T]):
    """A future that is finished from birth: the result (or the recorded
    failure) of a replayed or cached call."""

    def __init__(self, value: T, exception: BaseException | None = None) -> None:
        self._state = FINISHED
        self._result = value
        self._exception = exception
        self._fn = None
        self._args = ()
        self._kwargs = {}
        self._ctx = None
        self._on_start = None
        self._callbacks = None
        self._event = None
        self._waiter_list = None
        self._abandoned = False
        self._quiet = False


ABANDONED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Futures whose owner walked away (a timeout): executors do not wait for them on exit."""


def abandon(fut: concurrent.futures.Future[Any] | asyncio.Future[Any]) -> None:
    """Walk away from ``fut``: cancel it if it has not started, never wait for it.

    A sync job already running cannot be stopped; the pool gets a thread in
    its place, so work that hangs forever never starves the pool.
    """
    ABANDONED.add(fut)
    if fut.cancel() or fut.done():
        return
    if isinstance(fut, Job):
        with _LOCK:
            if fut._abandoned:
                return
            fut._abandoned = True
        if _pool is not None:
            _pool.replace_stuck()


class Detached:
    """Work on a daemon thread of its own, that a waiter may walk away from.

    ``wait(timeout)`` is a raw lock the work releases when it is done: cheaper
    than an Event on a path that every bounded attempt takes."""

    __slots__ = ("_done", "args", "ctx", "exc", "fn", "on_done", "result")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        on_done: Callable[[Detached], None] | None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.ctx = copy_context()
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self.result: Any = None
        self.exc: BaseException | None = None
        self.on_done = on_done

    def wait(self, timeout: float | None) -> bool:
        """Whether the work is done, waiting up to ``timeout`` seconds for it."""
        if timeout is None:
            done = self._done.acquire()
        else:
            done = self._done.acquire(True, max(timeout, 0.0))
        if done:
            self._done.release()  # stays done for any later look
        return done

    def run(self) -> None:
        try:
            self.result = self.ctx.run(self.fn, *self.args)
        except BaseException as exc:
            self.exc = exc
        finally:
            self.fn = self.args = None  # type: ignore[assignment]
            self._done.release()
            if self.on_done is not None:
                self.on_done(self)


class _DetachedThreads:
    """Daemon threads for detached work: reused when free, and a new one whenever
    none is free, so a body that never returns costs its thread and nothing else."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Detached] = queue.SimpleQueue()
        self.idle = threading.Semaphore(0)
        self.count = 0

    def put(self, work: Detached) -> None:
        self.queue.put(work)
        if self.idle.acquire(blocking=False):
            return
        self.count += 1
        threading.Thread(
            target=self._work, name=f"pregelkit-bounded-{self.count}", daemon=True
        ).start()

    def _work(self) -> None:
        get = self.queue.get
        while True:
            work = get()
            work.run()
            del work
            self.idle.release()


_detached: _DetachedThreads | None = None


def in_background(fn: Callable[[], Any]) -> Job[Any]:
    """Run ``fn`` on the shared pool within ``_Pool.DEFER_SECONDS``, unless
    someone waits for it first and so runs it in its own thread: a short run
    then makes its background saves itself at its end, with no hand-off."""
    job: Job[Any] = Job(fn, (), {})
    _get_pool().defer(job, quiet=True)
    return job


def detach(
    fn: Callable[..., Any], *args: Any, on_done: Callable[[Detached], None] | None = None
) -> Detached:
    """Run ``fn(*args)`` on a detached daemon thread, in a copy of this context."""
    global _detached
    if _detached is None:
        with _pool_lock:
            if _detached is None:
                _detached = _DetachedThreads()
    work = Detached(fn, args, on_done)
    _detached.put(work)
    return work


class BackgroundExecutor(AbstractContextManager["BackgroundExecutor"]):
    """Runs callables on worker threads for one run, and settles them on exit.

    On exit it cancels what was marked ``__cancel_on_exit__``, waits for the
    rest, and re-raises the first failure marked ``__reraise_on_exit__``.
    ``max_concurrency`` (from the config) caps how many run at once.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.pool = _get_pool()
        self.tasks: dict[concurrent.futures.Future[Any], tuple[bool, bool]] = {}
        self.lock = threading.Lock()
        limit = (config or {}).get("max_concurrency")
        self.limit: int | None = int(limit) if limit else None
        self.running = 0
        self.backlog: deque[Job[Any]] = deque()

    def submit(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        **kwargs: Any,
    ) -> Job[T]:
        """Schedule ``fn``. Work is always queued, never run inside ``submit``, so
        ``__next_tick__`` holds by construction: the submitter finishes what it
        is doing (e.g. registering the task) before the work can start."""
        job: Job[T] = Job(fn, args, kwargs)
        if __cancel_on_exit__ or not __reraise_on_exit__:
            with self.lock:
                self.tasks[job] = (__cancel_on_exit__, __reraise_on_exit__)
        elif __reraise_on_exit__:
            with self.lock:
                self.tasks[job] = (False, True)
        job.add_done_callback(self._done)
        if self.limit is None:
            if __next_tick__:
                self.pool.defer(job)
            else:
                self.pool.put(job)
        else:
            job._on_start = self._started
            with self.lock:
                if self.running < self.limit:
                    self.running += 1
                    job._on_start = None
                    self.pool.put(job)
                else:
                    self.backlog.append(job)
        return job

    def _started(self) -> None:
        # a backlogged job taken by a waiting caller: it now counts as running
        with self.lock:
            self.running += 1

    def _done(self, job: concurrent.futures.Future[Any]) -> None:
        with self.lock:
            flags = self.tasks.get(job)
            if flags is not None and (job.cancelled() or job.exception() is None):
                del self.tasks[job]
            if self.limit is None:
                return
            self.running -= 1
            while self.backlog and self.running < self.limit:
                nxt = self.backlog.popleft()
                if nxt.done() or nxt._state != PENDING:
                    continue
                nxt._on_start = None
                self.running += 1
                self.pool.put(nxt)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self.lock:
            tasks = dict(self.tasks)
        for job, (cancel, _) in tasks.items():
            if cancel:
                job.cancel()
        tasks = {t: f for t, f in tasks.items() if t not in ABANDONED}
        pending = [t for t in tasks if not t.done()]
        for job in pending:
            if job in ABANDONED:  # a second Ctrl-C meanwhile walked away from it
                continue
            # waits (or runs it, not started) without raising its own exception:
            # a KeyboardInterrupt from here is a Ctrl-C, the caller's to handle
            with suppress(concurrent.futures.CancelledError):
                job.exception()
        if exc_type is None:
            for job, (_, reraise) in tasks.items():
                exc = None if job.cancelled() else job.exception()
                if reraise and exc is not None and not isinstance(exc, GraphBubbleUp):
                    raise exc


async def _gated(semaphore: asyncio.Semaphore, coro: Awaitable[T]) -> T:
    async with semaphore:
        return await coro


class AsyncBackgroundExecutor(AbstractAsyncContextManager["AsyncBackgroundExecutor"]):
    """Runs coroutines as asyncio tasks for one run, and settles them on exit."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        import asyncio

        self.loop = asyncio.get_running_loop()
        self.tasks: dict[asyncio.Future[Any] | concurrent.futures.Future[Any], tuple[bool, bool]]
        self.tasks = {}
        limit = (config or {}).get("max_concurrency")
        self.semaphore = asyncio.Semaphore(int(limit)) if limit else None
        # asyncio is imported with the first async run, and the call futures with it
        import pregelkit.pregel._exec.deferred as deferred

        self.deferred = deferred.DeferredCall

    def submit(
        self,
        fn: Callable[..., Coroutine[Any, Any, T]],
        /,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        **kwargs: Any,
    ) -> asyncio.Future[T] | concurrent.futures.Future[T]:
        """Start ``fn(*args)`` as a task. From the event loop's thread this returns
        an asyncio task, or for a task call (``__next_tick__``) a ``DeferredCall``
        that its awaiter runs; from another thread (a sync function running in
        a worker) a concurrent future it can block on."""
        import asyncio

        coro: Coroutine[Any, Any, T] = fn(*args, **kwargs)
        fut: asyncio.Future[T] | concurrent.futures.Future[T]
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop and __next_tick__:
            call = self.deferred(self.loop, coro, copy_context(), self.semaphore)
            self.tasks[call] = (__cancel_on_exit__, __reraise_on_exit__)
            call.when_done(self._done)
            return call
        if self.semaphore is not None:
            coro = _gated(self.semaphore, coro)
        if running is self.loop:
            fut = self.loop.create_task(coro, name=__name__, context=copy_context())
        else:
            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        self.tasks[fut] = (__cancel_on_exit__, __reraise_on_exit__)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is None:
            self.tasks.pop(fut, None)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        import asyncio

        tasks = {t: f for t, f in self.tasks.items() if t not in ABANDONED}
        for fut, (cancel, _) in tasks.items():
            if cancel:
                fut.cancel()
        pending = [
            asyncio.wrap_future(f) if isinstance(f, concurrent.futures.Future) else f
            for f in tasks
            if not f.done()
        ]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if exc_type is None:
            for fut, (_, reraise) in tasks.items():
                exc = None if fut.cancelled() else fut.exception()
                if reraise and exc is not None and not isinstance(exc, GraphBubbleUp):
                    raise exc
