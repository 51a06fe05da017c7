"""The runner: run one batch of tasks, commit each result as it lands.

It does not know what the next step is (that is planning) nor how work is
executed (that is the executor); it decides what a finished task means:
which writes to record, whether to stop the others, what to raise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

from pregelkit._internal._constants import CALL, ERROR, INTERRUPT, NO_WRITES, RESUME, RETURN
from pregelkit._internal._current import CURRENT
from pregelkit._internal._threads import on_loop
from pregelkit.errors import GraphBubbleUp, GraphInterrupt, NodeTimeoutError, NondeterminismError
from pregelkit.pregel._exec.recorder import AttemptRecorder
from pregelkit.pregel._exec.retry import arun_with_retry, run_with_retry
from pregelkit.pregel._exec.step_futures import (
    AnyFuture,
    FuturesDict,
    Wake,
    exception_of,
    panic_or_proceed,
)
from pregelkit.pregel._exec.timeout import Attempt, step_attempt, step_error
from pregelkit.pregel._exec.twins import RunningCalls
from pregelkit.pregel._graph.call import Call
from pregelkit.pregel._plan.replay import (
    PATCH_PREFIX,
    call_identity,
    encode_failure,
    exception_chain,
    is_failure,
    rebuild_failure,
)
from pregelkit.types import PregelExecutableTask, RetryPolicy

if TYPE_CHECKING:
    import asyncio

    from pregelkit.pregel._exec.port import LoopPort

__all__ = ["FuturesDict", "PregelRunner", "StepRules"]

ScheduleTask = Callable[
    [PregelExecutableTask, int, Call], PregelExecutableTask | list[tuple[str, Any]] | None
]
"""Makes the task of a call; for a replayed call, which does not run, gives
the writes saved for it instead."""


class StepRules:
    """How every step of a run is run: made once per run by its driver, the
    same for ``tick`` and ``atick``. (Not a ``NamedTuple``, whose class costs
    0.1 ms to make.)"""

    __slots__ = ("live", "retry_policy", "schedule_task", "timeout")

    def __init__(
        self,
        timeout: float | None,
        retry_policy: Sequence[RetryPolicy] | None,
        schedule_task: ScheduleTask,
        live: bool,
    ) -> None:
        self.timeout = timeout
        """The graph's ``step_timeout``."""
        self.retry_policy = retry_policy
        """The graph's retry policies, for tasks that have none of their own."""
        self.schedule_task = schedule_task
        """Makes the task of a call (the loop's ``accept_push``)."""
        self.live = live
        """The caller takes output while tasks run: every task runs on the
        executor, none inline in the driver."""


class PregelRunner:
    """Runs the tasks of a step (``tick`` or ``atick``) and the task calls they make."""

    def __init__(self, port: LoopPort, *, is_async: bool = False) -> None:
        # taken from the port once, here: a task's commit reaches each with one
        # attribute lookup, and nothing rewires them later
        self.submit = port.submit
        self.put_writes = port.put_writes
        self.check_saved = port.check_saved
        """Asked before every task body starts: none starts once a save of the run failed."""
        self.remember = port.remember_call
        """Keeps a finished call's writes for a later attempt of its caller
        (an entrypoint-level retry replays them)."""
        self.recorded_call = port.recorded_call
        """The id of a call position and the identity recorded there."""
        self.ended_calls = port.ended_calls
        """Checks that a task that returned made every call its recorded run made."""
        self.aborted = port.run_stop.aborted
        """Told of a task ended by Ctrl-C or cancellation (``RunStop.aborted``)."""
        self.attempts: AttemptRecorder | None = port.attempt_recorder()
        """Told of each attempt when attempts are recorded or traced."""
        self.records = port.checkpointer is not None
        """Whether calls are recorded (the run has a checkpointer). Without one
        nothing is replayed from storage, so arguments are not digested: a
        call's identity is its task name."""
        self.alookup: Callable[[PregelExecutableTask], Awaitable[bool]] | None = (
            port.alookup_call if is_async and port.cache is not None else None
        )
        """An async run with a cache reads it for a call ``schedule_task``
        left unread, off the event loop (``LoopPort.alookup_call``)."""
        self.is_async = is_async
        # functions, called with the runner: a runner holding bound methods of
        # its own is a reference cycle, and the whole run hanging from it would
        # wait for the garbage collector instead of going when the run ends
        self._perform: Callable[[PregelRunner, PregelExecutableTask], Any] = (
            PregelRunner._arun_and_commit if is_async else PregelRunner._run_and_commit
        )
        """Runs a task and commits how it ended: what the executor is given."""
        self._twin: Callable[..., Any] = (
            PregelRunner._arun_twin if is_async else PregelRunner._run_twin
        )
        self.retry_policy: Sequence[RetryPolicy] | None = None
        self.schedule_task: ScheduleTask | None = None
        self.futures: FuturesDict | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.poisoned: NondeterminismError | None = None
        """The replay mismatch of this run, if any: from then on nothing is
        saved, and the step raises it whatever the code did with it."""
        self._failed_calls: dict[str, dict[str, tuple[str, BaseException]]] = {}
        self._failed_lock = threading.Lock()
        self._kept_for_retry: set[str] = set()
        """Calls whose caller may run again (it has a retry policy): their
        results are kept for its next attempt."""
        self.running = RunningCalls()
        self.timeouts = False  # set when an attempt timed out: the tick drops what hung from it

    def timed_out(self) -> None:
        """An attempt timed out (called from the thread that waited for it)."""
        self.timeouts = True
        futures = self.futures
        if futures is not None:
            futures.wake()

    # the decision: what a finished task leaves behind
    def commit(
        self,
        task: PregelExecutableTask,
        exception: BaseException | None,
        fence: Attempt | None = None,
    ) -> Any:
        """Record how ``task`` ended; None, or the save to await. Nothing is
        recorded once the run is poisoned, nor for a late result of abandoned
        work (the attempt ``fence`` it hangs from has died)."""
        if self.poisoned is not None or (fence is not None and fence.is_dead()):
            return None
        call = task.proc if type(task.proc) is Call else None
        pending = self._settle_failed_calls(task, exception) if self._failed_calls else None
        if exception is None:
            if call is not None:
                task.writes.append((CALL, call.call_id))
                if self._kept_for_retry and task.id in self._kept_for_retry:
                    self._kept_for_retry.discard(task.id)
                    self.remember(task.id, list(task.writes))
            elif not task.writes:
                task.writes.append((NO_WRITES, None))
            saved = self.put_writes(task.id, task.writes)
            return saved if pending is None else _chain(pending, saved)
        if not isinstance(exception, Exception):
            # Ctrl-C or a cancelled asyncio task: no result to record, and the run may stop
            self.aborted(exception)
            return pending
        if isinstance(exception, GraphInterrupt):
            writes: list[tuple[str, Any]] = [(INTERRUPT, list(exception.interrupts))]
            resumes = [w for w in task.writes if w[0] == RESUME]
            if resumes:
                writes.append(resumes[-1])
            if call is not None:
                writes.append((CALL, call.call_id))
            return _chain(pending, self.put_writes(task.id, writes))
        if isinstance(exception, GraphBubbleUp):
            return pending
        writes = [(ERROR, exception)]
        if call is not None:
            writes.append((CALL, encode_failure(call.call_id, exception, handled=False)))
            parent_id = str(task.path[3])
            with self._failed_lock:
                self._failed_calls.setdefault(parent_id, {})[task.id] = (call.call_id, exception)
        return _chain(pending, self.put_writes(task.id, writes))

    def _settle_failed_calls(self, parent: PregelExecutableTask, exc: BaseException | None) -> Any:
        """When a task ends, the failures of the calls it made and did not end
        with are recorded as handled: a resume raises them again instead of
        running those calls again. The ones it ended with stay retryable."""
        if not self._failed_calls:
            return None
        with self._failed_lock:
            failed = self._failed_calls.pop(parent.id, None)
        if not failed:
            return None
        # an interrupt raised in an ``except`` block ends nothing: it is a pause
        ended_with = exception_chain(None if isinstance(exc, GraphBubbleUp) else exc)
        pending = None
        for child_id, (identity, child_exc) in failed.items():
            if id(child_exc) in ended_with:
                continue
            record = encode_failure(identity, child_exc, handled=True)
            self.remember(child_id, [(CALL, record)])  # a later attempt of the caller replays it
            pending = _chain(pending, self.put_writes(child_id, [(CALL, record)]))
        return pending

    # running one task: the decisions, then a sync and an async performer
    def _admit(self, task: PregelExecutableTask) -> Attempt | None:
        """Refuse to start ``task`` once a save of the run failed, or when the
        body that scheduled it has since timed out; else the attempt it hangs
        from (its fence: a result that lands after it died is never written)."""
        self.check_saved()
        fence: Attempt | None = task.scope.attempt
        if fence is not None and fence.is_dead():
            raise fence.refusal()
        return fence

    def _ended(self, task: PregelExecutableTask) -> None:
        """A task returned: a replay that dropped a recorded call is a
        mismatch like a changed one (the run saves nothing from then on)."""
        try:
            self.ended_calls(task, task.scope.call_counter)
        except NondeterminismError as exc:
            if self.poisoned is None:
                self.poisoned = exc
            raise

    def _run_and_commit(self, task: PregelExecutableTask) -> Any:
        fence = self._admit(task)
        try:
            value = run_with_retry(
                task, self.retry_policy, self._settle_failed_calls, self.attempts
            )
            self._ended(task)
        except BaseException as exc:
            self.commit(task, exc, fence)
            raise
        finally:
            task.scope = None  # task <-> scope is a cycle; break it once the task is over
        self.commit(task, None, fence)
        return value

    async def _arun_and_commit(self, task: PregelExecutableTask) -> Any:
        fence = self._admit(task)
        try:
            value = await arun_with_retry(
                task, self.retry_policy, self._settle_failed_calls, self.attempts
            )
            self._ended(task)
        except BaseException as exc:
            if (pending := self.commit(task, exc, fence)) is not None:
                await pending
            raise
        finally:
            task.scope = None
        if (pending := self.commit(task, None, fence)) is not None:
            await pending
        return value

    # functional-API task calls
    def call(self, parent: PregelExecutableTask, call: Call) -> AnyFuture:
        """Schedule a task call made by ``parent``; return its future.

        A call whose result was saved (a replay) or cached returns a finished
        future without running or saving anything again.
        """
        assert self.schedule_task is not None and self.futures is not None
        scope = parent.scope
        attempt: Attempt | None = scope.attempt
        if attempt is not None:
            if attempt.is_dead():
                raise attempt.refusal()  # the caller's attempt timed out: it starts nothing
            attempt.progress()
        idx = scope.call_counter  # ``next_call_index``, inline: once per call
        scope.call_counter = idx + 1
        if self.records:
            call.call_id = call_identity(call.name, call.args, call.kwargs)
        try:
            task = self.schedule_task(parent, idx, call)
        except NondeterminismError as exc:
            if self.poisoned is None:
                self.poisoned = exc
            raise
        if isinstance(task, list):
            return self._finished(task)
        if task is None:
            raise RuntimeError(f"could not schedule task {call.name!r}")
        if task.writes:
            return self._finished(task.writes)
        if parent.retry_policy or self.retry_policy:
            self._kept_for_retry.add(task.id)
        if attempt is not None:
            task.scope.attempt = attempt
        fut: AnyFuture
        first = None if task.cache_key is None else self.running.first(task)
        if task.cache_key is not None and self.alookup is not None:
            fut = self.submit(
                self._alookup_and_run, task, first, __next_tick__=True, __reraise_on_exit__=False
            )
        elif first is not None:
            fut = self.submit(
                self._twin, self, task, *first, __next_tick__=True, __reraise_on_exit__=False
            )
        else:
            fut = self.submit(
                self._perform, self, task, __next_tick__=True, __reraise_on_exit__=False
            )
        if first is None and task.cache_key is not None:
            self.running.track(task, fut)
        self.futures[fut] = task
        return fut

    def patch_marker(
        self, parent: PregelExecutableTask, patch_id: str, *, deprecated: bool
    ) -> bool:
        """Decide a ``patched(patch_id)`` check made by ``parent`` (see ``func.patched``).

        The marker takes a position in the call sequence: recorded there, the
        run took the new code path before; another call recorded there, the
        run was recorded before the patch; nothing recorded, the run gets
        there first under the new code and records the marker.
        """
        scope = parent.scope
        idx = scope.call_counter
        task_id, recorded = self.recorded_call(parent, idx)
        marker = PATCH_PREFIX + patch_id
        if recorded == marker:
            scope.call_counter = idx + 1
            return True
        if recorded is not None:
            return deprecated
        if not deprecated and self.poisoned is None:
            scope.call_counter = idx + 1
            self.put_writes(task_id, [(CALL, marker)])
        return True

    def _took_twin(self, task: PregelExecutableTask, first_task: PregelExecutableTask) -> Any:
        """``task`` takes the result of the call it duplicates, as a cache hit;
        None, or the save to await."""
        task.scope = None
        task.writes.extend(first_task.writes)
        if self.attempts is not None:
            self.attempts.instant(task, "cached")
        return self.commit(task, None)

    def _run_twin(
        self, task: PregelExecutableTask, first: AnyFuture, first_task: PregelExecutableTask
    ) -> Any:
        """Wait for the running call ``task`` duplicates and take its result."""
        try:
            value = first.result()
        except Exception:  # a failure is not cached: this call runs on its own
            return self._run_and_commit(task)
        self._took_twin(task, first_task)
        return value

    async def _arun_twin(
        self, task: PregelExecutableTask, first: AnyFuture, first_task: PregelExecutableTask
    ) -> Any:
        import asyncio
        import concurrent.futures

        try:
            if isinstance(first, concurrent.futures.Future):
                value = await asyncio.wrap_future(first)
            else:
                value = await asyncio.shield(first)
        except Exception:  # a failure is not cached: this call runs on its own
            return await self._arun_and_commit(task)
        if (pending := self._took_twin(task, first_task)) is not None:
            await pending
        return value

    async def _alookup_and_run(
        self,
        task: PregelExecutableTask,
        first: tuple[AnyFuture, PregelExecutableTask] | None,
    ) -> Any:
        """An async run's cached call: read the cache without blocking the
        event loop, then run the call (or take its running twin's result)
        only on a miss."""
        assert self.alookup is not None
        if await self.alookup(task):
            task.scope = None
            value, failure = _outcome(task.writes)
            if failure is not None:
                raise failure
            return value
        if first is not None:
            return await self._arun_twin(task, *first)
        return await self._arun_and_commit(task)

    def _finished(self, writes: Sequence[tuple[str, Any]]) -> AnyFuture:
        if len(writes) == 1 and writes[0][0] == RETURN:  # a replayed return, the common case
            value, failure = writes[0][1], None
        else:
            value, failure = _outcome(writes)
        if self.is_async and self.loop is not None and on_loop(self.loop):
            fut = self.loop.create_future()
            if failure is not None:
                fut.set_exception(failure)
            else:
                fut.set_result(value)
            return fut
        done = _DONE
        if done is None:
            done = _done_class()
        return done(value, failure)

    # a step: the plan decides, ``tick`` and ``atick`` perform its effects
    def _step(
        self, tasks: Iterable[PregelExecutableTask], futures: FuturesDict, rules: StepRules
    ) -> Iterator[Effect]:
        """The plan of one step: which tasks run where, when to wait and for
        what, whom to cancel, what to raise. Yields ``None`` where the caller
        may take the output streamed so far, and the effects only a driver
        can perform: a task to run in the driver's thread or task (how it
        ended goes in ``futures.inline``), a ``_Wait`` and a ``_Join``.

        A lone task runs in the driver (no hand-off) unless the caller
        streams ``live``: then everything runs on the executor and the
        driver only relays output."""
        tasks = tuple(tasks)
        timeout = rules.timeout
        self.futures = futures
        self.schedule_task = rules.schedule_task
        self.retry_policy = rules.retry_policy
        self.timeouts = False
        yield None
        step, root = _fence(tasks, timeout)
        if len(tasks) == 1 and timeout is None and not rules.live:
            yield tasks[0]
            if self.timeouts:
                futures.drop_dead()
            if not futures:
                if self.poisoned is not None:
                    raise self.poisoned
                if futures.inline is not None:
                    panic_or_proceed((), futures.inline)
                _refuse_if_dead(root)
                return
        else:
            # a lone task takes no slot of ``max_concurrency``, as when it runs
            # in the driver: its calls share them, and a body that waits for
            # its calls together (``asyncio.gather``) while holding the only
            # slot would wait for ever
            limited = len(tasks) > 1
            for t in tasks:
                futures[self.submit(self._perform, self, t, __limited__=limited)] = t
        deadline = None if step is None else step.started + (timeout or 0.0)
        while futures.counter > 0 and not futures.failed:
            if self.timeouts:
                self.timeouts = False
                futures.drop_dead()
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            wait = _Wait(remaining)
            yield wait
            if not wait.woken:
                break
            yield None
        if self.timeouts:
            futures.drop_dead()
        if _stops_others(futures) and (running := _cancel_others(futures)):
            yield _Join(running, None if deadline is None else deadline - time.monotonic())
        yield None
        if self.poisoned is not None:
            raise self.poisoned
        _settle(futures, timeout=timeout, step=step)
        _refuse_if_dead(root)

    def tick(
        self,
        tasks: Iterable[PregelExecutableTask],
        rules: StepRules,
        wake: threading.Event | None = None,
    ) -> Iterator[None]:
        """Run ``tasks``; yields whenever there may be output to stream. This
        thread runs a lone task, and otherwise waits on a ``threading.Event``
        (``wake``, which the caller's stream sets too, when it streams live)."""
        event = wake or Wake()
        futures = FuturesDict(event.set)
        for effect in self._step(tasks, futures, rules):
            if effect is None:
                yield
            elif isinstance(effect, _Wait):
                effect.woken = event.wait(effect.seconds)
                event.clear()
            elif isinstance(effect, _Join):
                import concurrent.futures

                concurrent.futures.wait(
                    [f for f in effect.running if isinstance(f, concurrent.futures.Future)],
                    timeout=effect.seconds,
                )
            else:
                try:
                    self._run_and_commit(effect)
                except BaseException as exc:
                    futures.inline = exc

    async def atick(
        self,
        tasks: Iterable[PregelExecutableTask],
        rules: StepRules,
        wake: asyncio.Event | None = None,
    ) -> AsyncIterator[None]:
        """``tick`` on the event loop: this task awaits a lone task, and
        otherwise waits on an ``asyncio.Event`` that worker threads may set."""
        import asyncio
        import concurrent.futures

        loop = self.loop = asyncio.get_running_loop()
        event = wake or asyncio.Event()

        def wake_up() -> None:
            if on_loop(loop):
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)

        futures = FuturesDict(wake_up)
        for effect in self._step(tasks, futures, rules):
            if effect is None:
                yield
            elif isinstance(effect, _Wait):
                try:
                    await asyncio.wait_for(event.wait(), effect.seconds)
                except TimeoutError:
                    continue  # not woken
                effect.woken = True
                event.clear()
            elif isinstance(effect, _Join):
                await asyncio.wait(
                    [
                        asyncio.wrap_future(f) if isinstance(f, concurrent.futures.Future) else f
                        for f in effect.running
                    ],
                    timeout=effect.seconds,
                )
            else:
                try:
                    await self._arun_and_commit(effect)
                except BaseException as exc:
                    futures.inline = exc


class _Wait:
    """Effect: wait until woken (a task finished or failed, an attempt timed
    out), at most ``seconds`` (None: no limit); whether woken goes back in
    ``woken``."""

    __slots__ = ("seconds", "woken")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.woken = False


class _Join:
    """Effect: wait, at most ``seconds``, for the tasks still running after
    the step's others were cancelled (a failure stops the step)."""

    __slots__ = ("running", "seconds")

    def __init__(self, running: list[AnyFuture], seconds: float | None) -> None:
        self.running = running
        self.seconds = None if seconds is None else max(seconds, 0.0)


Effect = Union[PregelExecutableTask, _Wait, _Join, None]


_DONE: Callable[[Any, BaseException | None], AnyFuture] | None = None
"""``executor.Done``, kept once a run has a replayed or cached call: an
import statement per call cost a replayed call ~3% of its time."""


def _done_class() -> Callable[[Any, BaseException | None], AnyFuture]:
    # the pool's module: loaded by then, as a run that replays saves
    import pregelkit.pregel._exec.executor as executor

    global _DONE
    _DONE = executor.Done
    return _DONE


def _outcome(writes: Iterable[tuple[str, Any]]) -> tuple[Any, BaseException | None]:
    """The value, or the failure, that a call's saved or cached writes hold
    (or the live failure a replay check stops a call with: saved writes of
    a call never hold ``ERROR``)."""
    value = None
    failure: BaseException | None = None
    for chan, v in writes:
        if chan == RETURN:
            value = v
        elif chan == CALL and is_failure(v):
            failure = rebuild_failure(v)
        elif chan == ERROR:
            failure = v
    return value, failure


def _fence(
    tasks: Sequence[PregelExecutableTask], timeout: float | None
) -> tuple[Attempt | None, Attempt | None]:
    """What the step's tasks hang from: the step itself when ``step_timeout`` bounds
    it, and the attempt of the enclosing task when this graph runs nested in one.
    Returns (the step's own attempt, the root the tasks hang from)."""
    outer = CURRENT.get()
    root: Attempt | None = outer.attempt if outer is not None else None
    step = None
    if timeout is not None:
        root = step = step_attempt(timeout, root)
    if root is not None:
        for t in tasks:
            if t.scope is not None:
                t.scope.attempt = root
    return step, root


def _refuse_if_dead(root: Attempt | None) -> None:
    """A graph nested in a body that timed out must not apply or save the step
    that just ended: its results are as late as the body's own."""
    if root is not None and root.is_dead():
        raise root.refusal()


def _chain(first: Any, second: Any) -> Any:
    """Two saver calls' results as one: None, or something to await."""
    if first is None:
        return second
    if second is None:
        return first
    return _Both(first, second)


class _Both:
    __slots__ = ("first", "second")

    def __init__(self, first: Awaitable[Any], second: Awaitable[Any]) -> None:
        self.first = first
        self.second = second

    def __await__(self) -> Any:
        yield from self.first.__await__()
        return (yield from self.second.__await__())


def _stops_others(futures: FuturesDict) -> bool:
    """A real failure (not an interrupt, not a task call's own) stops the step."""
    inline = futures.inline
    return futures.failed or (inline is not None and not isinstance(inline, GraphBubbleUp))


def _cancel_others(futures: FuturesDict) -> list[AnyFuture]:
    """Cancel what has not started; return what is still running, to wait for."""
    running = []
    for fut in list(futures):
        if not fut.done() and not futures.is_call(fut):
            fut.cancel()
        if not fut.done():
            running.append(fut)
    return running


def _settle(
    futures: FuturesDict,
    *,
    timeout: float | None,
    step: Attempt | None,
) -> None:
    """End the step: raise its failure or its interrupts, or say it timed out.

    Tasks still running when ``step_timeout`` passed are walked away from:
    what finished in time is saved, they are not, and a resume runs them."""
    if step is None:
        panic_or_proceed(list(futures.done), futures.inline, futures.is_call)
        return
    running = futures.drop_all()
    failed = list(futures.done)
    late = [f for f in failed if _step_timeout(exception_of(f))]
    running = sorted({*running, *(futures[f].name for f in late)})
    panic_or_proceed([f for f in failed if f not in late], futures.inline, futures.is_call)
    if running or step.dead:
        raise step_error(step, running)


def _step_timeout(exc: BaseException | None) -> bool:
    return isinstance(exc, NodeTimeoutError) and exc.kind == "step"
