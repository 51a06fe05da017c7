"""Messages, events and parked waits at the saver level: what
``pregelkit.durable`` calls, for any saver that can hold them.

A saver with a run queue (SQLite, PostgreSQL) keeps them in its database
(the plans of ``checkpoint._waits``), so they survive the process and reach
other processes; :class:`~pregelkit.checkpoint.memory.InMemorySaver` keeps
them in process memory with the same semantics (exactly-once takes,
idempotent sends by sender, latest event wins). Any other saver is refused
with a ``TypeError`` that says which savers work.

Values are serialized with the saver's ``serde`` and at most
:data:`MAX_MESSAGE_BYTES` once serialized (``MessageTooLargeError``): a
message is a row, not a blob store. Topic ``None`` is the default topic
(stored as ``''``).

Every function has an async twin (``a``-prefixed). A send made in this
process also wakes this process's waiters at once (:func:`wait_posted`),
whatever the saver; other processes' sends are seen when they look again.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pregelkit.checkpoint import _runqueue, _waits
from pregelkit.checkpoint.base import BaseCheckpointSaver, no_run_queue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import MessageTooLargeError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "MAX_MESSAGE_BYTES",
    "apark",
    "apost_message",
    "aput_event",
    "aread_event",
    "arenew_park",
    "asuspend",
    "atake_message",
    "aunpark",
    "await_posted",
    "park",
    "post_message",
    "posted",
    "put_event",
    "read_event",
    "renew_park",
    "suspend",
    "take_message",
    "unpark",
    "wait_posted",
]

T = TypeVar("T")
Typed = tuple[str, bytes]
Saver = BaseCheckpointSaver[Any]

MAX_MESSAGE_BYTES = 1 << 20
"""The most a message or event value may be once serialized (1 MiB)."""


def _topic(topic: str | None) -> str:
    return "" if topic is None else str(topic)


def _dumps(saver: Saver, value: Any) -> Typed:
    typed = saver.serde.dumps_typed(value)
    if len(typed[1]) > MAX_MESSAGE_BYTES:
        raise MessageTooLargeError(len(typed[1]), MAX_MESSAGE_BYTES)
    return typed


def _loads(saver: Saver, typed: Typed | None) -> tuple[bool, Any]:
    return (False, None) if typed is None else (True, saver.serde.loads_typed(typed))


def _unsupported(saver: object) -> TypeError:
    return TypeError(
        f"{type(saver).__name__} cannot hold messages or events: use a SqliteSaver or "
        "PostgresSaver (every process that sends or waits reaches it), or an InMemorySaver "
        "(one process)"
    )


# this process: who waits for what is posted, and InMemorySaver's mailbox


@dataclass(slots=True)
class _Message:
    seq: int
    thread_id: str
    topic: str
    value: Typed
    consumed_by: str | None = None


@dataclass(slots=True, eq=False)
class _Local:
    """A saver's state in this process: a count of what was posted here
    (sends and events) and its waiters; for an InMemorySaver, also the
    messages and events themselves."""

    changed: threading.Condition = field(default_factory=threading.Condition)
    version: int = 0
    futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )
    messages: list[_Message] = field(default_factory=list)
    senders: set[str] = field(default_factory=set)
    taken: dict[str, Typed] = field(default_factory=dict)
    events: dict[tuple[str, str], Typed] = field(default_factory=dict)

    def posted(self) -> None:
        """Something was posted: wake this process's waiters. Called with
        ``changed`` held."""
        self.version += 1
        self.changed.notify_all()
        for loop, future in self.futures:
            loop.call_soon_threadsafe(_resolve, future)
        self.futures.clear()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_locals: weakref.WeakKeyDictionary[Saver, _Local] = weakref.WeakKeyDictionary()
_locals_lock = threading.Lock()


def _local(saver: Saver) -> _Local:
    local = _locals.get(saver)
    if local is None:
        with _locals_lock:
            local = _locals.setdefault(saver, _Local())
    return local


def posted(saver: Saver) -> int:
    """How many sends and events this process has posted through ``saver``:
    what :func:`wait_posted` waits to change."""
    return _local(saver).version


def wait_posted(saver: Saver, seen: int, seconds: float) -> int:
    """Block until this process posts through ``saver`` after ``seen``
    (:func:`posted`), or ``seconds`` pass; returns the count then."""
    local = _local(saver)
    with local.changed:
        local.changed.wait_for(lambda: local.version != seen, max(0.0, seconds))
        return local.version


async def await_posted(saver: Saver, seen: int, seconds: float) -> int:
    """The async twin of :func:`wait_posted` (it holds no thread)."""
    import asyncio  # here, not at import: it costs ~40 ms to `import pregelkit.func`

    local = _local(saver)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    with local.changed:
        if local.version != seen:
            return local.version
        local.futures.append((loop, future))
    try:
        await asyncio.wait_for(future, max(0.0, seconds))
    except TimeoutError:
        with local.changed:
            if (loop, future) in local.futures:
                local.futures.remove((loop, future))
    return local.version


def _notify(saver: Saver) -> None:
    local = _local(saver)
    with local.changed:
        local.posted()


def _memory_send(
    local: _Local, thread_id: str, topic: str, value: Typed, sender: str | None
) -> bool:
    with local.changed:
        if sender is not None:
            if sender in local.senders:
                return False
            local.senders.add(sender)
        local.messages.append(_Message(len(local.messages), thread_id, topic, value))
        return True


def _memory_take(local: _Local, thread_id: str, topic: str, key: str) -> Typed | None:
    with local.changed:
        if key in local.taken:
            return local.taken[key]
        for message in local.messages:
            if message.consumed_by is None and (message.thread_id, message.topic) == (
                thread_id,
                topic,
            ):
                message.consumed_by = key
                local.taken[key] = message.value
                return message.value
        return None


def _memory_event(local: _Local, thread_id: str, key: str, value: Typed | None) -> Typed | None:
    with local.changed:
        if value is not None:
            local.events[(thread_id, key)] = value
        return local.events.get((thread_id, key))


def _queued(saver: Saver) -> bool:
    """Whether ``saver`` keeps these in its database; else an InMemorySaver."""
    if saver.has_run_queue:
        return True
    if isinstance(saver, InMemorySaver):
        return False
    raise _unsupported(saver)


# messages


def post_message(
    saver: Saver, thread_id: str, value: Any, topic: str | None = None, sender: str | None = None
) -> bool:
    """Send ``value`` to ``thread_id`` on ``topic``; ``sender``: the send's
    idempotency key (a workflow's send: its call's id), ``None`` for none.
    ``False``: this sender's message was already there (nothing sent)."""
    typed = _dumps(saver, value)
    if _queued(saver):
        plan = partial(_waits.send, thread_id=thread_id, topic=_topic(topic), value=typed)
        sent = bool(saver.run_queue(partial(plan, sender=sender), "send a message"))
    else:
        sent = _memory_send(_local(saver), thread_id, _topic(topic), typed, sender)
    if sent:
        _notify(saver)
    return sent


async def apost_message(
    saver: Saver, thread_id: str, value: Any, topic: str | None = None, sender: str | None = None
) -> bool:
    typed = _dumps(saver, value)
    if _queued(saver):
        plan = partial(_waits.send, thread_id=thread_id, topic=_topic(topic), value=typed)
        sent = bool(await saver.arun_queue(partial(plan, sender=sender), "send a message"))
    else:
        sent = _memory_send(_local(saver), thread_id, _topic(topic), typed, sender)
    if sent:
        _notify(saver)
    return sent


def take_message(saver: Saver, thread_id: str, topic: str | None, key: str) -> tuple[bool, Any]:
    """(True, the message) ``key`` took: the one it took before (a replay),
    else the oldest unconsumed one of ``thread_id`` on ``topic``, taken now
    once and for all; (False, None) if there is none yet."""
    if _queued(saver):
        plan = partial(_waits.take, thread_id=thread_id, topic=_topic(topic), key=key)
        return _loads(saver, saver.run_queue(plan, "receive a message"))
    return _loads(saver, _memory_take(_local(saver), thread_id, _topic(topic), key))


async def atake_message(
    saver: Saver, thread_id: str, topic: str | None, key: str
) -> tuple[bool, Any]:
    if _queued(saver):
        plan = partial(_waits.take, thread_id=thread_id, topic=_topic(topic), key=key)
        return _loads(saver, await saver.arun_queue(plan, "receive a message"))
    return _loads(saver, _memory_take(_local(saver), thread_id, _topic(topic), key))


# events


def put_event(saver: Saver, thread_id: str, key: str, value: Any) -> None:
    """Publish ``value`` under ``key`` for ``thread_id``; the latest wins."""
    typed = _dumps(saver, value)
    if _queued(saver):
        plan = partial(_waits.set_event, thread_id=thread_id, key=key, value=typed)
        saver.run_queue(plan, "set an event")
    else:
        _memory_event(_local(saver), thread_id, key, typed)
    _notify(saver)


async def aput_event(saver: Saver, thread_id: str, key: str, value: Any) -> None:
    typed = _dumps(saver, value)
    if _queued(saver):
        plan = partial(_waits.set_event, thread_id=thread_id, key=key, value=typed)
        await saver.arun_queue(plan, "set an event")
    else:
        _memory_event(_local(saver), thread_id, key, typed)
    _notify(saver)


def read_event(saver: Saver, thread_id: str, key: str) -> tuple[bool, Any]:
    """(True, the latest value) published under ``key`` for ``thread_id``,
    or (False, None) if none was."""
    if _queued(saver):
        plan = partial(_waits.get_event, thread_id=thread_id, key=key)
        return _loads(saver, saver.run_queue(plan, "read an event"))
    return _loads(saver, _memory_event(_local(saver), thread_id, key, None))


async def aread_event(saver: Saver, thread_id: str, key: str) -> tuple[bool, Any]:
    if _queued(saver):
        plan = partial(_waits.get_event, thread_id=thread_id, key=key)
        return _loads(saver, await saver.arun_queue(plan, "read an event"))
    return _loads(saver, _memory_event(_local(saver), thread_id, key, None))


# waits of runs in the queue: these need a saver with a run queue


def _queue(saver: Saver) -> Saver:
    if not saver.has_run_queue:
        raise no_run_queue(saver)
    return saver


def _park_plan(
    saver: Saver,
    run_id: str,
    thread_id: str,
    workflow: str,
    config: Mapping[str, Any],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
    lease_seconds: float,
    parent_thread: str | None,
) -> partial[_runqueue.RunPlan[str | None]]:
    serde = _queue(saver).serde
    try:
        stored = serde.dumps_typed(dict(config))
    except Exception:  # what a worker needs of it to resume the thread
        stored = serde.dumps_typed({"configurable": {"thread_id": thread_id}})
    return partial(
        _waits.park,
        run_id=run_id,
        thread_id=thread_id,
        workflow=workflow,
        config=stored,
        status=status,
        kind=kind,
        due_at=due_at,
        topic=None if kind == "sleep" else _topic(topic),
        lease_seconds=lease_seconds,
        parent_thread=parent_thread,
        input=serde.dumps_typed(None),
    )


def park(
    saver: Saver,
    run_id: str,
    thread_id: str,
    workflow: str,
    config: Mapping[str, Any],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
    lease_seconds: float,
    parent_thread: str | None = None,
) -> str | None:
    """An ``invoke`` run starts waiting in this process (see
    ``_waits.park``): the id of the row it now holds (renew it with
    :func:`renew_park` within ``lease_seconds``; :func:`unpark` when the
    wait ends here), or ``None`` if another run of the thread is active.
    ``config``: the run's (what a worker resumes it with if this process
    dies; only its thread id if it cannot be serialized)."""
    plan = _park_plan(
        saver,
        run_id,
        thread_id,
        workflow,
        config,
        status,
        kind,
        due_at,
        topic,
        lease_seconds,
        parent_thread,
    )
    return saver.run_queue(plan, "park a waiting run")


async def apark(
    saver: Saver,
    run_id: str,
    thread_id: str,
    workflow: str,
    config: Mapping[str, Any],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
    lease_seconds: float,
    parent_thread: str | None = None,
) -> str | None:
    plan = _park_plan(
        saver,
        run_id,
        thread_id,
        workflow,
        config,
        status,
        kind,
        due_at,
        topic,
        lease_seconds,
        parent_thread,
    )
    return await saver.arun_queue(plan, "park a waiting run")


def drop_parked(saver: Saver, thread_id: str) -> bool:
    """See ``_waits.drop_parked``."""
    plan = partial(_waits.drop_parked, thread_id=thread_id)
    return bool(_queue(saver).run_queue(plan, "drop a parked run", single=True))


async def adrop_parked(saver: Saver, thread_id: str) -> bool:
    plan = partial(_waits.drop_parked, thread_id=thread_id)
    return bool(await _queue(saver).arun_queue(plan, "drop a parked run", single=True))


def renew_park(saver: Saver, run_id: str, lease_seconds: float) -> bool:
    """Renew a parked run's lease; ``False``: no longer parked here (a
    worker took it over after the lease lapsed)."""
    plan = partial(_waits.renew_park, run_id=run_id, lease_seconds=lease_seconds)
    return bool(_queue(saver).run_queue(plan, "renew a parked run"))


async def arenew_park(saver: Saver, run_id: str, lease_seconds: float) -> bool:
    plan = partial(_waits.renew_park, run_id=run_id, lease_seconds=lease_seconds)
    return bool(await _queue(saver).arun_queue(plan, "renew a parked run"))


def unpark(saver: Saver, run_id: str) -> bool:
    """The parked run's wait ended here: its row goes; ``False``: a worker
    took it over meanwhile."""
    plan = partial(_waits.unpark, run_id=run_id)
    return bool(_queue(saver).run_queue(plan, "unpark a run", single=True))


async def aunpark(saver: Saver, run_id: str) -> bool:
    plan = partial(_waits.unpark, run_id=run_id)
    return bool(await _queue(saver).arun_queue(plan, "unpark a run", single=True))


def _suspend_plan(
    lease: tuple[str, int], status: str, kind: str, due_at: float | None, topic: str | None
) -> partial[_runqueue.RunPlan[bool]]:
    return partial(
        _waits.suspend,
        lease=lease,
        status=status,
        kind=kind,
        due_at=due_at,
        topic=None if kind == "sleep" else _topic(topic),
    )


def suspend(
    saver: Saver,
    lease: tuple[str, int],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
) -> bool:
    """A worker's run (``lease``) stops to wait: see ``_waits.suspend``.
    (A worker does this itself when its run raises ``RunSuspended``.)"""
    plan = _suspend_plan(lease, status, kind, due_at, topic)
    return bool(_queue(saver).run_queue(plan, "suspend a run"))


async def asuspend(
    saver: Saver,
    lease: tuple[str, int],
    status: str,
    kind: str,
    due_at: float | None,
    topic: str | None,
) -> bool:
    plan = _suspend_plan(lease, status, kind, due_at, topic)
    return bool(await _queue(saver).arun_queue(plan, "suspend a run"))
