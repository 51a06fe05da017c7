"""The PostgreSQL savers create their tables on first use: first calls made
at once (a server's first requests, on a pool) all find the tables, none
runs on tables another call is still creating."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver

CALLS = 8


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


@pytest.mark.parametrize("one_calls_setup", [False, True])
def test_first_calls_from_many_threads_on_a_new_database_all_save(
    postgres_database: Callable[[str], str], one_calls_setup: bool
) -> None:
    dsn = postgres_database("pregelkit_first_use")
    with ConnectionPool(dsn, min_size=4, max_size=CALLS, kwargs={"autocommit": True}) as pool:
        pool.wait()
        saver = PostgresSaver(pool)
        start = threading.Barrier(CALLS + one_calls_setup)
        failed: list[BaseException] = []

        def first_call(i: int) -> None:
            start.wait()
            try:
                if i < 0:
                    saver.setup()
                else:
                    saver.put(_cfg(f"t{i}"), empty_checkpoint(), {}, {})
            except BaseException as exc:
                failed.append(exc)

        first = range(-1 if one_calls_setup else 0, CALLS)
        threads = [threading.Thread(target=first_call, args=(i,)) for i in first]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failed == []
        assert len(list(saver.list(None))) == CALLS


def test_first_calls_from_many_tasks_on_a_new_database_all_save(
    postgres_database: Callable[[str], str], arun: Callable[[Awaitable[Any]], Any]
) -> None:
    dsn = postgres_database("pregelkit_first_use_async")

    async def main() -> list[Any]:
        async with AsyncConnectionPool(
            dsn, min_size=4, max_size=CALLS, kwargs={"autocommit": True}
        ) as pool:
            await pool.wait()
            saver = AsyncPostgresSaver(pool)
            return await asyncio.gather(
                *(saver.aput(_cfg(f"t{i}"), empty_checkpoint(), {}, {}) for i in range(CALLS)),
                return_exceptions=True,
            )

    assert [r for r in arun(main()) if isinstance(r, BaseException)] == []
