"""One task, many attempts: run a task, retrying per its policies.

The decision (which policy, how long to wait) is one function; the sync and
async drivers differ only in how they call the task and how they sleep.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from pregelkit._internal._clock import clock
from pregelkit._internal._current import CURRENT
from pregelkit.errors import GraphBubbleUp, NodeTimeoutError, ParentCommand
from pregelkit.pregel._exec.attempt import arun_task, run_task
from pregelkit.pregel._exec.recorder import AttemptRecorder
from pregelkit.pregel._exec.timeout import abound, bound, is_bounded
from pregelkit.types import Command, PregelExecutableTask, RetryPolicy

__all__ = ["arun_with_retry", "next_retry_delay", "run_with_retry"]

SUPPORTS_EXC_NOTES = sys.version_info >= (3, 11)


def _matches(policy: RetryPolicy, exc: Exception) -> bool:
    retry_on = policy.retry_on
    if isinstance(retry_on, type):
        return isinstance(exc, retry_on)
    if isinstance(retry_on, Sequence):
        return isinstance(exc, tuple(retry_on))
    if callable(retry_on):
        try:
            return bool(retry_on(exc))
        except Exception as broken:
            name = getattr(retry_on, "__qualname__", None) or repr(retry_on)
            raise RuntimeError(
                f"RetryPolicy(retry_on={name}) raised {type(broken).__name__}: {broken} "
                f"while deciding whether to retry {type(exc).__name__}: {exc}; fix the "
                "predicate (the task's own error is chained below)"
            ) from exc
    raise TypeError(f"RetryPolicy.retry_on must be a type, types or a predicate, got {retry_on!r}")


def next_retry_delay(
    policies: Sequence[RetryPolicy], exc: Exception, attempts: int
) -> float | None:
    """Seconds to wait before attempt ``attempts + 1``, or None to give up.

    The first policy whose ``retry_on`` matches decides; its backoff grows
    exponentially from ``initial_interval``, capped at ``max_interval``.
    """
    for policy in policies:
        if _matches(policy, exc):
            if attempts >= policy.max_attempts:
                return None
            interval = min(
                policy.max_interval,
                policy.initial_interval * policy.backoff_factor ** (attempts - 1),
            )
            if not policy.jitter:
                return interval
            import random  # a retry's jitter only: no run pays its import

            return interval + random.uniform(0, 1)
    return None


def _note(task: PregelExecutableTask, exc: BaseException) -> None:
    if SUPPORTS_EXC_NOTES:
        note = f"During task with name '{task.name}' and id '{task.id}'"
        if note not in getattr(exc, "__notes__", ()):
            exc.add_note(note)


def _retrying(task: PregelExecutableTask, exc: Exception, attempts: int, delay: float) -> None:
    """Say on the ``pregelkit.pregel._retry`` logger (INFO) that an attempt
    failed and another follows, as LangGraph does: a log shows why a run took
    longer, and ``pregelkit run`` counts retries on its progress line from it.
    Only failed attempts get here; ``logging`` loads on the first one."""
    import logging

    logger = logging.getLogger("pregelkit.pregel._retry")
    if logger.isEnabledFor(logging.INFO):
        logger.info(
            "Retrying task %s after %.2f seconds (attempt %d) after %s %s",
            task.name,
            delay,
            attempts,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )


def _parent_command_writes(task: PregelExecutableTask, exc: ParentCommand) -> bool:
    """Apply a Command bubbled up from a subgraph addressed to this graph."""
    from pregelkit.pregel._graph.writes import control_writes

    cmd = exc.args[0]
    if cmd.graph != Command.PARENT or CURRENT.get() is not None:
        return False
    writes = control_writes(Command(update=cmd.update, goto=cmd.goto, resume=cmd.resume))
    task.writes.extend(writes or ())
    return True


def _begin(
    task: PregelExecutableTask, number: int, retries: bool, events: AttemptRecorder | None
) -> Any:
    """Start attempt ``number``; returns what ``events`` wants back when it ends.

    Each attempt numbers its task calls and interrupts from zero again, so
    an attempt replays the calls that finished in earlier ones. The scope
    notes which attempt this is (``runtime.execution_info`` shows it) and,
    for a task that may be retried, when the first one started; a task that
    cannot be retried pays nothing for the clock (its runtime reads it when
    asked)."""
    token = None if events is None else events.started(task, number)
    task.writes.clear()
    scope = task.scope
    if scope is not None:
        scope.call_counter = 0
        scope.interrupt_counter = 0
        scope.attempt_number = number
        if retries and number == 1:
            scope.first_attempt_time = time.time()
    return token


def _ended(
    events: AttemptRecorder | None,
    task: PregelExecutableTask,
    token: Any,
    exc: BaseException | None,
    retrying: bool,
) -> None:
    if events is not None and (retrying or events.hooks is not None):
        events.ended(task, token, exc, retrying)


def _gives_up(exc: Exception) -> bool:
    """A step that ran out of time is over: nothing of it is retried."""
    return isinstance(exc, NodeTimeoutError) and exc.kind == "step"


def _after_failure(
    task: PregelExecutableTask,
    exc: BaseException,
    attempts: int,
    policies: Sequence[RetryPolicy],
    events: AttemptRecorder | None,
    token: Any,
) -> float | None:
    """The decision after attempt ``attempts`` raised ``exc``: the seconds to
    wait before the next attempt, or None when the task ends with ``exc``
    (control flow, Ctrl-C, or no policy retries it). Tells ``events`` how
    the attempt ended either way."""
    if isinstance(exc, ParentCommand):
        _ended(events, task, token, None, False)
        return None
    if isinstance(exc, GraphBubbleUp) or not isinstance(exc, Exception):
        _ended(events, task, token, exc, False)
        return None
    delay = next_retry_delay(policies, exc, attempts) if policies else None
    retrying = delay is not None and not _gives_up(exc)
    _ended(events, task, token, exc, retrying)
    if delay is None or not retrying:
        _note(task, exc)
        return None
    _retrying(task, exc, attempts, delay)
    return delay


def _ends_here(task: PregelExecutableTask, exc: BaseException) -> bool:
    """Whether ``exc`` is a ``Command`` for this graph, applied as the task's
    writes: the task then ends well, with None."""
    return isinstance(exc, ParentCommand) and _parent_command_writes(task, exc)


def _plan(
    task: PregelExecutableTask,
    retry_policy: Sequence[RetryPolicy] | None,
    local: Callable[..., Any],
    aio: bool,
    bounder: Callable[..., Any],
) -> tuple[Callable[[PregelExecutableTask], Any], Sequence[RetryPolicy]]:
    """What runs each attempt of ``task``, and the policies that retry it.

    An attempt runs ``local``ly, or remotely on the graph's executor when
    the task ships (``_exec.remote``, loaded only for a graph with one: ``aio``
    picks its awaitable twin); under ``bounder`` (a thread or asyncio task of its own,
    waited for with a deadline) when it is bounded (a ``TimeoutPolicy``, or a
    step with ``step_timeout``). The task's own policies win over the graph's."""
    run = local
    scope = task.scope
    executor = scope.run.executor if scope is not None else None
    if executor is not None:
        import pregelkit.pregel._exec.remote as remote

        if remote.ships(task):
            body = remote.arun_remote if aio else remote.run_remote
            run = functools.partial(body, executor=executor)
    if is_bounded(task):
        run = functools.partial(bounder, run=run)
    return run, task.retry_policy or retry_policy or ()


def run_with_retry(
    task: PregelExecutableTask,
    retry_policy: Sequence[RetryPolicy] | None = None,
    attempt_failed: Callable[[PregelExecutableTask, BaseException], Any] | None = None,
    events: AttemptRecorder | None = None,
) -> Any:
    """Run ``task`` until it succeeds or its retry policies give up.

    ``attempt_failed`` hears of each failed attempt before the next one starts
    (the runner records which of the task's calls it handled); ``events``
    hears each attempt start and end (timelines, tracing). The decisions are
    ``_plan`` and ``_after_failure``; this thread calls and sleeps."""
    run, policies = _plan(task, retry_policy, run_task, False, bound)
    number = 1
    while True:
        token = _begin(task, number, bool(policies), events)
        try:
            value = run(task)
        except BaseException as exc:
            if (delay := _after_failure(task, exc, number, policies, events, token)) is None:
                if _ends_here(task, exc):
                    return None
                raise
            if attempt_failed is not None:
                attempt_failed(task, exc)
            time.sleep(clock().backoff(delay))  # a test's clock skips it
            number += 1
        else:
            if events is not None and events.hooks is not None:  # _ended, inline: per task
                events.ended(task, token, None, False)
            return value


async def arun_with_retry(
    task: PregelExecutableTask,
    retry_policy: Sequence[RetryPolicy] | None = None,
    attempt_failed: Callable[[PregelExecutableTask, BaseException], Any] | None = None,
    events: AttemptRecorder | None = None,
) -> Any:
    """``run_with_retry`` on the event loop: the attempt and the pause are awaited."""
    arun, policies = _plan(task, retry_policy, arun_task, True, abound)
    number = 1
    while True:
        token = _begin(task, number, bool(policies), events)
        try:
            value = await arun(task)
        except BaseException as exc:
            if (delay := _after_failure(task, exc, number, policies, events, token)) is None:
                if _ends_here(task, exc):
                    return None
                raise
            if attempt_failed is not None and (pending := attempt_failed(task, exc)) is not None:
                await pending
            import asyncio  # a retry's pause only: not a statement per task

            await asyncio.sleep(clock().backoff(delay))
            number += 1
        else:
            if events is not None and events.hooks is not None:  # _ended, inline: per task
                events.ended(task, token, None, False)
            return value
