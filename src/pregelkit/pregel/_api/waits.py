"""Durable waits (``pregelkit.durable``): what a task that waits does.

Every primitive is first a *recorded call* of the calling task, an internal
task call whose result is saved like any task's: the wake time of a sleep,
the key a ``recv`` takes its message under, the thread of a child. A replay
gets the record back, so a wait is never started twice and a message never
taken twice.

The wait itself is decided once (:func:`wait_for`, a generator of effects)
and driven by :func:`block` (threads) or :func:`ablock` (asyncio):

- in-process (``invoke``): the task waits where it is, on the monotonic
  clock, looking at the run's stop between slices (a cancel, a drain or
  Ctrl-C ends the wait as they end a task call);
- on a worker (the run holds a lease): a wait longer than ``SUSPEND_AFTER``
  stops the run like a drain (``RunStop.suspend``): what it started finishes
  and is saved, the worker's slot is freed, and the queue row says when (or
  on what) a worker resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any

from pregelkit._internal._clock import clock
from pregelkit._internal._constants import CONF, CONFIG_KEY_REPLAY_CHECK, CONFIG_KEY_THREAD_ID
from pregelkit._internal._current import require_scope
from pregelkit._internal._ids import uuid6
from pregelkit.checkpoint import waits as queue_waits
from pregelkit.checkpoint._runqueue import lease_of
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.errors import LeaseLostError, RunSuspended
from pregelkit.pregel._exec.stop import SUSPENDED
from pregelkit.pregel._graph.call import Call, FnSpec
from pregelkit.pregel._graph.scope import TaskScope
from pregelkit.pregel._plan.replay import ReplayProbe

__all__ = [
    "SUSPEND_AFTER",
    "Pause",
    "Take",
    "ablock",
    "aparked",
    "arecord",
    "block",
    "parked",
    "record",
    "scope_for",
    "wait_for",
]

SUSPEND_AFTER = 1.0
"""A wait on a worker longer than this (seconds) frees the worker's slot;
a shorter one waits in place (cheaper than a stop and a claim)."""
POLLS = (0.01, 1.0)
"""A ``recv`` in place looks for its message again after the first pause,
doubling up to the second."""
PARK_LEASE = 30.0
"""How long a parked run (below) stays this process's after it last
renewed its row: renewed every third of it while it waits. A process that
died leaves the thread to the workers this long after its last renewal."""
_PLAIN = (str, int, float, bool, type(None))
_NOT_STORED = ("checkpoint_ns", "checkpoint_id", "checkpoint_map")


class Pause:
    """Effect: sleep this long (real seconds), then report."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Take:
    """Effect: look for what the wait waits for; answer ``(found, value)``."""

    __slots__ = ()


TAKE = Take()

Effect = Pause | Take
Found = tuple[bool, Any]


def scope_for(what: str, *, is_async: bool) -> TaskScope:
    """The calling task's scope; a sync primitive called on an event loop
    would stop the whole loop while it waits, so it is refused there."""
    scope = require_scope(f"pregelkit.durable.{what}()")
    if not is_async:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"pregelkit.durable.{what}() would block the event loop this async workflow "
                f"runs on: use `await pregelkit.durable.a{what}(...)` here"
            )
    return scope


def _call(scope: TaskScope, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    runner = scope.run.runner
    if runner is None:
        raise RuntimeError(f"{name} needs a running workflow")
    return runner.call(scope.task, Call(FnSpec(fn, skip_first=False), args, {}, name, name))


def record(scope: TaskScope, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run once as a task call of the calling task, saved
    like one; a replay returns what it returned then."""
    return _call(scope, name, fn, args).result()


async def arecord(scope: TaskScope, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """The async twin of :func:`record`."""
    return await _call(scope, name, fn, args)


def wait_for(
    scope: TaskScope,
    status: str,
    kind: str,
    due: float | None,
    topic: str | None,
    takes: bool,
    polls: tuple[float, float] | None = None,
) -> Generator[Effect, Any, Found]:
    """Wait until ``due`` (wall seconds; None: for ever) or, when ``takes``,
    until a ``Take`` finds what is waited for. Returns ``(found, value)``;
    ``(False, None)`` when ``due`` came first."""
    clk = clock()
    probe = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_REPLAY_CHECK)
    if probe is not None:
        return _checked(scope, probe, kind, due, topic)
    if takes:
        found: Found = yield TAKE
        if found[0]:
            return found
    if due is not None and due <= clk.now():
        return False, None
    stop = scope.run.stop
    suspending = stop is not None and stop.reason == SUSPENDED
    if lease_of(scope.run.base_config) is not None and (
        due is None or due - clk.now() > SUSPEND_AFTER or suspending
    ):
        if stop is None:
            raise RuntimeError("a run on a worker without a run stop cannot wait")
        stop.suspend(RunSuspended(status, kind, due, topic), clk.now())
        raise stop.refuse(scope.task)
    if kind == "sleep" and due is not None:
        clk.sleeping(due)
    end = None if due is None else clk.monotonic() + (due - clk.now())
    first, most = polls or POLLS
    poll = first
    while True:
        if stop is not None and stop.reason is not None:
            if stop.reason == SUSPENDED:  # a sibling suspended the run: this wait too
                stop.suspend(RunSuspended(status, kind, due, topic), clk.now())
            raise stop.refuse(scope.task)
        now = clk.monotonic()
        if end is not None and now >= end:
            return False, None
        pause = clk.slice if end is None else min(clk.slice, end - now)
        if takes:
            pause = min(pause, poll)
            poll = min(poll * 2, most)
        yield Pause(pause)
        if takes:
            found = yield TAKE
            if found[0]:
                return found


def _checked(
    scope: TaskScope, probe: ReplayProbe, kind: str, due: float | None, topic: str | None
) -> Found:
    """A replay check does not wait: a wait its recorded run went past (it
    recorded the next call; a sleep that is due) goes on at once, any other
    is the frontier. A ``recv``'s message is not recorded (it is taken from
    the mailbox again), so a ``recv`` is always the frontier."""
    runner = scope.run.runner
    went_past = runner is not None and runner.recorded_call(scope.task, scope.call_counter)[1]
    if kind == "sleep" and (went_past or (due is not None and due <= clock().now())):
        return False, None
    if kind == "child" and went_past:
        return True, None
    what = f"{kind} on {topic!r}" if topic is not None else kind
    raise probe.reach(f"{what} in {scope.task.name!r}")


def _park_args(
    scope: TaskScope,
    status: str,
    kind: str,
    due: float | None,
    topic: str | None,
    lapse: bool = False,
) -> dict[str, Any] | None:
    """What parks a run ``invoke`` started (no lease) while it waits, when
    the wait is long and the saver has a run queue: a row of the queue,
    held by this process (renewed while it lives), so that a worker resumes
    the thread when it is due if this process dies meanwhile."""
    run = scope.run
    saver = run.checkpointer
    if (
        lease_of(run.base_config) is not None
        or run.workflow is None
        or not isinstance(saver, BaseCheckpointSaver)
        or not saver.has_run_queue
        or (due is not None and due - clock().now() <= SUSPEND_AFTER)
    ):
        return None
    conf = run.base_config.get(CONF, {})
    thread = conf.get(CONFIG_KEY_THREAD_ID)
    if thread is None:
        return None
    kept = {
        k: v
        for k, v in conf.items()
        if not k.startswith("__") and k not in _NOT_STORED and isinstance(v, _PLAIN)
    }
    return {
        "saver": saver,
        "run_id": uuid6(),
        "thread_id": str(thread),
        "workflow": run.workflow,
        "config": {CONF: kept},
        "status": status,
        "kind": kind,
        # lapse: due once this process's lease lapses, for a wait nothing
        # else ends if it dies (a child running in it: only the parent's
        # resume restarts the child)
        "due_at": clock().now() if lapse else due,
        "topic": topic,
        "lease_seconds": PARK_LEASE,
        # a child run in process names its parent, as a queued child does:
        # if a worker ends it (this process died), its end wakes the parent
        "parent_thread": (run.base_config.get("metadata") or {}).get("parent_thread_id"),
    }


@contextlib.contextmanager
def parked(
    scope: TaskScope,
    status: str,
    kind: str,
    due: float | None,
    topic: str | None,
    lapse: bool = False,
) -> Iterator[Callable[[], object] | None]:
    """Park the run for the wait (see ``_park_args``); yields the renewal
    ``block`` calls every third of ``PARK_LEASE``, or None if not parked."""
    args = _park_args(scope, status, kind, due, topic, lapse)
    wait_saves = scope.run.wait_saves
    if args is not None and wait_saves is not None:
        wait_saves()  # the writes before the wait first: the row resumes from them
    row = None if args is None else queue_waits.park(**args)
    if scope.run.stale_park:  # taken over by the park, or dropped: past it now
        scope.run.stale_park = False
        if row is None:
            queue_waits.drop_parked(scope.run.checkpointer, _thread_of(scope))
    if args is None or row is None:
        yield None
        return
    saver = args["saver"]

    def renew() -> None:
        if not queue_waits.renew_park(saver, row, PARK_LEASE):
            raise _taken_over(row)

    try:
        yield renew
    except BaseException:
        queue_waits.unpark(saver, row)
        raise
    if not queue_waits.unpark(saver, row):
        raise _taken_over(row)


@contextlib.asynccontextmanager
async def aparked(
    scope: TaskScope,
    status: str,
    kind: str,
    due: float | None,
    topic: str | None,
    lapse: bool = False,
) -> AsyncIterator[Callable[[], Awaitable[object]] | None]:
    """The async twin of :func:`parked`."""
    args = _park_args(scope, status, kind, due, topic, lapse)
    wait_saves = scope.run.wait_saves
    if args is not None and wait_saves is not None:
        await wait_saves()
    row = None if args is None else await queue_waits.apark(**args)
    if scope.run.stale_park:
        scope.run.stale_park = False
        if row is None:
            await queue_waits.adrop_parked(scope.run.checkpointer, _thread_of(scope))
    if args is None or row is None:
        yield None
        return
    saver = args["saver"]

    async def renew() -> None:
        if not await queue_waits.arenew_park(saver, row, PARK_LEASE):
            raise _taken_over(row)

    try:
        yield renew
    except BaseException:
        await queue_waits.aunpark(saver, row)
        raise
    if not await queue_waits.aunpark(saver, row):
        raise _taken_over(row)


def _thread_of(scope: TaskScope) -> str:
    return str(scope.run.base_config[CONF][CONFIG_KEY_THREAD_ID])


def _taken_over(row: str) -> LeaseLostError:
    """This process stopped renewing its parked run for longer than
    ``PARK_LEASE`` (it was paused), and a worker took the run over: this
    run must write nothing more (the worker's does)."""
    return LeaseLostError(row, 0, "waiting in this process (a worker took the run over)")


def block(
    steps: Generator[Effect, Any, Found],
    take: Callable[[], Found] | None,
    renew: Callable[[], object] | None = None,
    nap: Callable[[float], object] = time.sleep,
) -> Found:
    """Drive :func:`wait_for` in this thread (renewing a parked run's row);
    ``nap`` pauses (a ``recv`` wakes early for a send in this process)."""
    answer: Any = None
    renew_at = time.monotonic() + PARK_LEASE / 3
    while True:
        try:
            effect = steps.send(answer)
        except StopIteration as done:
            result: Found = done.value
            return result
        if type(effect) is Pause:
            nap(effect.seconds)
            if renew is not None and time.monotonic() >= renew_at:
                renew()
                renew_at = time.monotonic() + PARK_LEASE / 3
            answer = None
        else:
            assert take is not None
            answer = take()


async def ablock(
    steps: Generator[Effect, Any, Found],
    take: Callable[[], Awaitable[Found]] | None,
    renew: Callable[[], Awaitable[object]] | None = None,
    nap: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> Found:
    """Drive :func:`wait_for` on the event loop."""
    answer: Any = None
    renew_at = time.monotonic() + PARK_LEASE / 3
    while True:
        try:
            effect = steps.send(answer)
        except StopIteration as done:
            result: Found = done.value
            return result
        if type(effect) is Pause:
            await nap(effect.seconds)
            if renew is not None and time.monotonic() >= renew_at:
                await renew()
                renew_at = time.monotonic() + PARK_LEASE / 3
            answer = None
        else:
            assert take is not None
            answer = await take()
