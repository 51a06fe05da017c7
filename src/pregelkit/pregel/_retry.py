"""One task, many attempts: run a task, retrying per its policies.

The decision (which policy, how long to wait) is one function; the sync and
async drivers differ only in how they call the task and how they sleep.
"""

from __future__ import annotations

import functools
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit._internal._scope import CURRENT
from pregelkit.errors import GraphBubbleUp, NodeTimeoutError, ParentCommand
from pregelkit.pregel._attempts import AttemptEvents
from pregelkit.pregel._remote import arun_remote, run_remote, ships
from pregelkit.pregel._run import arun_task, run_task
from pregelkit.pregel._timeout import abound, bound, is_bounded
from pregelkit.types import Command, PregelExecutableTask, RetryPolicy

if TYPE_CHECKING:
    pass

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
            return interval + random.uniform(0, 1) if policy.jitter else interval
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

    logger = logging.getLogger(__name__)
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
    from pregelkit.pregel._write import control_writes

    cmd = exc.args[0]
    if cmd.graph != Command.PARENT or CURRENT.get() is not None:
        return False
    writes = control_writes(Command(update=cmd.update, goto=cmd.goto, resume=cmd.resume))
    task.writes.extend(writes or ())
    return True


def _fresh_attempt(task: PregelExecutableTask, number: int, retries: bool) -> None:
    """Each attempt numbers its task calls and interrupts from zero again, so
    an attempt replays the calls that finished in earlier ones. The scope
    notes which attempt this is (``runtime.execution_info`` shows it) and,
    for a task that may be retried, when the first one started; a task that
    cannot be retried pays nothing for the clock (its runtime reads it when
    asked)."""
    task.writes.clear()
    scope = task.scope
    if scope is not None:
        scope.call_counter = 0
        scope.interrupt_counter = 0
        scope.attempt_number = number
        if retries and number == 1:
            scope.first_attempt_time = time.time()


def _ended(
    events: AttemptEvents | None,
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


def run_with_retry(
    task: PregelExecutableTask,
    retry_policy: Sequence[RetryPolicy] | None = None,
    attempt_failed: Callable[[PregelExecutableTask, BaseException], Any] | None = None,
    events: AttemptEvents | None = None,
) -> Any:
    """Run ``task`` until it succeeds or its retry policies give up.

    ``attempt_failed`` hears of each failed attempt before the next one starts
    (the runner records which of the task's calls it handled); ``events``
    hears each attempt start and end (timelines, tracing).

    A bounded task (a ``TimeoutPolicy``, or a step with ``step_timeout``)
    runs each attempt in a thread of its own; a timed-out attempt is a failed
    attempt like any other."""
    policies = task.retry_policy or retry_policy or ()
    bounded = is_bounded(task)
    run: Callable[[PregelExecutableTask], Any] = run_task
    executor = task.scope.run.executor if task.scope is not None else None
    if executor is not None and ships(task):
        run = functools.partial(run_remote, executor=executor)

    attempts = 0
    while True:
        token = None if events is None else events.started(task, attempts + 1)
        try:
            _fresh_attempt(task, attempts + 1, bool(policies))
            value = bound(task, run) if bounded else run(task)
        except ParentCommand as exc:
            _ended(events, task, token, None, False)
            if _parent_command_writes(task, exc):
                return None
            raise
        except GraphBubbleUp as exc:
            _ended(events, task, token, exc, False)
            raise
        except BaseException as exc:
            if not isinstance(exc, Exception):
                _ended(events, task, token, exc, False)
                raise
            attempts += 1
            delay = next_retry_delay(policies, exc, attempts) if policies else None
            retrying = delay is not None and not _gives_up(exc)
            _ended(events, task, token, exc, retrying)
            if delay is None or not retrying:
                _note(task, exc)
                raise
            _retrying(task, exc, attempts, delay)
            if attempt_failed is not None:
                attempt_failed(task, exc)
            time.sleep(delay)
        else:
            if events is not None and events.hooks is not None:  # _ended, inline: per task
                events.ended(task, token, None, False)
            return value


async def arun_with_retry(
    task: PregelExecutableTask,
    retry_policy: Sequence[RetryPolicy] | None = None,
    attempt_failed: Callable[[PregelExecutableTask, BaseException], Any] | None = None,
    events: AttemptEvents | None = None,
) -> Any:
    """The async twin of ``run_with_retry``."""
    import asyncio

    policies = task.retry_policy or retry_policy or ()
    bounded = is_bounded(task)
    arun: Callable[[PregelExecutableTask], Any] = arun_task
    executor = task.scope.run.executor if task.scope is not None else None
    if executor is not None and ships(task):
        arun = functools.partial(arun_remote, executor=executor)

    attempts = 0
    while True:
        token = None if events is None else events.started(task, attempts + 1)
        try:
            _fresh_attempt(task, attempts + 1, bool(policies))
            value = await (abound(task, arun) if bounded else arun(task))
        except ParentCommand as exc:
            _ended(events, task, token, None, False)
            if _parent_command_writes(task, exc):
                return None
            raise
        except GraphBubbleUp as exc:
            _ended(events, task, token, exc, False)
            raise
        except BaseException as exc:
            if not isinstance(exc, Exception):
                _ended(events, task, token, exc, False)
                raise
            attempts += 1
            delay = next_retry_delay(policies, exc, attempts) if policies else None
            retrying = delay is not None and not _gives_up(exc)
            _ended(events, task, token, exc, retrying)
            if delay is None or not retrying:
                _note(task, exc)
                raise
            _retrying(task, exc, attempts, delay)
            if attempt_failed is not None and (pending := attempt_failed(task, exc)) is not None:
                await pending
            await asyncio.sleep(delay)
        else:
            if events is not None and events.hooks is not None:  # _ended, inline: per task
                events.ended(task, token, None, False)
            return value
