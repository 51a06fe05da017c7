"""``SqliteSaver.grouped()``: the saves made inside a block are one
transaction, and the block holds their rows back to write each statement
once. Whatever a sequence of saves and reads does, it must do the same
inside a block as outside one."""

from __future__ import annotations

import contextvars
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.base import Checkpoint, empty_checkpoint
from pregelkit.checkpoint.sqlite import SqliteSaver
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
