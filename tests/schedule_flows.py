"""A scheduled workflow served by worker processes for the schedules' chaos
test (tests/test_schedules_chaos.py): ``python schedule_flows.py sync|async DB``
serves ``tick`` (a ``Worker`` or an ``AsyncWorker``) until SIGTERM. Each run
takes a moment, so kills land in the middle of runs as well as of firings."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from typing import Any

from pregelkit.func import entrypoint
from pregelkit.worker import AsyncWorker, Worker

LEASE = 1.0


def flows(saver: Any) -> Any:
    @entrypoint(checkpointer=saver)
    def tick(scheduled_at: str) -> str:
        time.sleep(random.uniform(0, 0.3))
        return scheduled_at

    return tick


def async_flows(saver: Any) -> Any:
    @entrypoint(checkpointer=saver)
    async def tick(scheduled_at: str) -> str:
        await asyncio.sleep(random.uniform(0, 0.3))
        return scheduled_at

    return tick


def _serve_sync(db: str) -> None:
    from crash_workflow import open_saver

    with open_saver(db) as saver:
        worker = Worker([flows(saver)], saver, concurrency=4, lease_seconds=LEASE)
        signal.signal(signal.SIGTERM, lambda *_: worker.stop("SIGTERM"))
        worker.run()


async def _serve_async(db: str) -> None:
    from crash_workflow import open_async_saver

    async with open_async_saver(db) as saver:
        worker = AsyncWorker([async_flows(saver)], saver, concurrency=4, lease_seconds=LEASE)
        await worker.run()


if __name__ == "__main__":
    kind, db = sys.argv[1:3]
    if kind == "sync":
        _serve_sync(db)
    else:
        asyncio.run(_serve_async(db))
