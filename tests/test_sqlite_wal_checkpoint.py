"""The SQLite savers copy their write-ahead log into the database file on a
thread of their own, so no commit of a run pays for it; closing the saver
stops that thread and leaves no log behind."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from pathlib import Path
from typing import Any

from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.sqlite import SqliteSaver, connect
from pregelkit.checkpoint.sqlite._walcheckpoint import CHECKPOINT_EVERY
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.func import entrypoint, task

THREAD_NAME = "pregelkit-sqlite-wal"


def _wal_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _wait_for(check: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_commits_reach_the_database_file_without_the_writer_checkpointing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()
        empty_size = path.stat().st_size
        for i in range(CHECKPOINT_EVERY + 1):
            saver.put(_cfg(f"t{i}"), empty_checkpoint(), {"source": "input"}, {})
        # far below the writer's own automatic checkpoint: only the background
        # thread copies these pages into the file
        assert _wait_for(lambda: path.stat().st_size > empty_size + 16 * 4096)
        assert len(_wal_threads()) == 1
    assert _wal_threads() == []
    assert not os.path.exists(f"{path}-wal")  # the last connection closed took the log along
    with SqliteSaver.from_conn_string(str(path)) as again:
        assert len(list(again.list(None))) == CHECKPOINT_EVERY + 1


def test_few_commits_start_no_thread_and_memory_databases_never_do(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "few.db")) as saver:
        for i in range(CHECKPOINT_EVERY - 1):
            saver.put(_cfg(f"t{i}"), empty_checkpoint(), {}, {})
        assert _wal_threads() == []
    with SqliteSaver.from_conn_string(":memory:") as memory:
        for i in range(CHECKPOINT_EVERY * 2):
            memory.put(_cfg(f"t{i}"), empty_checkpoint(), {}, {})
        assert _wal_threads() == []


def test_runs_of_the_async_saver_are_checkpointed_and_closing_stops_the_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "async.db"

    async def main() -> int:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:

            @task
            async def one(x: int) -> int:
                return x + 1

            @entrypoint(checkpointer=saver)
            async def flow(x: int) -> int:
                return await one(x)

            total = 0
            for i in range(CHECKPOINT_EVERY + 1):
                total += await flow.ainvoke(i, _cfg(f"run-{i}"))
            assert await asyncio.to_thread(_wait_for, lambda: path.stat().st_size > 64 * 4096)
            return total

    assert asyncio.run(main()) == sum(range(1, CHECKPOINT_EVERY + 2))
    assert _wal_threads() == []
    assert not os.path.exists(f"{path}-wal")


def test_a_saver_dropped_without_close_stops_its_thread(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "dropped.db"))
    saver = SqliteSaver(conn)
    for i in range(CHECKPOINT_EVERY):
        saver.put(_cfg(f"t{i}"), empty_checkpoint(), {}, {})
    assert len(_wal_threads()) == 1
    del saver
    gc.collect()
    assert _wait_for(lambda: _wal_threads() == [])
    conn.close()
