"""A SQLite file failing under the saver: full, read-only, not a database,
cut short, or held by another process past the busy timeout. Each is a
``StorageError`` naming the file, with SQLite's error as the cause, and
nothing saved before is lost."""

from __future__ import annotations

import contextvars
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint import StorageRetry
from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import StorageError

QUICK = StorageRetry(attempts=3, initial_delay=0.05, deadline=2.0)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _saved(saver: SqliteSaver, thread: str) -> dict[str, Any]:
    config = saver.put(_cfg(thread), empty_checkpoint(), {"source": "input"}, {})
    saver.put_writes(config, [("x", "kept")], "task-0")
    return config


def test_disk_full_is_a_storage_error_and_keeps_what_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        first = _saved(saver, "t")
        pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
        saver.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StorageError) as caught:
            saver.put_writes(first, [("big", "x" * 100_000)], "task-1")
        message = str(caught.value)
        assert str(path) in message and "database or disk is full" in message
        assert "put_writes for thread 't'" in message
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        kept = saver.get_tuple(first)
        assert kept is not None and kept.pending_writes == [("task-0", "x", "kept")]


def test_read_only_database_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        first = _saved(saver, "t")
    with SqliteSaver.from_conn_string(f"file:{path}?mode=ro") as saver:
        assert saver.get_tuple(first) is not None  # reading works
        with pytest.raises(StorageError, match="readonly"):
            saver.put_writes(first, [("y", 1)], "task-1")


@pytest.mark.parametrize("damage", ["not a database", "cut short"])
def test_a_damaged_file_is_a_storage_error_naming_it(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "damaged.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        for i in range(200):
            _saved(saver, f"t{i}")
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if damage == "not a database":
        path.write_bytes(b"this is a text file, not SQLite\n" * 200)
    else:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 3)
    with SqliteSaver.from_conn_string(str(path)) as saver, pytest.raises(StorageError) as caught:
        for i in range(200):
            saver.get_tuple(_cfg(f"t{i}"))
    assert str(path) in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


HOLD_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def _hold_write_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_busy_past_the_timeout_is_retried_then_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    with SqliteSaver.from_conn_string(str(path), busy_timeout=0.1, retry=QUICK) as saver:
        first = _saved(saver, "t")
        holder = _hold_write_lock(path, 30)
        try:
            started = time.monotonic()
            with pytest.raises(StorageError, match="database is locked") as caught:
                saver.put(_cfg("t"), empty_checkpoint(), {}, {})
            assert "after 3 tries" in str(caught.value)
            assert time.monotonic() - started < 10
        finally:
            holder.kill()
            holder.wait()
        saver.put_writes(first, [("y", 1)], "task-1")  # free again: works


def test_busy_for_less_than_the_budget_is_ridden_out(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    budget = StorageRetry(attempts=10, initial_delay=0.1, deadline=20.0)
    with SqliteSaver.from_conn_string(str(path), busy_timeout=0.1, retry=budget) as saver:
        first = _saved(saver, "t")
        holder = _hold_write_lock(path, 0.8)
        try:
            saver.put_writes(first, [("y", 1)], "task-1")
        finally:
            holder.wait()
        assert ("task-1", "y", 1) in saver.get_tuple(first).pending_writes  # type: ignore[union-attr]


def test_busy_timeout_must_be_a_number_of_seconds(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", check_same_thread=False)
    for bad in (-1, "30", float("nan"), True):
        with pytest.raises(ValueError, match="busy_timeout"):
            SqliteSaver(conn, busy_timeout=bad)  # type: ignore[arg-type]


def test_async_saver_waits_for_a_locked_database_off_the_event_loop(tmp_path: Path) -> None:
    """The async saver makes cheap calls on the event loop, but one that meets
    another process's write lock waits on its worker thread: the loop keeps
    running meanwhile, and the call succeeds once the lock is released."""
    import asyncio

    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = tmp_path / "busy.db"

    async def main() -> tuple[int, float]:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            first = await saver.aput(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
            await saver.aput_writes(first, [("x", 0)], "task-0")  # made on the loop
            holder = await asyncio.to_thread(_hold_write_lock, path, 1.0)
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            started = time.monotonic()
            await saver.aput_writes(first, [("y", 1)], "task-1")
            waited = time.monotonic() - started
            ticker.cancel()
            await asyncio.to_thread(holder.wait)
            saved = await saver.aget_tuple(first)
            assert saved is not None and ("task-1", "y", 1) in (saved.pending_writes or [])
            return ticks, waited

    ticks, waited = asyncio.run(main())
    assert waited > 0.3  # it did wait for the lock...
    assert ticks >= 10  # ...without holding up the event loop


def test_grouped_calls_are_saved_together_or_not_at_all(tmp_path: Path) -> None:
    """The engine makes the saves it finds queued together in one
    transaction: all of them are saved, or, when one fails, none is."""
    with SqliteSaver.from_conn_string(str(tmp_path / "g.db")) as saver:
        with saver.grouped():
            first = saver.put(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
            saver.put_writes(first, [("x", 1), ("y", 2)], "task-0")
            saver.put_writes(first, [("z", 3)], "task-1")
        saved = saver.get_tuple(_cfg("t"))
        assert saved is not None and len(saved.pending_writes or []) == 3

        with pytest.raises(RuntimeError, match="boom"), saver.grouped():
            config = saver.put(_cfg("u"), empty_checkpoint(), {"source": "input"}, {})
            saver.put_writes(config, [("x", 1)], "task-0")
            raise RuntimeError("boom")
        assert saver.get_tuple(_cfg("u")) is None  # the checkpoint went with the writes
        saver.put_writes(first, [("w", 4)], "task-2")  # the saver works on after it
        assert len(saver.get_tuple(_cfg("t")).pending_writes or []) == 4  # type: ignore[union-attr]


def test_a_full_disk_at_the_commit_of_a_group_saves_none_of_it(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        first = _saved(saver, "t")
        pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
        saver.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StorageError) as caught, saver.grouped():
            for i in range(50):
                saver.put_writes(first, [(f"big{i}", "x" * 4000)], f"task-{i + 1}")
        assert str(path) in str(caught.value)
        saved = saver.get_tuple(first)
        assert saved is not None and saved.pending_writes == [("task-0", "x", "kept")]


def test_a_context_copied_inside_a_block_does_not_join_it_after_the_block_ends(
    tmp_path: Path,
) -> None:
    """A thread started inside ``grouped()`` carries a copy of the block's
    context; after the block its calls take the saver's lock and a
    transaction of their own instead of running bare inside whatever
    transaction another thread has open on the connection."""
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        with saver.grouped():
            stale = contextvars.copy_context()
        with saver.grouped():
            saver.put(_cfg("other"), empty_checkpoint(), {}, {})
            writer = threading.Thread(
                target=lambda: stale.run(saver.put_thread_control, "t", "cancel")
            )
            writer.start()
            writer.join(0.5)
            assert writer.is_alive()  # waits for the block's lock
        writer.join(10)
        assert not writer.is_alive()
        assert saver.get_thread_control("t") == "cancel"
