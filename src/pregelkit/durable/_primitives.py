"""The primitives of ``pregelkit.durable``: argument checks, the recorded
calls, and the waits (``pregel._api.waits``) they go through."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pregelkit._internal._clock import clock
from pregelkit._internal._constants import CONF, CONFIG_KEY_THREAD_ID
from pregelkit._internal._current import CURRENT
from pregelkit.checkpoint import waits as mailbox
from pregelkit.checkpoint._runqueue import SLEEPING, WAITING
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.runs import RunRecord, ahandle_of_thread, handle_of_thread
from pregelkit.pregel._api.waits import (
    ablock,
    aparked,
    arecord,
    block,
    parked,
    record,
    scope_for,
    wait_for,
)
from pregelkit.pregel._graph.scope import TaskScope

__all__ = [
    "Waiting",
    "aget_event",
    "arecv",
    "asend",
    "aset_event",
    "asleep",
    "asleep_until",
    "awaiting",
    "get_event",
    "recv",
    "send",
    "set_event",
    "sleep",
    "sleep_until",
    "waiting",
]

SLEEP, RECV = "pregelkit.sleep", "pregelkit.recv"
SEND, SET_EVENT, GET_EVENT = "pregelkit.send", "pregelkit.set_event", "pregelkit.get_event"


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a thread's run waits for (``waiting(wf, config)``)."""

    status: str
    """``"sleeping"`` or ``"waiting"``."""
    kind: str
    """``"sleep"``, ``"recv"`` or ``"child"``."""
    due_at: datetime | None
    """When it goes on at the latest (a sleep's wake time, a ``recv``'s
    timeout); ``None``: only once what it waits for comes."""
    topic: str | None = None
    """The topic a ``recv`` waits on (``None``: the default topic)."""
    child_thread_id: str | None = None
    """The child a ``result()`` waits for."""


# arguments


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{what} takes seconds (an int or float) or a timedelta, got {type(value).__name__}"
        )
    seconds = float(value)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{what} takes seconds >= 0, got {value!r}")
    if math.isinf(seconds):
        raise ValueError(f"{what} takes a finite number of seconds, got {value!r}")
    return seconds


_LATEST = datetime(9999, 1, 1, tzinfo=UTC).timestamp()
"""A wake time or deadline must come before this: a later one cannot be
shown as a datetime (and would be recorded before failing at each replay)."""


def _wait(value: Any, what: str) -> float:
    """Seconds of a wait that starts now, checked before anything is recorded."""
    seconds = _seconds(value, what)
    if clock().now() + seconds >= _LATEST:
        hint = " (with no timeout, it waits for ever)" if "recv" in what else ""
        raise ValueError(
            f"{what} takes a wait that ends before the year 9999, got {seconds!r} seconds{hint}"
        )
    return seconds


def _timestamp(when: Any) -> float:
    if not isinstance(when, datetime):
        raise TypeError(f"sleep_until() takes a datetime, got {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(
            f"sleep_until() takes an aware datetime (a naive one, {when!r}, could mean any "
            "time zone): e.g. datetime.now(timezone.utc) + timedelta(days=3)"
        )
    at = when.timestamp()
    if at >= _LATEST:
        raise ValueError(f"sleep_until() takes a time before the year 9999, got {when!r}")
    return at


def _topic(topic: Any) -> str:
    """A topic as stored: ``None`` (the default topic) is ``''``."""
    if topic is None:
        return ""
    if not isinstance(topic, str) or not topic:
        raise TypeError(f"a topic is a non-empty str or None, got {topic!r}")
    return topic


def _thread_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} takes a thread id (a non-empty str), got {value!r}")
    return value


def _own_thread(scope: TaskScope) -> str:
    thread = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    if thread is None:
        raise RuntimeError(
            "a workflow that sends, receives or publishes needs a thread: invoke it with "
            'config={"configurable": {"thread_id": ...}}'
        )
    return str(thread)


def _saver(scope: TaskScope, what: str) -> BaseCheckpointSaver[Any]:
    saver = scope.run.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise RuntimeError(
            f"pregelkit.durable.{what}() needs a workflow with a checkpointer (it is "
            "where messages and events are kept): @entrypoint(checkpointer=...)"
        )
    return saver


# the bodies of the recorded calls (each runs once; a replay gets its result)


def _wake_at(seconds: float) -> float:
    return clock().now() + seconds


def _wake_at_time(when: float) -> float:
    return when


def _recv_key(timeout: float | None, topic: str) -> tuple[str, float | None]:
    """The key the message is taken under (this call's own task id: the
    same in every replay), and the timeout's deadline. ``topic`` is an
    argument only to be recorded: a replay whose ``recv`` names another
    topic is a ``NondeterminismError``, not the old topic's message."""
    scope = CURRENT.get()
    assert scope is not None
    return scope.task.id, None if timeout is None else clock().now() + timeout


def _send_body(thread_id: str, value: Any, topic: str) -> None:
    scope = CURRENT.get()
    assert scope is not None
    # the call's own task id is the message's idempotency key: a send
    # re-run after a crash (before its record was saved) adds nothing
    mailbox.post_message(_saver(scope, "send"), thread_id, value, topic, scope.task.id)


async def _asend_body(thread_id: str, value: Any, topic: str) -> None:
    scope = CURRENT.get()
    assert scope is not None
    await mailbox.apost_message(_saver(scope, "send"), thread_id, value, topic, scope.task.id)


def _set_event_body(key: str, value: Any) -> None:
    scope = CURRENT.get()
    assert scope is not None
    mailbox.put_event(_saver(scope, "set_event"), _own_thread(scope), key, value)


async def _aset_event_body(key: str, value: Any) -> None:
    scope = CURRENT.get()
    assert scope is not None
    await mailbox.aput_event(_saver(scope, "set_event"), _own_thread(scope), key, value)


# in-process waits, for waiting() to report

_HERE: dict[str, Waiting] = {}
_HERE_LOCK = threading.Lock()


class _Shown:
    """Shows a wait in ``waiting()`` while it lasts in this process."""

    def __init__(self, scope: TaskScope, wait: Waiting) -> None:
        self.thread = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
        self.wait = wait

    def __enter__(self) -> None:
        if self.thread is not None:
            with _HERE_LOCK:
                _HERE[str(self.thread)] = self.wait

    def __exit__(self, *exc: object) -> None:
        if self.thread is not None:
            with _HERE_LOCK:
                if _HERE.get(str(self.thread)) is self.wait:
                    del _HERE[str(self.thread)]


def _at(due: float | None) -> datetime | None:
    return None if due is None else datetime.fromtimestamp(due, UTC)


# timers


def sleep(seconds: float | timedelta) -> None:
    """Wait ``seconds`` durably: the wake time is saved, a replay does not
    wait again, and a run whose process died goes on when it is due."""
    secs = _wait(seconds, "sleep()")
    scope = scope_for("sleep", is_async=False)
    _sleep(scope, record(scope, SLEEP, _wake_at, secs))


def sleep_until(when: datetime) -> None:
    """Wait durably until ``when`` (an aware datetime)."""
    at = _timestamp(when)
    scope = scope_for("sleep_until", is_async=False)
    _sleep(scope, record(scope, SLEEP, _wake_at_time, at))


def _sleep(scope: TaskScope, due: float) -> None:
    with (
        _Shown(scope, Waiting("sleeping", "sleep", _at(due))),
        parked(scope, "sleeping", "sleep", due, None) as renew,
    ):
        block(wait_for(scope, "sleeping", "sleep", due, None, takes=False), None, renew)


async def asleep(seconds: float | timedelta) -> None:
    """The async twin of :func:`sleep`."""
    secs = _wait(seconds, "asleep()")
    scope = scope_for("sleep", is_async=True)
    await _asleep(scope, await arecord(scope, SLEEP, _wake_at, secs))


async def asleep_until(when: datetime) -> None:
    """The async twin of :func:`sleep_until`."""
    at = _timestamp(when)
    scope = scope_for("sleep_until", is_async=True)
    await _asleep(scope, await arecord(scope, SLEEP, _wake_at_time, at))


async def _asleep(scope: TaskScope, due: float) -> None:
    with _Shown(scope, Waiting("sleeping", "sleep", _at(due))):
        async with aparked(scope, "sleeping", "sleep", due, None) as renew:
            steps = wait_for(scope, "sleeping", "sleep", due, None, takes=False)
            await ablock(steps, None, renew)


# messages


def send(*args: Any, topic: str | None = None) -> None:
    """``send(thread_id, value, topic=None)`` inside a workflow (sent once,
    however often the caller is replayed), or ``send(saver, thread_id,
    value, topic=None)`` from ordinary code."""
    stored = _topic(topic)
    if args and isinstance(args[0], BaseCheckpointSaver):
        saver, thread_id, value = _outside_send(args)
        mailbox.post_message(saver, thread_id, value, stored, None)
        return
    thread_id, value = _inside_send(args)
    scope = scope_for("send", is_async=False)
    record(scope, SEND, _send_body, thread_id, value, stored)


async def asend(*args: Any, topic: str | None = None) -> None:
    """The async twin of :func:`send`."""
    stored = _topic(topic)
    if args and isinstance(args[0], BaseCheckpointSaver):
        saver, thread_id, value = _outside_send(args)
        await mailbox.apost_message(saver, thread_id, value, stored, None)
        return
    thread_id, value = _inside_send(args)
    scope = scope_for("send", is_async=True)
    await arecord(scope, SEND, _asend_body, thread_id, value, stored)


def _outside_send(args: tuple[Any, ...]) -> tuple[BaseCheckpointSaver[Any], str, Any]:
    if len(args) != 3:
        raise TypeError("send(saver, thread_id, value, topic=None) takes 3 positional arguments")
    return args[0], _thread_id(args[1], "send()"), args[2]


def _inside_send(args: tuple[Any, ...]) -> tuple[str, Any]:
    if CURRENT.get() is None:
        raise TypeError(
            "outside a workflow, send() takes the saver first: "
            "send(saver, thread_id, value, topic=None)"
        )
    if len(args) != 2:
        raise TypeError("send(thread_id, value, topic=None) takes 2 positional arguments")
    return _thread_id(args[0], "send()"), args[1]


def recv(topic: str | None = None, timeout: float | timedelta | None = None) -> Any:
    """The next message to this thread on ``topic``, waited for durably;
    ``None`` once ``timeout`` seconds pass without one."""
    stored = _topic(topic)
    secs = None if timeout is None else _wait(timeout, "recv(timeout=...)")
    scope = scope_for("recv", is_async=False)
    key, deadline = record(scope, RECV, _recv_key, secs, stored)
    saver, thread = _saver(scope, "recv"), _own_thread(scope)
    wait = Waiting("waiting", "recv", _at(deadline), topic)
    seen = [mailbox.posted(saver)]

    def nap(seconds: float) -> None:  # a send in this process wakes it at once
        seen[0] = mailbox.wait_posted(saver, seen[0], seconds)

    with _Shown(scope, wait), parked(scope, "waiting", "recv", deadline, stored) as renew:
        steps = wait_for(scope, "waiting", "recv", deadline, stored, takes=True)
        take = lambda: mailbox.take_message(saver, thread, stored, key)  # noqa: E731
        _, value = block(steps, take, renew, nap)
    return value


async def arecv(topic: str | None = None, timeout: float | timedelta | None = None) -> Any:
    """The async twin of :func:`recv`."""
    stored = _topic(topic)
    secs = None if timeout is None else _wait(timeout, "arecv(timeout=...)")
    scope = scope_for("recv", is_async=True)
    key, deadline = await arecord(scope, RECV, _recv_key, secs, stored)
    saver, thread = _saver(scope, "recv"), _own_thread(scope)
    wait = Waiting("waiting", "recv", _at(deadline), topic)
    seen = [mailbox.posted(saver)]

    async def nap(seconds: float) -> None:
        seen[0] = await mailbox.await_posted(saver, seen[0], seconds)

    with _Shown(scope, wait):
        async with aparked(scope, "waiting", "recv", deadline, stored) as renew:
            steps = wait_for(scope, "waiting", "recv", deadline, stored, takes=True)
            take = lambda: mailbox.atake_message(saver, thread, stored, key)  # noqa: E731
            _, value = await ablock(steps, take, renew, nap)
    return value


# events


def _event_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"an event key is a non-empty str, got {key!r}")
    return key


def set_event(key: str, value: Any) -> None:
    """Publish ``value`` under ``key`` for this thread (latest wins)."""
    name = _event_key(key)
    scope = scope_for("set_event", is_async=False)
    record(scope, SET_EVENT, _set_event_body, name, value)


async def aset_event(key: str, value: Any) -> None:
    """The async twin of :func:`set_event`."""
    name = _event_key(key)
    scope = scope_for("set_event", is_async=True)
    await arecord(scope, SET_EVENT, _aset_event_body, name, value)


def get_event(saver: BaseCheckpointSaver[Any], thread_id: str, key: str, timeout: float = 0) -> Any:
    """The latest value ``thread_id`` published under ``key``, waiting up to
    ``timeout`` seconds (real time) for one to appear; ``None`` if none has."""
    thread, name, end = _event_args(saver, thread_id, key, timeout)
    poll = _POLLS[0]
    while True:
        found, value = mailbox.read_event(saver, thread, name)
        left = end - time.monotonic()
        if found or left <= 0:
            return value if found else None
        time.sleep(min(poll, left))
        poll = min(poll * 2, _POLLS[1])


async def aget_event(
    saver: BaseCheckpointSaver[Any], thread_id: str, key: str, timeout: float = 0
) -> Any:
    """The async twin of :func:`get_event`."""
    thread, name, end = _event_args(saver, thread_id, key, timeout)
    poll = _POLLS[0]
    while True:
        found, value = await mailbox.aread_event(saver, thread, name)
        left = end - time.monotonic()
        if found or left <= 0:
            return value if found else None
        await asyncio.sleep(min(poll, left))
        poll = min(poll * 2, _POLLS[1])


_POLLS = (0.01, 0.5)
"""``get_event`` looks again after the first pause, doubling up to the second."""


def _event_args(saver: Any, thread_id: Any, key: Any, timeout: Any) -> tuple[str, str, float]:
    if not isinstance(saver, BaseCheckpointSaver):
        raise TypeError(f"get_event() takes the checkpoint saver first, got {type(saver).__name__}")
    secs = _seconds(timeout, "get_event(timeout=...)")
    return _thread_id(thread_id, "get_event()"), _event_key(key), time.monotonic() + secs


# status


def waiting(wf: Any, config: Any) -> Waiting | None:
    """What the thread of ``config`` waits for, or ``None``: a wait in this
    process, else what its run's queue row says (a run on a worker, or one
    whose process died while it waited)."""
    thread, here, saver = _waiting_args(wf, config)
    if here is not None or saver is None:
        return here
    handle = handle_of_thread(saver, thread)
    return None if handle is None else _waiting_of(handle.record())


async def awaiting(wf: Any, config: Any) -> Waiting | None:
    """The async twin of :func:`waiting` (for an async saver, which cannot
    be read synchronously on its own event loop)."""
    thread, here, saver = _waiting_args(wf, config)
    if here is not None or saver is None:
        return here
    handle = await ahandle_of_thread(saver, thread)
    return None if handle is None else _waiting_of(await handle.arecord())


def _waiting_args(
    wf: Any, config: Any
) -> tuple[str, Waiting | None, BaseCheckpointSaver[Any] | None]:
    """The thread, its wait in this process, and the saver whose queue to
    read when there is none (``None``: no queue to read)."""
    conf = config.get(CONF) if isinstance(config, dict) else None
    if not isinstance(conf, dict):
        raise TypeError(
            'waiting(wf, config) takes the thread\'s config, {"configurable": {"thread_id": ...}}, '
            f"got {config!r}"
        )
    thread = _thread_id(conf.get(CONFIG_KEY_THREAD_ID), "waiting()")
    with _HERE_LOCK:
        here = _HERE.get(thread)
    saver = getattr(wf, "checkpointer", None)
    if isinstance(saver, BaseCheckpointSaver) and saver.has_run_queue:
        return thread, here, saver
    return thread, here, None


def _waiting_of(record: RunRecord) -> Waiting | None:
    if record.status not in (SLEEPING, WAITING):
        return None
    kind, topic, due = record.wait_kind or "", record.wait_topic, _at(record.due_at)
    if kind == "child":
        return Waiting(record.status, kind, due, None, topic)
    return Waiting(record.status, kind, due, (topic or None) if kind == "recv" else None)
