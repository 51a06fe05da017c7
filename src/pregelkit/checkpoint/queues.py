"""Named queues with limits (``pregelkit.durable.Queue``): what a queue
allows, declared in the checkpointer's database so that every worker
enforces the same limits (the latest declaration of a name wins).

``wf.submit(..., queue="emails", key="customer-42")`` queues a run on a
declared queue; workers given ``Worker(..., queues=[...])`` serve it. The
limits are enforced inside each claim (``checkpoint/_queues.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint._queues import Limits
    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "MAX_LIMIT",
    "Queue",
    "QueueState",
    "adeclare_queue",
    "declare_queue",
    "queue_states",
]

MAX_LIMIT = 2**31 - 1
"""The largest limit a queue stores (a 32-bit column on PostgreSQL)."""
MAX_NAME = 200


def _limit(what: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Queue({what}=...) takes an int or None (no limit), got {value!r}")
    if not 1 <= value <= MAX_LIMIT:
        hint = (
            ": a queue that runs nothing would hold its runs for ever; leave the limit out "
            "(None) for none, or stop serving the queue to pause it"
            if value <= 0
            else f": at most {MAX_LIMIT}, or None for no limit"
        )
        raise ValueError(f"Queue({what}=...) must be at least 1, got {value}{hint}")
    return value


def _rate(value: object) -> tuple[int, float] | None:
    if value is None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(
            "Queue(rate_limit=...) takes (n, per_seconds): at most n starts in any window "
            f"of per_seconds, e.g. (10, 60); got {value!r}"
        )
    count, per = value
    count = _limit("rate_limit[0]", count)
    if isinstance(per, timedelta):
        per = per.total_seconds()
    if isinstance(per, bool) or not isinstance(per, int | float):
        raise TypeError(f"Queue(rate_limit=(n, per_seconds)): per_seconds is a number, got {per!r}")
    if not (math.isfinite(per) and 0 < per <= 366 * 86400):
        raise ValueError(
            f"Queue(rate_limit=(n, per_seconds)): per_seconds must be in (0, a year], got {per!r}"
        )
    assert count is not None
    return count, float(per)


@dataclass(frozen=True, slots=True, init=False)
class Queue:
    """A named queue and its limits (``None``: no such limit).

    ``concurrency``: at most that many of its runs running at once across
    the fleet; ``worker_concurrency``: at most that many on any one worker;
    ``key_concurrency``: at most that many at once per key (``submit(...,
    key=...)``); ``rate_limit=(n, per_seconds)``: at most ``n`` starts in any
    window of ``per_seconds`` (a sliding window), fleet-wide. A run counts
    while it runs: one that sleeps or waits (``pregelkit.durable``) counts
    against nothing until it resumes, and one whose worker died frees its
    slot when its lease expires."""

    name: str
    concurrency: int | None
    worker_concurrency: int | None
    key_concurrency: int | None
    rate_limit: tuple[int, float] | None

    def __init__(
        self,
        name: str,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        rate_limit: tuple[int, float] | None = None,
        key_concurrency: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"Queue(name=...) takes a non-empty string, got {name!r} (runs submitted "
                "without queue= go to the default queue, which has no limits)"
            )
        if len(name) > MAX_NAME:
            raise ValueError(f"Queue(name=...) takes at most {MAX_NAME} characters")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "concurrency", _limit("concurrency", concurrency))
        object.__setattr__(
            self, "worker_concurrency", _limit("worker_concurrency", worker_concurrency)
        )
        object.__setattr__(self, "key_concurrency", _limit("key_concurrency", key_concurrency))
        object.__setattr__(self, "rate_limit", _rate(rate_limit))

    def limits(self) -> Limits:
        """The declaration as the database stores it."""
        from pregelkit.checkpoint._queues import Limits

        count, per = self.rate_limit or (None, None)
        return Limits(
            self.name,
            self.concurrency,
            self.worker_concurrency,
            self.key_concurrency,
            count,
            per,
        )


def _declare_plan(queues: list[Queue]) -> Any:
    from functools import partial

    from pregelkit.checkpoint import _queues

    for queue in queues:
        if not isinstance(queue, Queue):
            raise TypeError(f"declare_queue takes a Queue, got {type(queue).__name__}")
    return partial(_queues.declare, limits=[q.limits() for q in queues])


def declare_queue(saver: BaseCheckpointSaver[Any], queue: Queue) -> None:
    """Store ``queue``'s limits in ``saver``'s database, replacing the
    queue's earlier declaration: every worker's next claim enforces them
    (runs already running keep their slots; none is stopped)."""
    saver.run_queue(_declare_plan([queue]), "declare a queue")


async def adeclare_queue(saver: BaseCheckpointSaver[Any], queue: Queue) -> None:
    """The async twin of :func:`declare_queue`."""
    await saver.arun_queue(_declare_plan([queue]), "declare a queue")


@dataclass(frozen=True, slots=True)
class QueueState:
    """A declared queue now: its limits, its runs holding a slot (running
    under a live lease), its starts in the rate window, and the slots held
    per key."""

    queue: Queue
    running: int
    started: int
    keys: dict[str, int]

    def describe(self) -> str:
        """Its limits in words: ``concurrency 5, 2 per worker, 1 per key,
        10 starts per 60s`` (``no limits``)."""
        q = self.queue
        parts = []
        if q.concurrency is not None:
            parts.append(f"concurrency {q.concurrency}")
        if q.worker_concurrency is not None:
            parts.append(f"{q.worker_concurrency} per worker")
        if q.key_concurrency is not None:
            parts.append(f"{q.key_concurrency} per key")
        if q.rate_limit is not None:
            parts.append(f"{q.rate_limit[0]} starts per {q.rate_limit[1]:g}s")
        return ", ".join(parts) or "no limits"

    def holds(self, key: str | None) -> str | None:
        """Which of its limits holds a queued run of ``key`` now, in words;
        ``None`` when none does (a worker serving the queue takes it)."""
        q = self.queue
        if q.concurrency is not None and self.running >= q.concurrency:
            return f"queue {q.name!r} at its concurrency ({self.running}/{q.concurrency} running)"
        held = self.keys.get(key, 0) if key is not None else 0
        if q.key_concurrency is not None and key is not None and held >= q.key_concurrency:
            return (
                f"key {key!r} at the key_concurrency of queue {q.name!r} "
                f"({held}/{q.key_concurrency} running)"
            )
        if q.rate_limit is not None and self.started >= q.rate_limit[0]:
            count, per = q.rate_limit
            return f"queue {q.name!r}'s rate limit ({self.started}/{count} starts in {per:g}s)"
        return None


def queue_states(saver: BaseCheckpointSaver[Any]) -> dict[str, QueueState]:
    """Every declared queue's state now, by name (what ``pregelkit runs``
    shows)."""
    from pregelkit.checkpoint import _queues

    found, per_key = saver.run_queue(_queues.overview, "queues")
    states = {}
    for lim, running, started in found:
        rate = None if lim.rate_count is None else (lim.rate_count, lim.rate_seconds or 0.0)
        queue = Queue(lim.name, lim.concurrency, lim.worker_concurrency, rate, lim.key_concurrency)
        keys = {key: n for (name, key), n in per_key.items() if name == lim.name}
        states[lim.name] = QueueState(queue, running, started, keys)
    return states
