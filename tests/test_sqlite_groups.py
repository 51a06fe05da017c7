"""``SqliteSaver.grouped()``: the saves made inside a block are one
transaction, and the block holds their rows back to write each statement
once. Whatever a sequence of saves and reads does, it must do the same
inside a block as outside one."""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.base import Checkpoint, empty_checkpoint
from pregelkit.checkpoint.sqlite import SqliteSaver, connect
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.errors import StorageError
from test_sqlite_faults import _cfg, _saved

THREADS = ("a", "b")

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(THREADS), st.integers(0, 9)),
        st.tuples(
            st.just("write"),
            st.sampled_from(THREADS),
            st.sampled_from(("task-0", "task-1")),
            st.sampled_from(("x", "y", "__error__")),
            st.integers(0, 9),
        ),
        st.tuples(st.just("read"), st.sampled_from(THREADS)),
    ),
    max_size=12,
)


def _checkpoints(ops: list[tuple[Any, ...]]) -> list[Checkpoint]:
    """One checkpoint per ``put``, made before either run: both runs save
    the same ids, in the same order."""
    made = []
    for op in ops:
        if op[0] == "put":
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"v": op[2]}
            checkpoint["channel_versions"] = {"v": str(len(made) + 1)}
            made.append(checkpoint)
    return made


def _run(saver: SqliteSaver, ops: list[tuple[Any, ...]], made: list[Checkpoint]) -> list[Any]:
    """Make ``ops``; what each read saw."""
    latest: dict[str, dict[str, Any]] = {}
    seen = []
    puts = iter(made)
    for op in ops:
        if op[0] == "put":
            thread, checkpoint = op[1], next(puts)
            latest[thread] = saver.put(
                latest.get(thread, _cfg(thread)),
                checkpoint,
                {"source": "loop"},
                dict(checkpoint["channel_versions"]),
            )
        elif op[0] == "write":
            _, thread, task, channel, value = op
            if thread in latest:
                saver.put_writes(latest[thread], [(channel, value)], task)
        else:
            seen.append(_state(saver, op[1]))
    return seen


def _state(saver: SqliteSaver, thread: str) -> list[Any]:
    return [
        (t.checkpoint["id"], t.checkpoint["channel_values"], t.pending_writes)
        for t in saver.list(_cfg(thread))
    ]


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_a_block_saves_and_reads_what_the_same_calls_do_one_by_one(
    ops: list[tuple[Any, ...]],
) -> None:
    made = _checkpoints(ops)
    with tempfile.TemporaryDirectory() as tmp:
        with SqliteSaver.from_conn_string(str(Path(tmp) / "one.db")) as alone:
            seen_alone = _run(alone, ops, made)
            after_alone = [_state(alone, t) for t in THREADS]
        with SqliteSaver.from_conn_string(str(Path(tmp) / "group.db")) as grouped:
            with grouped.grouped():
                seen_grouped = _run(grouped, ops, made)
            after_grouped = [_state(grouped, t) for t in THREADS]
    assert seen_grouped == seen_alone
    assert after_grouped == after_alone


class _Counting(sqlite3.Connection):
    """Counts the INSERT statements made, by table."""

    inserts: dict[str, int]

    def _count(self, sql: str) -> None:
        words = sql.split()
        if words and words[0].upper() == "INSERT":
            table = words[2]
            self.inserts[table] = self.inserts.get(table, 0) + 1

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self._count(sql)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        self._count(sql)
        return super().executemany(sql, parameters)


def test_a_group_inserts_once_per_table_and_its_reads_see_its_rows(tmp_path: Path) -> None:
    """A group holds its rows back and writes each statement once, with all
    its rows; a read inside the group first writes what it holds, so it sees
    the group's own saves, and later saves still follow them."""
    conn = sqlite3.connect(
        tmp_path / "n.db", isolation_level=None, check_same_thread=False, factory=_Counting
    )
    conn.inserts = {}
    saver = SqliteSaver(conn)
    saver.setup()
    conn.inserts = {}
    with saver.grouped():
        for thread in ("a", "b"):
            config = saver.put(_cfg(thread), empty_checkpoint(), {"source": "input"}, {})
            saver.put_writes(config, [("x", 1)], "task-0")
            saver.put_writes(config, [("y", 2)], "task-1")
    assert conn.inserts == {"pregelkit_checkpoints": 1, "pregelkit_writes": 1}
    for thread in ("a", "b"):
        saved = saver.get_tuple(_cfg(thread))
        assert saved is not None
        assert sorted(saved.pending_writes or []) == [("task-0", "x", 1), ("task-1", "y", 2)]

    with saver.grouped():
        config = saver.put(_cfg("c"), empty_checkpoint(), {"source": "input"}, {})
        saver.put_writes(config, [("x", 1)], "task-0")
        inside = saver.get_tuple(_cfg("c"))
        assert inside is not None and inside.pending_writes == [("task-0", "x", 1)]
        saver.put_writes(config, [("x", 9)], "task-0")  # a regular write stored already stays
        saver.put_writes(config, [("y", 2)], "task-1")
    saved = saver.get_tuple(_cfg("c"))
    assert saved is not None
    assert sorted(saved.pending_writes or []) == [("task-0", "x", 1), ("task-1", "y", 2)]
    saver.close()


def test_another_thread_with_the_blocks_context_waits_for_the_block(tmp_path: Path) -> None:
    """Only the thread that opened a group joins it: a thread started with a
    copy of the block's context (its rows could be taken by the block's end
    while it adds them) waits for the block like any other thread, and its
    save is kept."""
    with SqliteSaver.from_conn_string(str(tmp_path / "o.db")) as saver:
        first = _saved(saver, "t")
        with saver.grouped():
            inside = contextvars.copy_context()
            writer = threading.Thread(
                target=lambda: inside.run(saver.put_writes, first, [("y", 2)], "task-1")
            )
            writer.start()
            writer.join(0.5)
            assert writer.is_alive()  # waits for the block's lock
            saver.put_writes(first, [("z", 3)], "task-2")
        writer.join(10)
        assert not writer.is_alive()
        saved = saver.get_tuple(first)
        assert saved is not None
        assert sorted(saved.pending_writes or []) == [
            ("task-0", "x", "kept"),
            ("task-1", "y", 2),
            ("task-2", "z", 3),
        ]


def test_a_block_whose_transaction_is_lost_saves_nothing_though_its_caller_goes_on(
    tmp_path: Path,
) -> None:
    """A full disk makes SQLite roll the block's transaction back. A caller
    that catches that error and goes on must not get the rest of the block
    saved one by one (a write saved for a checkpoint that was not): every
    later call in the block, and its end, raise the error again."""
    with SqliteSaver.from_conn_string(str(tmp_path / "l.db")) as saver:
        first = _saved(saver, "t")
        pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
        saver.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        with pytest.raises(StorageError, match="grouped"), saver.grouped():
            saver.put_writes(first, [("big", "x" * 200_000)], "task-big")  # held: returns
            later = saver.put(first, empty_checkpoint(), {"source": "loop", "step": 1}, {})
            with pytest.raises(StorageError, match="disk is full"):
                saver.get_tuple(first)  # writes the held rows first: the disk is full
            with pytest.raises(StorageError, match="a save in this grouped"):
                saver.put_writes(later, [("small", 1)], "task-small")
            with pytest.raises(StorageError, match="a save in this grouped"):
                saver.get_tuple(first)
        saver.conn.execute(f"PRAGMA max_page_count = {pages + 1000}")
        assert saver.get_tuple(later) is None
        assert [c.config for c in saver.list(_cfg("t"))] == [first]
        kept = saver.get_tuple(first)
        assert kept is not None and kept.pending_writes == [("task-0", "x", "kept")]
        saver.put_writes(later, [("small", 1)], "task-small")  # the saver works on


def test_async_calls_inside_an_agrouped_block_are_made_in_it(tmp_path: Path) -> None:
    """Inside ``agrouped()``, the calls that otherwise go to the worker
    thread (``alist``, ``alist_attempts``, ``adelete_thread``) run in the
    block: on the worker thread they waited for the block, which waited for
    them."""

    async def main() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
            async with saver.agrouped():
                config = await saver.aput(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
                listed = await asyncio.wait_for(_alist(saver), 10)
                assert [c.config for c in listed] == [config]
                assert await asyncio.wait_for(saver.alist_attempts("t"), 10) == []
                await asyncio.wait_for(saver.adelete_thread("t"), 10)
            assert await saver.aget_tuple(_cfg("t")) is None

    asyncio.run(main())


async def _alist(saver: AsyncSqliteSaver) -> list[Any]:
    return [c async for c in saver.alist(_cfg("t"))]


def test_a_sync_call_on_the_loop_while_another_tasks_block_waits_is_an_error(
    tmp_path: Path,
) -> None:
    """An ``agrouped()`` block paused at an await holds the saver on the
    event loop's thread; a sync call another task makes there would wait for
    it forever. It is an error that says what to call instead."""
    outcome: list[BaseException | None] = []

    async def main() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
            paused = asyncio.Event()

            async def block() -> None:
                async with saver.agrouped():
                    await saver.aput(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
                    paused.set()
                    await asyncio.sleep(0.2)

            holder = asyncio.create_task(block())
            await paused.wait()
            try:
                saver.get_tuple(_cfg("t"))
                outcome.append(None)
            except RuntimeError as exc:
                outcome.append(exc)
            await holder
            assert await saver.aget_tuple(_cfg("t")) is not None

    runner = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    runner.start()
    runner.join(20)
    assert not runner.is_alive(), "the sync call waited for the paused block"
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "aget_tuple" in str(outcome[0])


_CACHED_RUN = """
import asyncio, sys, time
from pregelkit.cache.sqlite import SqliteCache
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy
path, durability, mode = sys.argv[1], sys.argv[2], sys.argv[3]
ran = []

@task(cache_policy=CachePolicy())
def square(i):
    ran.append(i)
    return i * i

if mode == "sync":
    from pregelkit.checkpoint.sqlite import SqliteSaver, connect
    with SqliteSaver.from_conn_string(path) as saver:
        wf = entrypoint(checkpointer=saver, cache=SqliteCache(path=path))(
            lambda n: sum(square(i).result() for i in range(n))
        )
        for thread in ("a", "b"):
            assert wf.invoke(5, {"configurable": {"thread_id": thread}},
                             durability=durability) == 30
else:
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def main():
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            @entrypoint(checkpointer=saver, cache=SqliteCache(path=path + ".cache"))
            async def wf(n):
                total = 0
                for i in range(n):
                    total += await square(i)
                return total

            stop = []

            async def poll():  # sync reads on the loop, as graph.get_state makes
                while not stop:
                    wf.get_state({"configurable": {"thread_id": "other"}})
                    await asyncio.sleep(0)

            poller = asyncio.create_task(poll())
            for thread in ("a", "b"):
                assert await wf.ainvoke(
                    20, {"configurable": {"thread_id": thread}}, durability=durability
                ) == 2470
            stop.append(True)
            await poller

    asyncio.run(main())
assert sorted(set(ran)) == sorted(ran)  # the second thread's tasks were cache hits
print("ok")
"""


@pytest.mark.parametrize(
    ("durability", "mode"),
    [("async", "sync"), ("sync", "sync"), ("exit", "sync"), ("async", "async")],
)
def test_a_cache_save_waits_for_no_saver_group(tmp_path: Path, durability: str, mode: str) -> None:
    """A run's cache saves are made after its group of saver calls, not in
    it: a SqliteCache in the saver's own file waited out its 30 s busy
    timeout for the group's transaction (twice a run), and an async cache's
    hop to a thread paused the group while it held the saver, so another
    task's sync read on the event loop waited forever. A wall-clock guard
    in a subprocess: either took over 25 s."""
    done = subprocess.run(
        [sys.executable, "-c", _CACHED_RUN, str(tmp_path / "w.db"), durability, mode],
        capture_output=True,
        text=True,
        timeout=25,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_call_that_fails_partway_in_a_block_fails_the_block(tmp_path: Path) -> None:
    """A full disk may make SQLite undo only the failing statement of a
    call that makes several (``copy_thread``), leaving the transaction
    open with the call's first statements in it. A caller that catches the
    error and goes on must not get those committed with the rest of the
    block: the block saves nothing."""
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        source = saver.put(_cfg("src"), empty_checkpoint(), {"source": "input"}, {})
        for i in range(30):
            saver.put_writes(source, [(f"c{i}", "x" * 3000)], f"task-{i}")
        pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
        saver.conn.execute(f"PRAGMA max_page_count = {pages + 3}")
        with pytest.raises(StorageError, match="a save in this grouped"), saver.grouped():
            kept = saver.put(_cfg("a"), empty_checkpoint(), {"source": "input"}, {})
            with pytest.raises(StorageError, match="disk is full"):
                saver.copy_thread("src", "dst")
            with pytest.raises(StorageError, match="a save in this grouped"):
                saver.put_thread_control("a", "mark")
        saver.conn.execute(f"PRAGMA max_page_count = {pages + 100_000}")
        assert saver.get_tuple(kept) is None
        assert list(saver.list(_cfg("dst"))) == []
        assert saver.get_thread_control("a") is None


def test_blocks_of_two_savers_nest(tmp_path: Path) -> None:
    """Inside ``b``'s block, ``a``'s calls still join ``a``'s block (they
    waited for it forever, or were refused)."""
    with (
        SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as a,
        SqliteSaver.from_conn_string(str(tmp_path / "b.db")) as b,
    ):
        with a.grouped():
            first = a.put(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
            with b.grouped():
                b.put(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
                a.put_writes(first, [("x", 1)], "task-0")
                inside = a.get_tuple(first)
                assert inside is not None and inside.pending_writes == [("task-0", "x", 1)]
        assert b.get_tuple(_cfg("t")) is not None
        saved = a.get_tuple(first)
        assert saved is not None and saved.pending_writes == [("task-0", "x", 1)]

    async def main() -> None:
        async with (
            AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as c,
            AsyncSqliteSaver.from_conn_string(str(tmp_path / "d.db")) as d,
        ):
            async with c.agrouped():
                config = await c.aput(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
                async with d.agrouped():
                    await d.aput(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
                    await asyncio.wait_for(c.aput_writes(config, [("x", 1)], "task-0"), 10)
            saved = await c.aget_tuple(config)
            assert saved is not None and saved.pending_writes == [("task-0", "x", 1)]

    asyncio.run(main())


def test_closing_a_saver_inside_its_block_is_an_error(tmp_path: Path) -> None:
    """``close()`` waits for the saver's connection, which the block holds:
    inside the block it would wait forever."""
    refused: list[RuntimeError] = []

    def block(saver: SqliteSaver) -> None:
        with saver.grouped():
            saver.put(_cfg("t"), empty_checkpoint(), {"source": "input"}, {})
            try:
                saver.close()
            except RuntimeError as exc:
                refused.append(exc)

    saver = SqliteSaver(connect(str(tmp_path / "x.db")))
    closer = threading.Thread(target=block, args=(saver,), daemon=True)
    closer.start()
    closer.join(20)
    assert not closer.is_alive(), "close() waited for its own block"  # (left unclosed)
    assert len(refused) == 1 and "after the block ends" in str(refused[0])
    assert saver.get_tuple(_cfg("t")) is not None
    saver.close()
