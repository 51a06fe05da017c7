"""Workflows that wait: durable timers, messages and events between
workflows, child workflows.

Inside a workflow (an ``@entrypoint``, a ``@task`` or a Pregel node):

- ``sleep(seconds)`` / ``sleep_until(when)``: the wake time is saved once;
  a replay never sleeps again, and a run whose process died is resumed by
  a worker when it is due;
- ``send(thread_id, value, topic=None)``: a message to another thread,
  sent once however often the caller is replayed;
- ``recv(topic=None, timeout=None)``: the next message on ``topic`` (``None``
  is a topic of its own), each taken by exactly one ``recv``;
- ``set_event(key, value)``: publish a value others read with ``get_event``.

Outside a workflow: ``send(saver, thread_id, value, topic=None)``,
``get_event(saver, thread_id, key, timeout=0)`` and ``waiting(wf, config)``
(``awaiting`` in async code).
Retention: ``prune(saver, RetentionPolicy(...))`` (``aprune``) drops old
history once; ``Worker(..., retention=policy)`` keeps doing it.
Schedules: ``wf.schedule(...)`` records one; ``schedules(saver)`` lists
them as ``Schedule`` objects (``pause``, ``resume``, ``delete``,
``trigger``); the workers serving the workflow fire each slot once (see
docs/guides/fleet.md).
Async workflows use the ``a``-prefixed twins. A run that waits is still one
run: ``invoke`` returns when it ends. See docs/guides/waiting.md.

Flow control of the run queue: ``Queue(name, concurrency=..., ...)``
declared with ``declare_queue(saver, queue)`` (or ``adeclare_queue``), or by
a worker given ``Worker(..., queues=[...])``; ``wf.submit(..., queue=...,
key=..., dedup_id=..., debounce=...)``. See docs/guides/fleet.md.
"""

from __future__ import annotations

from pregelkit.checkpoint.queues import Queue, adeclare_queue, declare_queue
from pregelkit.checkpoint.retention import PruneReport, RetentionPolicy, aprune, prune
from pregelkit.checkpoint.schedules import Schedule, aschedules, schedules
from pregelkit.durable._primitives import (
    Waiting,
    aget_event,
    arecv,
    asend,
    aset_event,
    asleep,
    asleep_until,
    awaiting,
    get_event,
    recv,
    send,
    set_event,
    sleep,
    sleep_until,
    waiting,
)

__all__ = [
    "PruneReport",
    "RetentionPolicy",
    "Queue",
    "Schedule",
    "Waiting",
    "adeclare_queue",
    "aget_event",
    "aprune",
    "arecv",
    "asend",
    "aschedules",
    "aset_event",
    "asleep",
    "asleep_until",
    "awaiting",
    "declare_queue",
    "get_event",
    "prune",
    "recv",
    "schedules",
    "send",
    "set_event",
    "sleep",
    "sleep_until",
    "waiting",
]
