"""Async runs read the task cache with ``aget``: a slow cache (a
``SqliteCache`` on a busy disk, a remote one) must not hold up the event
loop. A coroutine beside the run has to keep ticking while the cache is read:
the slow cache's ``aget`` waits for three of its ticks, and its sync ``get``
(which would block the loop) waits for them too, in vain, until a guard
passes, so a blocked loop shows as no tick during the read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from pregelkit.cache.base import FullKey
from pregelkit.cache.memory import InMemoryCache
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy

T = TypeVar("T")
TICKS = 3
GUARD = 5.0


class SlowCache(InMemoryCache[Any]):
    """Each read lasts until the ticker has ticked ``TICKS`` times."""

    def __init__(self) -> None:
        super().__init__()
        self.ticks = 0
        self.during_reads: list[int] = []
        """How many ticks each read saw."""
        self.sync_reads = 0

    def tick(self) -> None:
        self.ticks += 1

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        self.sync_reads += 1
        start = self.ticks
        deadline = time.monotonic() + GUARD
        while self.ticks < start + TICKS and time.monotonic() < deadline:
            time.sleep(0.005)
        self.during_reads.append(self.ticks - start)
        return super().get(keys)

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        start = self.ticks
        while self.ticks < start + TICKS:
            await asyncio.sleep(0.005)
        self.during_reads.append(self.ticks - start)
        return super().get(keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        self.set(pairs)


async def _with_ticker(cache: SlowCache, run: Awaitable[T]) -> T:
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            cache.tick()
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    try:
        return await run
    finally:
        stop.set()
        await ticking


@pytest.mark.parametrize("body", ["async", "sync"])
def test_task_calls_of_an_async_run_read_the_cache_without_blocking_the_loop(
    body: str, arun: Callable[[Awaitable[Any]], Any]
) -> None:
    cache = SlowCache()
    runs: list[int] = []

    if body == "async":

        @task(cache_policy=CachePolicy())
        async def double(x: int) -> int:
            runs.append(x)
            return 2 * x

    else:

        @task(cache_policy=CachePolicy())
        def double(x: int) -> int:
            runs.append(x)
            return 2 * x

    @entrypoint(checkpointer=InMemorySaver(), cache=cache)
    async def flow(x: int) -> int:
        return await double(x) + await double(x + 1)

    first = arun(_with_ticker(cache, flow.ainvoke(1, {"configurable": {"thread_id": "a"}})))
    second = arun(_with_ticker(cache, flow.ainvoke(1, {"configurable": {"thread_id": "b"}})))
    assert first == second == 6
    assert runs == [1, 2], runs  # the second run's calls were cache hits
    # every read (misses of the first run, hits of the second) let the loop tick
    assert len(cache.during_reads) >= 4 and min(cache.during_reads) >= TICKS, cache.during_reads
    assert cache.sync_reads == 0


def test_sync_runs_still_read_the_cache_with_get() -> None:
    cache = InMemoryCache[Any]()
    reads: list[int] = []
    get = cache.get

    def counted(keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        reads.append(len(keys))
        return get(keys)

    cache.get = counted  # type: ignore[method-assign]

    @task(cache_policy=CachePolicy())
    def double(x: int) -> int:
        return 2 * x

    @entrypoint(cache=cache)
    def flow(x: int) -> int:
        return double(x).result()

    assert flow.invoke(2) == flow.invoke(2) == 4
    assert reads == [1, 1]
