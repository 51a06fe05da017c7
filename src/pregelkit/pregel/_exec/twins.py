"""Cached task calls of one run that are still running, by cache key.

A cached task called twice with the same arguments in one run must run once.
The cache cannot see to that by itself: the first call's result reaches the
cache only after it finishes (and then through a background write), so a
second call made meanwhile would miss and run again. The runner keeps here
the first call of each key while it runs; a second call waits for it and
takes its result (or, if it failed, runs on its own: failures are not cached).
Once a call has finished, the loop serves its twins from its writes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

    AnyFuture = concurrent.futures.Future[Any] | asyncio.Future[Any]

__all__ = ["RunningCalls"]


class RunningCalls:
    """The first running call of each cache key, with its future."""

    __slots__ = ("_by_key", "_lock")

    def __init__(self) -> None:
        self._by_key: dict[tuple[Any, str], tuple[AnyFuture, PregelExecutableTask]] = {}
        self._lock = threading.Lock()

    def first(self, task: PregelExecutableTask) -> tuple[AnyFuture, PregelExecutableTask] | None:
        """The running call ``task`` duplicates, if any."""
        key = task.cache_key
        if key is None or not self._by_key:
            return None
        return self._by_key.get((key.ns, key.key))

    def track(self, task: PregelExecutableTask, fut: AnyFuture) -> None:
        """Remember ``task`` until ``fut`` is done (then the loop knows its result)."""
        key = task.cache_key
        if key is None:
            return
        full = (key.ns, key.key)
        with self._lock:
            self._by_key.setdefault(full, (fut, task))

        def forget(done: Any) -> None:
            with self._lock:
                if self._by_key.get(full, (None,))[0] is done:
                    del self._by_key[full]

        fut.add_done_callback(forget)
