"""The shared thread pool and its futures. They know nothing of tasks.

A run's ``BackgroundExecutor`` (``_exec.run_executor``) runs on this
process-wide pool of worker threads, so a run does not pay for starting
threads. Its futures are
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
from collections.abc import Callable
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pregelkit._internal._main_wait import on_main_thread, wait_sliced

T = TypeVar("T")

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ABANDONED",
    "DEFER_SECONDS",
    "Detached",
    "Submit",
    "abandon",
    "detach",
    "in_background",
]

ENDED = frozenset((FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED))
"""The states a future never leaves."""

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
        __limited__: bool = True,
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

    Workers start with the work up to ``eager_workers`` (the CPU count plus
    four, as ``ThreadPoolExecutor``'s default); beyond that the poller adds
    them, when jobs stay queued for ``STALL_SECONDS`` with none taken (the
    workers are blocked, in I/O or waiting on each other). Work that
    only keeps the workers busy gets no more threads to fight for the GIL:
    a fan-out of 1,000 trivial calls started 40 threads in its first run,
    and had 64 taking turns at the GIL from its second.
    """

    DEFER_SECONDS = DEFER_SECONDS
    MAX_PAUSE_SECONDS = MAX_PAUSE_SECONDS
    PARK_AFTER = 50  # looks that found nothing before the poller sleeps until needed
    STALL_SECONDS = 0.01

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self.eager_workers = min(max_workers, (os.cpu_count() or 1) + 4)
        self.taken = 0
        """Jobs the workers have taken from the queue (a count for the poller:
        an increment lost to a race only delays a thread it would add)."""
        self.taken_seen = 0
        self.stalled_since = 0.0
        self.queue: queue.SimpleQueue[Job[Any] | None] = queue.SimpleQueue()
        self.idle = 0
        """Workers done with their job and not yet promised another: a count
        under ``lock`` (a ``threading.Semaphore`` is a condition in Python:
        its release and non-blocking acquire cost a fan-out's job ~5k
        instructions between them)."""
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
            fan_out = (
                not quiet and len(deferred) > 1 and sum(1 for j in deferred if not j._quiet) > 1
            )
            poller = None
            if self.poller is None or self.poller_parked:  # its frame only when it acts
                poller = self._poller_wanted()
        if poller is not None:
            poller()
        if fan_out:
            self.flush()

    def _poller_wanted(self) -> Callable[[], None] | None:
        """Under the lock: what starts or wakes the poller, if it must be."""
        if self.poller is None:
            self.poller = threading.Thread(target=self._poll, name="pregelkit-poller", daemon=True)
            return self.poller.start
        if self.poller_parked:
            self.poller_parked = False
            return self.poller_wake.set
        return None

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
            handed = self.flush()
            queued = self._grow_if_stalled()
            if handed or queued:
                idle = 0
                pause = self.DEFER_SECONDS if handed else self.STALL_SECONDS / 2
                continue
            pause = min(pause * 2, self.MAX_PAUSE_SECONDS)
            idle += 1
            if idle < self.PARK_AFTER:
                continue
            with self.lock:
                if self.deferred or not self.queue.empty():
                    continue
                self.poller_parked = True
                self.poller_wake.clear()
            self.poller_wake.wait()
            idle = 0
            pause = self.DEFER_SECONDS

    def _grow_if_stalled(self) -> bool:
        """Add a worker per queued job (up to ``max_workers``) once the queue
        has kept jobs for ``STALL_SECONDS`` while the workers took none: they
        are blocked, not busy (a busy worker gives up the GIL every 5 ms, so
        two of those give the others their turns). Whether jobs are queued."""
        waiting = self.queue.qsize()
        taken = self.taken
        now = time.monotonic()
        if not waiting or taken != self.taken_seen or not self.stalled_since:
            self.taken_seen = taken
            self.stalled_since = now if waiting else 0.0
            return bool(waiting)
        if now - self.stalled_since >= self.STALL_SECONDS:
            self.stalled_since = now
            with self.lock:
                room = self.max_workers - len(self.threads)
                workers = [self._start_worker() for _ in range(min(waiting, room))]
            for worker in workers:
                worker.start()
        return True

    def put(self, job: Job[Any]) -> None:
        self.queue.put(job)
        worker = poller = None
        with self.lock:
            if self.idle:
                self.idle -= 1  # an idle worker takes it
                return
            if len(self.threads) < self.eager_workers:
                worker = self._start_worker()
            else:  # the poller adds workers if these stay busy
                poller = self._poller_wanted()
        if worker is not None:
            worker.start()
        elif poller is not None:
            poller()

    def _start_worker(self) -> threading.Thread:
        """Under the lock: a new worker, to start."""
        t = threading.Thread(target=self._work, name=f"pregelkit-{len(self.threads)}", daemon=True)
        self.threads.append(t)
        return t

    def replace_stuck(self) -> None:
        """A worker is stuck in work its owner walked away from: add a thread,
        so the pool never runs dry of workers that can take new work."""
        with self.lock:
            t = self._start_worker()
        t.start()

    def _work(self) -> None:
        get = self.queue.get
        while True:
            job = get()
            if job is None:
                return
            self.taken += 1
            job.run()
            del job
            with self.lock:
                self.idle += 1


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

    # what a job starts with and mostly keeps: read from the class until set
    # (a job is made per task call: each attribute set in __init__ costs it)
    _result: Any = None
    _exception: BaseException | None = None
    _on_start: Callable[[], None] | None = None
    _callbacks: list[Callable[[Any], object]] | None = None
    _sleepers: list[_thread.LockType] | None = None
    """A lock per caller blocked on the job, held until it ends (the job
    releases them all). Cheaper than a ``threading.Event`` (a condition and
    a waiter lock per wait), which a fan-out's caller paid for most of the
    calls a worker had taken; and a caller interrupted while waiting (Ctrl-C)
    leaves the others' locks alone."""
    _waiter_list: list[Any] | None = None
    _abandoned = False
    _quiet = False

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._state = PENDING
        self._fn: Callable[..., T] | None = fn
        self._args = args
        self._kwargs = kwargs
        self._ctx: Context | None = copy_context()

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        if self._waiter_list is None:
            self._waiter_list = []
        return self._waiter_list

    def run(self) -> None:
        """Run the work unless someone else already did (or it was cancelled).

        Once per task call, often in the caller's own thread: claiming the
        work and settling the future are written out here, not calls."""
        with _LOCK:
            if self._state != PENDING:
                return
            self._state = RUNNING
        fn, self._fn = self._fn, None
        ctx, self._ctx = self._ctx, None
        assert fn is not None and ctx is not None
        if self._on_start is not None:
            self._on_start()
        try:
            self._result = ctx.run(fn, *self._args, **self._kwargs)
        except BaseException as exc:
            self._exception = exc
            self._finish(FINISHED, "add_exception")
        else:
            self._finish(FINISHED, "add_result")
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
            sleepers, self._sleepers = self._sleepers, None
            callbacks, self._callbacks = self._callbacks, None
        if sleepers:
            for sleeper in sleepers:
                sleeper.release()
        if callbacks:  # _call_back, without its frame: once per task call
            for cb in callbacks:
                try:
                    cb(self)
                except Exception:
                    concurrent.futures._base.LOGGER.exception("exception calling callback")

    def _run_callbacks(self) -> None:
        with _LOCK:
            callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            _call_back(self, callbacks)

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

    def failure(self) -> BaseException | None:
        """How a finished job ended: its exception, or None if it ended well
        or was cancelled (``exception()`` without its waiting and looks)."""
        return self._exception

    when_done = add_done_callback
    """What the step's futures hook (``FuturesDict``): a job's callbacks run
    in the thread that finishes it, at once, as a ``DeferredCall``'s do."""

    def cancel(self) -> bool:
        with _LOCK:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            self._state = CANCELLED
            self._fn = None
            self._ctx = None
            sleepers, self._sleepers = self._sleepers, None
        if sleepers:
            for sleeper in sleepers:
                sleeper.release()
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
            if self._state == FINISHED:
                return
        sleeper = _thread.allocate_lock()
        sleeper.acquire()
        with _LOCK:
            if self.done():
                return
            if self._sleepers is None:
                self._sleepers = [sleeper]
            else:
                self._sleepers.append(sleeper)
        if _pool is not None:
            _pool.flush()  # about to block: let deferred work start meanwhile
        if on_main_thread():
            got = wait_sliced(lambda seconds: sleeper.acquire(True, seconds), timeout)
        else:
            got = sleeper.acquire() if timeout is None else sleeper.acquire(True, max(timeout, 0))
        if not got:
            raise concurrent.futures.TimeoutError()

    def result(self, timeout: float | None = None) -> T:
        if self._state != FINISHED:  # FINISHED is final: the rest needs no look
            if self._state == PENDING:
                self.run()  # nobody started it: run it here (``_wait``'s first case)
            if self._state != FINISHED:
                self._wait(timeout)
                if self.cancelled():
                    raise concurrent.futures.CancelledError()
        if self._exception is not None:
            raise self._exception
        value: T = self._result
        return value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state != FINISHED:
            self._wait(timeout)
            if self.cancelled():
                raise concurrent.futures.CancelledError()
        return self._exception

    def __repr__(self) -> str:
        return f"<Job at {id(self):#x} state={self._state}>"


def _call_back(job: Job[Any], callbacks: list[Callable[[Any], object]]) -> None:
    for cb in callbacks:
        try:
            cb(job)
        except Exception:
            concurrent.futures._base.LOGGER.exception("exception calling callback")


class Done(Job[T]):
    """A future that is finished from birth: the result (or the recorded
    failure) of a replayed or cached call."""

    _fn = None
    _args: tuple[Any, ...] = ()
    _ctx = None

    def __init__(self, value: T, exception: BaseException | None = None) -> None:
        self._state = FINISHED
        self._result = value
        self._exception = exception
        self._kwargs = {}


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
