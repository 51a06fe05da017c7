"""A run on PostgreSQL in few round trips, and never a half-saved step.

What a run sends is counted on the wire (``benchmarks/pg_wire.py``'s proxy):
a one-task run's start (lock, gate, checkpoint) is one round trip, its
saves one statement, its unlock one more. The batched saves
(``checkpoint/postgres/_batch.py``) must leave the database exactly as the
same calls made one by one (a Hypothesis test over random calls), and a
client killed, or a connection lost, while they are on the wire must leave
none of them applied, or all, and no saved task run again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _pg_proxy import FaultProxy
from pregelkit._internal._plan import Statement
from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.postgres import PostgresSaver, _batch, _sql
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.errors import StorageError, ThreadBusyError
from pregelkit.func import entrypoint, task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from pg_wire import WireCounter

SRC = str(Path(__file__).resolve().parent.parent / "src")


@task
def _one(x: int) -> int:
    return x + 1


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture(scope="module")
def dsn(postgres_database: Callable[[str], str]) -> str:
    url = postgres_database("pregelkit_round_trips")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    return url


@pytest.fixture
def wire(dsn: str) -> Iterator[WireCounter]:
    counter = WireCounter(dsn)
    yield counter
    counter.close()


def _per_run(wire: WireCounter, runs: Callable[[], None]) -> dict[str, int]:
    before = wire.snapshot()
    runs()
    after = wire.snapshot()
    return {key: after[key] - before[key] for key in ("round_trips", "statements", "begin")}


def test_a_one_task_run_is_three_round_trips(wire: WireCounter) -> None:
    with PostgresSaver.from_conn_string(wire.dsn) as saver:

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return _one(x).result()

        main.invoke(0, _config("warm"), durability="exit")
        sent = _per_run(wire, lambda: main.invoke(1, _config("rt-1"), durability="exit"))
        # lock + gate + checkpoint; the saves; the unlock
        assert sent == {"round_trips": 3, "statements": 5, "begin": 0}
        # every save of a "sync" run is one statement of its own
        sent = _per_run(wire, lambda: main.invoke(2, _config("rt-2"), durability="sync"))
        assert sent["begin"] == 0
        assert main.invoke(2, _config("rt-2")) == 3  # finished: its result again


def test_an_async_one_task_run_is_three_round_trips(wire: WireCounter) -> None:
    async def go() -> dict[str, int]:
        async with AsyncPostgresSaver.from_conn_string(wire.dsn) as saver:

            @entrypoint(checkpointer=saver)
            async def main(x: int) -> int:
                return await _one(x)

            await main.ainvoke(0, _config("awarm"), durability="exit")
            before = wire.snapshot()
            assert await main.ainvoke(1, _config("art-1"), durability="exit") == 2
            after = wire.snapshot()
            return {key: after[key] - before[key] for key in ("round_trips", "statements", "begin")}

    assert asyncio.run(go()) == {"round_trips": 3, "statements": 5, "begin": 0}


def _lock_is_free(dsn: str, thread_id: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        key = _sql.thread_lock_key(thread_id)
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        assert row is not None
        if row[0]:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return bool(row[0])


def test_a_read_failing_with_the_lock_gives_the_lock_back(dsn: str) -> None:
    """The lock and the reads go in one round trip: a read that fails there
    must not leave the lock taken behind the error."""
    with PostgresSaver.from_conn_string(dsn) as saver:

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return _one(x).result()

        assert main.invoke(1, _config("gone-1")) == 2
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("ALTER TABLE pregelkit_checkpoints RENAME TO pregelkit_checkpoints_away")
            try:
                with pytest.raises(psycopg.errors.UndefinedTable):
                    main.invoke(1, _config("gone-2"))
                assert _lock_is_free(dsn, "gone-2")
            finally:
                admin.execute(
                    "ALTER TABLE pregelkit_checkpoints_away RENAME TO pregelkit_checkpoints"
                )
        assert main.invoke(5, _config("gone-2")) == 6


def test_a_thread_locked_elsewhere_is_refused_and_nothing_leaks(dsn: str) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return _one(x).result()

        with psycopg.connect(dsn, autocommit=True) as other:
            key = _sql.thread_lock_key("busy")
            other.execute("SELECT pg_advisory_lock(%s)", (key,))
            with pytest.raises(ThreadBusyError):
                main.invoke(1, _config("busy"))
            other.execute("SELECT pg_advisory_unlock(%s)", (key,))
        assert main.invoke(1, _config("busy")) == 2
        assert _lock_is_free(dsn, "busy")


def test_two_savers_on_one_connection_run_a_thread_once_at_a_time(dsn: str) -> None:
    """The connection's session takes an advisory lock it holds again
    (PostgreSQL counts them): two savers made on one connection, each with
    in-process locks of its own, ran one thread twice at once. They share
    the connection's in-process locks now; sync and async."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        first, second = PostgresSaver(conn), PostgresSaver(conn)

        @entrypoint(checkpointer=second)
        def main(x: int) -> int:
            return x + 1

        with first.lock_thread("twice", wait=False), pytest.raises(ThreadBusyError):
            main.invoke(1, _config("twice"))
        assert main.invoke(1, _config("twice")) == 2

    async def amain() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            first, second = AsyncPostgresSaver(conn), AsyncPostgresSaver(conn)

            @entrypoint(checkpointer=second)
            async def main(x: int) -> int:
                return x + 1

            async with first.alock_thread("atwice", wait=False):
                with pytest.raises(ThreadBusyError):
                    await main.ainvoke(1, _config("atwice"))
            assert await main.ainvoke(1, _config("atwice")) == 2

    asyncio.run(amain())


def test_savers_on_one_connection_take_turns_with_it(dsn: str) -> None:
    """Runs of several threads through three savers made on one connection:
    each saver took the connection under a lock of its own, so two threads'
    transactions mixed on it (OutOfOrderTransactionNesting, a few runs in a
    few hundred, or a statement inside the other's transaction)."""
    failures: list[BaseException] = []

    def runs(saver: PostgresSaver, name: str) -> None:
        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return _one(x).result()

        for i in range(40):
            try:
                assert main.invoke(i, _config(f"{name}-{i % 4}")) == i + 1
            except BaseException as exc:
                failures.append(exc)

    with psycopg.connect(dsn, autocommit=True) as conn:
        savers = [PostgresSaver(conn) for _ in range(3)]
        threads = [
            threading.Thread(target=runs, args=(savers[k % 3], f"turns{k}")) for k in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


def test_a_subclass_that_reads_its_own_way_is_asked_to(dsn: str) -> None:
    """``open_thread`` reads the checkpoint in place of ``get_tuple``: not
    for a subclass whose ``get_tuple`` does more (logs, caches)."""
    asked: list[str] = []

    class Logged(PostgresSaver):
        def get_tuple(self, config: dict[str, Any]) -> Any:
            asked.append(config["configurable"]["thread_id"])
            return super().get_tuple(config)

    with psycopg.connect(dsn, autocommit=True) as conn:

        @entrypoint(checkpointer=Logged(conn))
        def main(x: int) -> int:
            return _one(x).result()

        assert main.invoke(1, _config("logged")) == 2
    assert asked == ["logged"]


def test_a_read_patched_on_the_saver_is_asked(dsn: str) -> None:
    """A test spying on one saver's ``get_tuple`` (or making it fail) with
    ``mock.patch.object`` sees the run's start ask it, sync and async, as on
    the other savers; ``open_thread`` read the checkpoint in its place."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = PostgresSaver(conn)

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return _one(x).result()

        with mock.patch.object(saver, "get_tuple", wraps=saver.get_tuple) as spy:
            assert main.invoke(1, _config("spied")) == 2
        assert spy.call_count == 1

    async def amain() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            saver = AsyncPostgresSaver(conn)

            @entrypoint(checkpointer=saver)
            async def main(x: int) -> int:
                return x + 1

            with mock.patch.object(saver, "aget_tuple", wraps=saver.aget_tuple) as spy:
                assert await main.ainvoke(1, _config("aspied")) == 2
            assert spy.call_count == 1

    asyncio.run(amain())


def _prepared(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pregelkit\\_%'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_opening_statements_are_prepared_once_per_connection(dsn: str) -> None:
    """The server plans ``open_thread``'s statements from its plan cache,
    not again for each run (``postgres/_together.py``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        @entrypoint(checkpointer=PostgresSaver(conn))
        def main(x: int) -> int:
            return _one(x).result()

        assert main.invoke(1, _config("prep-0")) == 2
        prepared = _prepared(conn)
        assert prepared == 3  # the lock, the gate, the latest checkpoint
        for i in range(1, 8):
            assert main.invoke(i, _config(f"prep-{i}")) == i + 1
        assert _prepared(conn) == prepared


def test_a_connection_that_lost_its_prepared_statements_prepares_them_again(dsn: str) -> None:
    """``DISCARD ALL`` (a pool's reset, a proxy) drops them: the run's start
    is tried again, preparing anew, and leaves no lock taken twice."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        @entrypoint(checkpointer=PostgresSaver(conn))
        def main(x: int) -> int:
            return _one(x).result()

        assert main.invoke(1, _config("lost-0")) == 2
        conn.execute("DISCARD ALL")
        assert main.invoke(2, _config("lost-1")) == 3
        assert _prepared(conn) == 3
        assert _lock_is_free(dsn, "lost-1")


def test_a_connection_without_prepared_statements_gets_plain_ones(dsn: str) -> None:
    """``prepare_threshold=None`` (a transaction-pooling proxy) is kept to."""
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:

        @entrypoint(checkpointer=PostgresSaver(conn))
        def main(x: int) -> int:
            return _one(x).result()

        assert main.invoke(1, _config("plain-0")) == 2
        assert _prepared(conn) == 0


# batched saves == the same calls one by one

_CHANNELS = ["a", "b", "__error__", "__interrupt__"]
_call = st.one_of(
    st.tuples(st.just("put"), st.integers(1, 3)),
    st.tuples(
        st.just("writes"),
        st.integers(1, 3),
        st.sampled_from(["t1", "t2"]),
        st.lists(st.tuples(st.sampled_from(_CHANNELS), st.integers(0, 9)), min_size=1, max_size=3),
    ),
    st.tuples(st.just("attempt"), st.sampled_from(["t1", "t2"]), st.integers(1, 2), st.booleans()),
)


def _apply(saver: PostgresSaver, thread_id: str, calls: list[tuple[Any, ...]]) -> None:
    for call in calls:
        if call[0] == "put":
            checkpoint = empty_checkpoint()
            checkpoint["id"] = f"00000000-0000-0000-0000-00000000000{call[1]}"
            checkpoint["channel_values"] = {"v": call[1]}
            checkpoint["channel_versions"] = {"v": f"{call[1]:032}.0"}
            saver.put(_config(thread_id), checkpoint, {"step": call[1]}, {"v": f"{call[1]:032}.0"})
        elif call[0] == "writes":
            config = {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": "",
                    "checkpoint_id": f"00000000-0000-0000-0000-00000000000{call[1]}",
                }
            }
            saver.put_writes(config, call[3], call[2])
        else:
            _, task_id, attempt, finished = call
            row = (thread_id, "", "run", 0, task_id, "n", attempt, 1.0)
            end = (2.0, "ok", None, None) if finished else (None, None, None, None)
            saver.put_attempts(thread_id, [(*row, *end, 1, "h", None)])


def _state(saver: PostgresSaver, thread_id: str) -> Any:
    checkpoints = [
        (c.checkpoint["id"], c.checkpoint["channel_values"], c.metadata, c.pending_writes)
        for c in saver.list(_config(thread_id))
    ]
    attempts = [(a.task_id, a.attempt, a.outcome) for a in saver.list_attempts(thread_id)]
    return checkpoints, attempts


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(calls=st.lists(_call, min_size=1, max_size=12))
def test_batched_saves_leave_what_the_same_calls_one_by_one_leave(
    dsn: str, calls: list[tuple[Any, ...]]
) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        for thread_id in ("batched", "alone"):
            saver.delete_thread(thread_id)
        with saver.grouped():
            _apply(saver, "batched", calls)
        for call in calls:  # each call its own transaction, outside any block
            _apply(saver, "alone", [call])
        assert _state(saver, "batched") == _state(saver, "alone")


def test_saves_of_more_parameters_than_a_statement_takes(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL takes 65,535 parameters a statement: 8,000 writes of one
    task (72,000) go as several statements, in order, in one transaction;
    and with a tiny limit the batch splits anywhere and still leaves what
    the calls one by one leave."""
    config = {"configurable": {"thread_id": "wide", "checkpoint_ns": "", "checkpoint_id": "c"}}
    writes = [(f"ch{i}", i) for i in range(8_000)]
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.delete_thread("wide")
        checkpoint = empty_checkpoint()
        checkpoint["id"] = "c"
        saver.put(_config("wide"), checkpoint, {}, {})
        saver.put_writes(config, writes, "task")
        found = saver.get_tuple(_config("wide"))
        assert found is not None
        assert [(c, v) for _, c, v in found.pending_writes or ()] == writes
        monkeypatch.setattr(_batch, "MOST_PARAMETERS", 25)
        calls: list[tuple[Any, ...]] = [
            ("put", 1),
            ("writes", 1, "t1", [("a", 1), ("b", 2), ("__error__", 3)]),
            ("attempt", "t1", 1, False),
            ("put", 2),
            ("writes", 2, "t2", [("a", 4), ("a", 5)]),
            ("attempt", "t2", 1, True),
        ]
        for thread_id in ("batched", "alone"):
            saver.delete_thread(thread_id)
        with saver.grouped():
            _apply(saver, "batched", calls)
        for call in calls:
            _apply(saver, "alone", [call])
        assert _state(saver, "batched") == _state(saver, "alone")


def test_saves_of_more_bytes_than_a_message_takes(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL refuses a message of more than 1 GB ("invalid message
    length") and closes the connection: twelve task results of 100 MB saved
    at a run's exit went as one statement, and the run failed (its lock gone
    with the connection). A batch's statement takes no more rows once its
    large values pass ``MOST_BYTES`` (here 1,000 bytes: two writes of 600
    each), and the writes are all saved, in order."""
    monkeypatch.setattr(_batch, "MOST_BYTES", 1_000)
    rows = [("t", "", "c", "task", i, f"ch{i}", "bytes", b"x" * 600, "") for i in range(5)]
    batch = _batch.Batch()
    assert batch.add(Statement(_sql.UPSERT_WRITE, rows, "many"))
    assert [len(s.params) // len(rows[0]) for s in batch.take()] == [2, 2, 1]

    config = {"configurable": {"thread_id": "heavy", "checkpoint_ns": "", "checkpoint_id": "c"}}
    writes = [(f"ch{i}", bytes([i]) * 600) for i in range(5)]
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.delete_thread("heavy")
        checkpoint = empty_checkpoint()
        checkpoint["id"] = "c"
        with saver.grouped():
            saver.put(_config("heavy"), checkpoint, {}, {})
            saver.put_writes(config, writes, "task")
        found = saver.get_tuple(_config("heavy"))
        assert found is not None
        assert [(c, v) for _, c, v in found.pending_writes or ()] == writes


# killed or cut off while the saves are on the wire

_WORKFLOW = textwrap.dedent(
    """
    import sys
    from pregelkit.checkpoint.postgres import PostgresSaver
    from pregelkit.func import entrypoint, task

    LOG = None  # the execution log's path

    def note(name):
        with open(LOG, "a") as out:
            out.write(name + "\\n")

    @task
    def a(x):
        note("a")
        return x + 1

    @task
    def b(x):
        note("b")
        return x * 2

    def workflow(saver):
        @entrypoint(checkpointer=saver)
        def main(x):
            return b(a(x).result()).result()

        return main

    if __name__ == "__main__":
        dsn, LOG = sys.argv[1], sys.argv[2]
        with PostgresSaver.from_conn_string(dsn) as saver:
            config = {"configurable": {"thread_id": "t"}}
            print(workflow(saver).invoke(3, config, durability="sync"))
    """
)


def _returns(dsn: str) -> int:
    """Task results saved for thread ``t``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pregelkit_writes WHERE thread_id = 't' AND channel = '__return__'"
        ).fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("moment", ["before the server has it", "after the server committed"])
def test_a_client_killed_while_its_save_is_on_the_wire(
    postgres_database: Callable[[str], str], tmp_path: Path, moment: str
) -> None:
    url = postgres_database("pregelkit_killed_save")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    script, log = tmp_path / "flow.py", tmp_path / "log.txt"
    script.write_text(_WORKFLOW)
    action: Literal["freeze", "mute"] = "freeze" if moment.startswith("before") else "mute"
    # the save of task a's result (the first statement writing a __return__)
    proxy = FaultProxy(url, b"__return__", action)
    try:
        env = {**os.environ, "PYTHONPATH": SRC}
        child = subprocess.Popen([sys.executable, str(script), proxy.dsn, str(log)], env=env)
        try:
            assert proxy.hit.wait(60), "the save never went out"
            if action == "mute":
                _wait_for(lambda: _returns(url) == 1)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(60)
    finally:
        proxy.close()
    saved = _returns(url)
    assert saved == (0 if action == "freeze" else 1)  # all of the statement, or none
    _wait_for(lambda: _lock_is_free(url, "t"))  # the server has seen the client go
    sys.path.insert(0, str(tmp_path))
    try:
        import flow  # type: ignore[import-not-found]

        flow.LOG = str(log)
        with PostgresSaver.from_conn_string(url) as saver:
            assert flow.workflow(saver).invoke(None, _config("t")) == 8
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flow", None)
    ran = log.read_text().split()
    # a saved result is never computed again; an unsaved one is, once
    assert ran == (["a", "a", "b"] if action == "freeze" else ["a", "b"])


def test_a_connection_cut_mid_statement_applies_nothing(
    postgres_database: Callable[[str], str],
) -> None:
    """The server gets half of a save's statement and the connection drops:
    nothing of it applies. The thread's lock went with that connection, so
    the run stops (``StorageError``: another process may hold the thread
    now); resumed, it ends right, the unsaved task run again, each result
    saved once."""
    url = postgres_database("pregelkit_cut_save")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    proxy = FaultProxy(url, b"__return__", "cut")
    ran: list[str] = []

    @task
    def a(x: int) -> int:
        ran.append("a")
        return x + 1

    def workflow(saver: PostgresSaver) -> Any:
        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return a(x).result() * 2

        return main

    try:
        with (
            PostgresSaver.from_conn_string(proxy.dsn) as saver,
            pytest.raises(StorageError, match="lock was lost"),
        ):
            workflow(saver).invoke(3, _config("t"), durability="sync")
        assert proxy.hit.is_set()
    finally:
        proxy.close()
    assert _returns(url) == 0
    _wait_for(lambda: _lock_is_free(url, "t"))  # the server has seen the connection go
    with PostgresSaver.from_conn_string(url) as saver:
        assert workflow(saver).invoke(None, _config("t")) == 8
    assert ran == ["a", "a"]
    assert _returns(url) == 1


def _wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
