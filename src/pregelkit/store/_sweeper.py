"""The background TTL sweepers: a thread for sync stores, a task for async ones.

Sweeping only reclaims space: an expired item is never returned, swept or
not. A sweep that fails (the database briefly unreachable) is logged and
tried again at the next interval, rather than ending the sweeper.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cached_property
from typing import Any

__all__ = ["SweepsInTask", "SweepsInThread", "TaskSweeper", "ThreadSweeper", "interval_minutes"]

logger = logging.getLogger("pregelkit.store")


def interval_minutes(given: float | None, configured: float | None) -> float:
    minutes = given if given is not None else configured
    if minutes is None:
        minutes = 5
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0:
        raise ValueError(f"sweep_interval_minutes must be a positive number, got {minutes!r}")
    return float(minutes)


class ThreadSweeper:
    """Calls ``sweep`` every interval on a daemon thread until stopped."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        self._sweep = sweep
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._future: concurrent.futures.Future[None] | None = None

    def start(self, minutes: float) -> concurrent.futures.Future[None]:
        if self._future is not None and not self._future.done():
            return self._future
        self._stop.clear()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._future = future

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    self._sweep()
                except Exception:
                    logger.exception("TTL sweep failed; trying again in %s minutes", minutes)
            future.set_result(None)

        self._thread = threading.Thread(target=loop, name="pregelkit-ttl-sweeper", daemon=True)
        self._thread.start()
        return future

    def stop(self, timeout: float | None = None) -> bool:
        if self._thread is None:
            return True
        self._stop.set()
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped


class TaskSweeper:
    """Awaits ``sweep`` every interval in a task of the running loop."""

    def __init__(self, sweep: Callable[[], Awaitable[int]]) -> None:
        self._sweep = sweep
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    def start(self, minutes: float) -> asyncio.Task[None]:
        if self._task is not None and not self._task.done():
            return self._task
        stop = self._stop = asyncio.Event()

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), minutes * 60)
                    return
                except TimeoutError:
                    pass
                try:
                    await self._sweep()
                except Exception:
                    logger.exception("TTL sweep failed; trying again in %s minutes", minutes)

        self._task = asyncio.get_running_loop().create_task(loop(), name="pregelkit-ttl-sweeper")
        return self._task

    async def stop(self, timeout: float | None = None) -> bool:
        task = self._task
        if task is None or task.done():
            return True
        assert self._stop is not None
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            return False
        return True


class SweepsInThread:
    """``start_ttl_sweeper``/``stop_ttl_sweeper`` of a sync store: its
    ``_sweeper`` calls ``sweep_ttl`` on a thread."""

    ttl_config: Any
    sweep_ttl: Callable[[], int]

    @cached_property
    def _sweeper(self) -> ThreadSweeper:
        return ThreadSweeper(self.sweep_ttl)

    @contextmanager
    def _sweeping(self) -> Iterator[None]:
        """The block of ``from_conn_string``: the sweeper runs meanwhile if
        the TTL config has a ``sweep_interval_minutes``."""
        try:
            if (self.ttl_config or {}).get("sweep_interval_minutes"):
                self.start_ttl_sweeper()
            yield
        finally:
            self.stop_ttl_sweeper()

    def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's,
        else 5) on a daemon thread; the future completes when it stops."""
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        return self._sweeper.start(interval_minutes(sweep_interval_minutes, configured))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; ``False`` if it did not stop within ``timeout``."""
        return self._sweeper.stop(timeout)


class SweepsInTask:
    """``start_ttl_sweeper``/``stop_ttl_sweeper`` of an async store: its
    ``_sweeper`` awaits ``sweep_ttl`` in a task of the running loop."""

    ttl_config: Any
    sweep_ttl: Callable[[], Awaitable[int]]

    @cached_property
    def _sweeper(self) -> TaskSweeper:
        return TaskSweeper(self.sweep_ttl)

    @asynccontextmanager
    async def _sweeping(self) -> AsyncIterator[None]:
        """The block of ``from_conn_string``: the sweeper runs meanwhile if
        the TTL config has a ``sweep_interval_minutes``."""
        try:
            if (self.ttl_config or {}).get("sweep_interval_minutes"):
                await self.start_ttl_sweeper()
            yield
        finally:
            await self.stop_ttl_sweeper()

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's,
        else 5) in a task of the running loop."""
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        return self._sweeper.start(interval_minutes(sweep_interval_minutes, configured))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; ``False`` if it did not stop within ``timeout``."""
        return await self._sweeper.stop(timeout)
