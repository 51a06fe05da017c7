"""Bounded attempts: a task attempt with a deadline, and what walking away means.

A task with a ``TimeoutPolicy`` (or any task of a step with ``step_timeout``)
runs each attempt on a copy of itself, in a thread of its own (sync) or an
asyncio task of its own (async), while the thread that owns the task waits
with a deadline. When the deadline passes, the waiter marks the attempt dead
and raises ``NodeTimeoutError``; the body may go on running (a sync body
cannot be stopped), but everything it could still do is fenced off: its
writes land on the copy that nobody commits, its stream chunks are dropped,
its task calls are refused, and the commits of the calls it already made
are dropped. Deadness is inherited: an attempt's ``parent`` is the attempt
(or step) that made the call, so killing a step kills everything under it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from pregelkit.errors import NodeTimeoutError
from pregelkit.pregel._graph.scope import TaskScope
from pregelkit.types import TimeoutPolicy

if TYPE_CHECKING:
    import asyncio

    from pregelkit.pregel._exec.executor import Detached
    from pregelkit.types import PregelExecutableTask

__all__ = ["Attempt", "abound", "bound", "in_thread", "is_bounded", "step_attempt", "step_error"]

_monotonic = time.monotonic


class Attempt:
    """One attempt of a task under a deadline; or, with no task, a whole step."""

    __slots__ = (
        "_step",
        "auto",
        "dead",
        "error",
        "last_beat",
        "name",
        "parent",
        "policy",
        "started",
    )

    def __init__(
        self, name: str, policy: TimeoutPolicy | None, parent: Attempt | None, *, step: bool = False
    ) -> None:
        self.name = name
        self.policy = policy
        self.parent = parent
        self.started = self.last_beat = _monotonic()
        self.auto = policy is not None and policy.refresh_on == "auto"
        self.dead = False
        self.error: NodeTimeoutError | None = None
        self._step = step

    def is_dead(self) -> bool:
        a: Attempt | None = self
        while a is not None:
            if a.dead:
                return True
            a = a.parent
        return False

    def heartbeat(self) -> None:
        """Progress: restart the idle clock of this attempt and of those above it."""
        now = _monotonic()
        a: Attempt | None = self
        while a is not None:
            a.last_beat = now
            a = a.parent

    def progress(self) -> None:
        """A streamed write or a task call: a heartbeat for ``refresh_on="auto"``."""
        now = _monotonic()
        a: Attempt | None = self
        while a is not None:
            if a.auto:
                a.last_beat = now
            a = a.parent

    def _own_expiry(self) -> tuple[float, str, float] | None:
        """(when, kind, limit) of this attempt's nearest limit."""
        policy = self.policy
        if policy is None:
            return None
        best: tuple[float, str, float] | None = None
        if policy.run_timeout is not None:
            best = (self.started + policy.run_timeout, "run", policy.run_timeout)
        if policy.idle_timeout is not None:
            idle = (self.last_beat + policy.idle_timeout, "idle", policy.idle_timeout)
            if best is None or idle[0] < best[0]:
                best = idle
        return best

    def expiry(self) -> tuple[float, Attempt, str, float] | None:
        """The nearest limit over this attempt and those above it."""
        best: tuple[float, Attempt, str, float] | None = None
        a: Attempt | None = self
        while a is not None:
            own = a._own_expiry()
            if own is not None and (best is None or own[0] < best[0]):
                best = (own[0], a, own[1], own[2])
            a = a.parent
        return best

    def remaining(self) -> float | None:
        exp = self.expiry()
        return None if exp is None else exp[0] - _monotonic()

    def expired(self) -> NodeTimeoutError | None:
        """The error to raise if a limit has passed (killing this attempt), else None."""
        exp = self.expiry()
        if exp is None:
            return None
        when, owner, kind, limit = exp
        now = _monotonic()
        if now < when:
            return None
        error = owner.timeout_error(kind, limit, now)
        owner.kill(error)
        self.kill(error)
        return self.error

    def timeout_error(self, kind: str, limit: float, now: float) -> NodeTimeoutError:
        if self.error is not None:
            return self.error
        policy = self.policy
        if self._step:
            kind = "step"
        return NodeTimeoutError(
            self.name,
            now - self.started,
            kind=kind,  # type: ignore[arg-type]
            timeout=limit,
            run_timeout=policy.run_timeout if policy is not None else None,
            idle_timeout=policy.idle_timeout if policy is not None else None,
        )

    def kill(self, error: NodeTimeoutError | None = None) -> None:
        """Walk away: from now on nothing this attempt (or what it started) does is kept."""
        if self.error is None:
            self.error = error
        self.dead = True

    def refusal(self) -> Exception:
        """What a body still running after its attempt was abandoned gets when it
        tries to do more (call a task): the timeout that stopped it."""
        a: Attempt | None = self
        while a is not None:
            if a.dead and a.error is not None:
                return a.error
            a = a.parent
        return RuntimeError(f"{self.name!r} was stopped: it can start nothing more")


def step_attempt(timeout: float, parent: Attempt | None) -> Attempt:
    """The root of a step bounded by ``step_timeout``: every task of the step hangs from it."""
    policy = TimeoutPolicy(run_timeout=timeout)
    step = Attempt("step", policy, parent, step=True)
    step.auto = False
    return step


def step_error(step: Attempt, running: list[str]) -> NodeTimeoutError:
    """Kill ``step`` for its timeout; the error names the tasks still running."""
    assert step.policy is not None and step.policy.run_timeout is not None
    err = NodeTimeoutError(
        str(running),
        _monotonic() - step.started,
        kind="step",
        timeout=step.policy.run_timeout,
        run_timeout=step.policy.run_timeout,
    )
    step.kill(err)
    return err


def is_bounded(task: PregelExecutableTask) -> bool:
    """Whether ``task``'s attempts run bounded: it has a ``TimeoutPolicy``, or it
    is a task of a step with ``step_timeout``. (Calls made by a bounded attempt
    are not bounded themselves: they are fenced by their caller's attempt.)"""
    if task.timeout is not None or getattr(task.proc, "timeout", None) is not None:
        return True
    scope = task.scope
    return scope is not None and scope.attempt is not None and bool(scope.attempt._step)


def _policy(task: PregelExecutableTask) -> TimeoutPolicy | None:
    """The task's own bound (``Send(timeout=...)``), else its node's or call's."""
    if task.timeout is not None:
        return task.timeout
    policy: TimeoutPolicy | None = getattr(task.proc, "timeout", None)
    return policy


def _start(task: PregelExecutableTask) -> tuple[Attempt, PregelExecutableTask]:
    """A fresh attempt and the copy of ``task`` it runs on."""
    scope = task.scope
    attempt = Attempt(task.name, _policy(task), scope.attempt)
    # field by field: copy.copy of a dataclass costs ~20 us, this ~1 us
    twin = object.__new__(type(task))
    twin.__dict__.update(task.__dict__)
    twin.writes = deque()
    twin_scope = object.__new__(type(scope))
    for name in _SCOPE_SLOTS:
        setattr(twin_scope, name, getattr(scope, name))
    twin_scope.task = twin
    twin_scope.resume = list(scope.resume)
    twin_scope.attempt = attempt
    twin.scope = twin_scope
    return attempt, twin


_SCOPE_SLOTS = TaskScope.__slots__


def _adopt(task: PregelExecutableTask, twin: PregelExecutableTask) -> None:
    """The attempt ended in time: what it did is the task's."""
    task.writes.extend(twin.writes)
    scope, twin_scope = task.scope, twin.scope
    scope.call_counter = twin_scope.call_counter
    scope.interrupt_counter = twin_scope.interrupt_counter
    scope.resume = twin_scope.resume
    scope.call_prefix = twin_scope.call_prefix


def _timed_out(task: PregelExecutableTask, error: NodeTimeoutError) -> NodeTimeoutError:
    runner = task.scope.run.runner
    if runner is not None:
        runner.timed_out()
    return error


def bound(task: PregelExecutableTask, run: Any) -> Any:
    """``run(copy)`` in a thread of its own; wait for it until the deadline."""
    attempt, twin = _start(task)
    import pregelkit.pregel._exec.executor as executor  # the pool: loaded when needed

    handle: Detached = executor.detach(run, twin)
    wait = handle.wait
    try:
        while not wait(attempt.remaining()):
            error = attempt.expired()
            if error is not None:
                raise _timed_out(task, error)
    except BaseException:
        attempt.kill()  # a timeout, or Ctrl-C while waiting: the body is on its own now
        raise
    _adopt(task, twin)
    if handle.exc is not None:
        raise handle.exc
    return handle.result


async def abound(task: PregelExecutableTask, run: Any) -> Any:
    """``await run(copy)`` as an asyncio task of its own, cancelled at the deadline."""
    import asyncio

    attempt, twin = _start(task)
    inner: asyncio.Task[Any] = asyncio.ensure_future(run(twin))
    try:
        while not inner.done():
            left = attempt.remaining()
            await asyncio.wait((inner,), timeout=None if left is None else max(left, 0.0))
            if inner.done():
                break
            error = attempt.expired()
            if error is not None:
                inner.cancel()
                inner.add_done_callback(_consume)
                raise _timed_out(task, error)
    finally:
        if not inner.done():  # the task itself was cancelled (its step timed out, or failed)
            attempt.kill()
            inner.cancel()
            inner.add_done_callback(_consume)
    _adopt(task, twin)
    return inner.result()


def _consume(fut: asyncio.Future[Any]) -> None:
    """An abandoned attempt's outcome is nobody's: do not log it as unretrieved."""
    if not fut.cancelled():
        fut.exception()


async def in_thread(fn: Any, *args: Any) -> Any:
    """A sync step of a bounded async task: on a daemon thread, never on the
    loop's default executor, which an abandoned body would occupy and which
    ``asyncio.run`` waits for on exit."""
    import asyncio

    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(handle: Detached) -> None:
        if fut.done():
            return
        if handle.exc is not None:
            fut.set_exception(handle.exc)
        else:
            fut.set_result(handle.result)

    def done(handle: Detached) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, handle)

    import pregelkit.pregel._exec.executor as executor

    executor.detach(fn, *args, on_done=done)
    return await fut
