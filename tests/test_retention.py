"""Retention (``pregelkit.durable.prune``, ``RetentionPolicy``) on SQLite and
PostgreSQL: what a policy removes, what it never removes (a thread resumes
after any prune), dry runs, and the edges (forks, subgraph namespaces,
interrupts, two prunes at once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.durable import PruneReport, RetentionPolicy, aprune, prune
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt
from pregelkit.worker import Worker


def _config(thread: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **more}}


@pytest.fixture(scope="module")
def _pg(postgres_database: Any) -> str:
    return str(postgres_database("pregelkit_retention"))


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(URL, saver) of an empty database."""
    if request.param == "sqlite":
        url = str(tmp_path / "r.db")
        with SqliteSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver
        return
    url = request.getfixturevalue("_pg_ready")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE pregelkit_checkpoints, pregelkit_blobs, pregelkit_writes, "
            "pregelkit_thread_control, pregelkit_attempts, pregelkit_runs, "
            "pregelkit_workers, pregelkit_messages, pregelkit_events, pregelkit_retention"
        )
    with PostgresSaver.from_conn_string(url) as saver:
        yield url, saver


@pytest.fixture(scope="module")
def _pg_ready(_pg: str) -> str:
    with PostgresSaver.from_conn_string(_pg) as saver:
        saver.setup()
    return _pg


def _counter(saver: Any) -> Any:
    @task
    def add(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def counter(inp: dict[str, Any], *, previous: int | None = None) -> int:
        total = previous or 0
        for _ in range(inp.get("steps", 1)):
            total = add(total).result()
        if inp.get("ask"):
            total += interrupt("how much more?")
        return total

    return counter


def _rows(saver: Any, thread: str) -> int:
    return len(list(saver.list(_config(thread))))


# the policy


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, "keeps everything"),
        ({"keep_checkpoints": 0}, "int >= 1"),
        ({"keep_checkpoints": True}, "int >= 1"),
        ({"keep_checkpoints": 1.5}, "int >= 1"),
        ({"max_age": -1}, "finite duration >= 0"),
        ({"max_age": float("inf")}, "finite duration >= 0"),
        ({"max_age": float("nan")}, "finite duration >= 0"),
        ({"ended_runs_max_age": timedelta(seconds=-1)}, "finite duration >= 0"),
        ({"delete_threads_after": "30d"}, "timedelta or a number of seconds"),
    ],
)
def test_a_policy_is_checked_when_made(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        RetentionPolicy(**kwargs)


def test_prune_refuses_a_saver_without_sql_and_a_non_policy(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="InMemorySaver cannot be pruned"):
        prune(InMemorySaver(), RetentionPolicy(keep_checkpoints=1))
    with SqliteSaver.from_conn_string(str(tmp_path / "x.db")) as saver:
        saver.setup()
        with pytest.raises(TypeError, match="takes a RetentionPolicy"):
            prune(saver, {"keep_checkpoints": 1})  # type: ignore[arg-type]


def _first_result(saver: Any, thread: str) -> dict[str, Any]:
    """The config of the thread's oldest checkpoint after a step (value 1)."""
    loops = [t for t in saver.list(_config(thread)) if t.metadata.get("source") == "loop"]
    return dict(loops[-1].config["configurable"])


# what goes


def test_keep_checkpoints_keeps_the_latest_n_of_each_thread(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for thread in ("a", "b"):
        for _ in range(5):
            counter.invoke({"steps": 2}, _config(thread))
    before = {t: _rows(saver, t) for t in ("a", "b")}
    dry = prune(saver, RetentionPolicy(keep_checkpoints=3), dry_run=True)
    assert {t: _rows(saver, t) for t in ("a", "b")} == before
    report = prune(saver, RetentionPolicy(keep_checkpoints=3))
    assert isinstance(report, PruneReport) and not report.dry_run
    assert report.rows == dry.rows and report.bytes == dry.bytes
    assert report.rows["checkpoints"] == sum(n - 3 for n in before.values())
    assert report.bytes["checkpoints"] > 0 and report.rows["blobs"] > 0
    assert {t: _rows(saver, t) for t in ("a", "b")} == {"a": 3, "b": 3}
    # a second prune finds nothing more to do
    assert prune(saver, RetentionPolicy(keep_checkpoints=3)).total_rows == 0
    # the same values, and the history goes on from them
    assert counter.get_state(_config("a")).values == 10
    assert counter.invoke({"steps": 1}, _config("a")) == 11
    assert "would remove" in str(dry) and "removed" in str(report)


def test_max_age_drops_older_history_but_never_the_latest(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for _ in range(4):
        counter.invoke({"steps": 1}, _config("old"))
    assert prune(saver, RetentionPolicy(max_age=3600)).rows["checkpoints"] == 0
    before = _rows(saver, "old")
    report = prune(saver, RetentionPolicy(max_age=0))
    assert report.rows["checkpoints"] == before - 1 and report.rows["attempts"] > 0
    assert _rows(saver, "old") == 1
    assert counter.invoke({"steps": 1}, _config("old")) == 5


def test_an_interrupted_thread_keeps_what_its_answer_needs(db: tuple[str, Any]) -> None:
    """A thread interrupted for a year: its history goes, its question and
    the pending writes before it stay, and the answer finishes it."""
    _, saver = db
    counter = _counter(saver)
    counter.invoke({"steps": 3}, _config("q"))
    counter.invoke({"steps": 2, "ask": True}, _config("q"))
    report = prune(
        saver,
        RetentionPolicy(
            keep_checkpoints=1, max_age=0, delete_threads_after=0, ended_runs_max_age=0
        ),
    )
    assert report.threads_deleted == 0
    assert _rows(saver, "q") == 1
    state = counter.get_state(_config("q"))
    assert [i.value for i in state.interrupts] == ["how much more?"]
    assert counter.invoke(Command(resume=100), _config("q")) == 105


def test_delete_threads_after_deletes_only_ended_threads(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    counter.invoke({"steps": 2}, _config("ended"))
    counter.invoke({"steps": 2, "ask": True}, _config("asking"))
    handle = counter.submit({"steps": 1}, _config("queued"))
    # idle for an hour: none yet
    assert prune(saver, RetentionPolicy(delete_threads_after=3600)).threads_deleted == 0
    report = prune(saver, RetentionPolicy(delete_threads_after=0))
    assert report.threads_deleted == 1
    assert _rows(saver, "ended") == 0 and _rows(saver, "asking") == 1
    assert counter.invoke(Command(resume=1), _config("asking")) == 3
    assert Worker([counter], saver).run_until_idle() == 1
    assert handle.result(timeout=30) == 1
    # a thread deleted whole starts again from nothing
    assert counter.invoke({"steps": 1}, _config("ended")) == 1


def test_ended_runs_go_and_active_ones_stay(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for i in range(3):
        counter.submit({"steps": 1}, _config(f"r{i}"))
    Worker([counter], saver).run_until_idle()
    queued = counter.submit({"steps": 1}, _config("waiting"))
    report = prune(saver, RetentionPolicy(ended_runs_max_age=0))
    assert report.rows["runs"] == 3 and report.bytes["runs"] > 0
    assert queued.status() == "queued"
    Worker([counter], saver).run_until_idle()
    assert queued.result(timeout=30) == 1


def test_a_fork_a_queued_run_starts_from_stays(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for _ in range(4):
        counter.invoke({"steps": 1}, _config("f"))
    fork = _first_result(saver, "f")
    assert counter.get_state({"configurable": fork}).values == 1
    handle = counter.submit({"steps": 10}, {"configurable": dict(fork)})
    prune(saver, RetentionPolicy(keep_checkpoints=1, max_age=0))
    kept = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("f"))}
    assert fork["checkpoint_id"] in kept and len(kept) == 2
    Worker([counter], saver).run_until_idle()
    assert handle.result(timeout=30) == 11


def test_subgraph_namespaces_keep_their_latest(db: tuple[str, Any]) -> None:
    """A thread interrupted inside a subgraph: each namespace keeps its
    latest checkpoint, and the answer resumes the subgraph where it stopped."""
    from pregelkit.channels import LastValue
    from pregelkit.pregel import NodeBuilder, Pregel

    _, saver = db

    def ask(v: str) -> str:
        return v + str(interrupt("inner question"))

    inner = Pregel(
        nodes={
            "i1": NodeBuilder().subscribe_only("x").do(lambda v: v + "-i1").write_to("y"),
            "i2": NodeBuilder().subscribe_only("y").do(ask).write_to("z"),
        },
        channels={"x": LastValue(str), "y": LastValue(str), "z": LastValue(str)},
        input_channels="x",
        output_channels="z",
        name="inner",
    )
    outer = Pregel(
        nodes={
            "pre": NodeBuilder().subscribe_only("a").do(lambda v: v + "-pre").write_to("x"),
            "sub": NodeBuilder().subscribe_only("x").do(inner).write_to("y"),
            "post": NodeBuilder().subscribe_only("y").do(lambda v: v + "-post").write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "x", "y", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=saver,
    )
    outer.invoke("go", _config("s"))
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(None)}
    assert len(namespaces) == 2
    report = prune(saver, RetentionPolicy(keep_checkpoints=1, max_age=0, delete_threads_after=0))
    assert report.threads_deleted == 0 and report.rows["checkpoints"] > 0
    after = list(saver.list(None))
    assert {t.config["configurable"]["checkpoint_ns"] for t in after} == namespaces
    assert len(after) == len(namespaces)
    assert outer.invoke(Command(resume="!"), _config("s")) == "go-pre-i1!-post"


def test_two_prunes_at_once_remove_each_row_once(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for t in range(12):
        for _ in range(3):
            counter.invoke({"steps": 1}, _config(f"t{t:02}"))
    total = prune(saver, RetentionPolicy(keep_checkpoints=1), dry_run=True).rows["checkpoints"]
    reports: list[PruneReport] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            reports.append(prune(saver, RetentionPolicy(keep_checkpoints=1)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    assert sum(r.rows["checkpoints"] for r in reports) == total
    for t in range(12):
        assert counter.invoke({"steps": 1}, _config(f"t{t:02}")) == 4


def _async_saver(url: str) -> Any:
    """An async saver of the database at ``url`` (its tables made already)."""
    if url.startswith("postgres"):
        from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver

        return AsyncPostgresSaver.from_conn_string(url)
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    return AsyncSqliteSaver.from_conn_string(url)


def test_aprune_on_an_async_saver(db: tuple[str, Any], arun: Any) -> None:
    url, _ = db

    async def main() -> PruneReport:
        async with _async_saver(url) as saver:
            counter = _counter(saver)
            for _ in range(3):
                await counter.ainvoke({"steps": 1}, _config("a"))
            before = len([t async for t in saver.alist(_config("a"))])
            report = await aprune(saver, RetentionPolicy(keep_checkpoints=1))
            assert report.rows["checkpoints"] == before - 1
            assert await counter.ainvoke({"steps": 1}, _config("a")) == 4
            return report

    assert arun(main()).total_rows > 0


# every kept thread resumes, whatever the policy and the thread's state

STATES = ("done", "interrupted", "queued", "fork", "failed")
_fail_once: set[str] = set()


def _flaky_counter(saver: Any) -> Any:
    @task
    def add(x: int, thread: str) -> int:
        if thread in _fail_once:
            _fail_once.discard(thread)
            raise RuntimeError("transient")
        return x + 1

    @entrypoint(checkpointer=saver)
    def flaky(inp: dict[str, Any], *, previous: int | None = None) -> int:
        total = previous or 0
        for _ in range(inp.get("steps", 1)):
            total = add(total, inp["thread"]).result()
        if inp.get("ask"):
            total += interrupt("more?")
        return total

    return flaky


def _valid(**kwargs: Any) -> RetentionPolicy | None:
    try:
        return RetentionPolicy(**kwargs)
    except ValueError:
        return None


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    states=st.lists(st.sampled_from(STATES), min_size=1, max_size=6),
    keep=st.sampled_from([None, 1, 2]),
    max_age=st.sampled_from([None, 0, 3600]),
    runs_age=st.sampled_from([None, 0]),
    threads_after=st.sampled_from([None, 0, 86400]),
    dry_run=st.booleans(),
)
def test_every_kept_thread_resumes_after_a_prune(
    db: tuple[str, Any],
    states: list[str],
    keep: int | None,
    max_age: int | None,
    runs_age: int | None,
    threads_after: int | None,
    dry_run: bool,
) -> None:
    policy = _valid(
        keep_checkpoints=keep,
        max_age=max_age,
        ended_runs_max_age=runs_age,
        delete_threads_after=threads_after,
    )
    if policy is None:
        return
    _, saver = db
    flaky = _flaky_counter(saver)
    run = str(id(states)) + str(len(_fail_once))
    expected: dict[str, Any] = {}
    handles: dict[str, Any] = {}
    for i, state in enumerate(states):
        thread = f"{run}-{i}-{state}"
        for _ in range(3):  # history
            flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
        if state == "done":
            deleted = threads_after == 0 and not dry_run
            expected[thread] = ("invoke", 1 if deleted else 4)
        elif state == "interrupted":
            flaky.invoke({"steps": 1, "ask": True, "thread": thread}, _config(thread))
            expected[thread] = ("answer", 4 + 10)
        elif state == "queued":
            handles[thread] = flaky.submit({"steps": 2, "thread": thread}, _config(thread))
            expected[thread] = ("handle", 5)
        elif state == "fork":
            fork = _first_result(saver, thread)
            handles[thread] = flaky.submit({"steps": 2, "thread": thread}, {"configurable": fork})
            expected[thread] = ("handle", 3)
        else:
            _fail_once.add(thread)
            with pytest.raises(RuntimeError, match="transient"):
                flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
            deleted = threads_after == 0 and not dry_run
            expected[thread] = ("gone", 0) if deleted else ("resume", 4)
    prune(saver, policy, dry_run=dry_run)
    Worker([flaky], saver).run_until_idle()
    for thread, (how, value) in expected.items():
        if how == "invoke":
            got = flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
        elif how == "answer":
            got = flaky.invoke(Command(resume=10), _config(thread))
        elif how == "handle":
            got = handles[thread].result(timeout=30)
        elif how == "gone":
            got = _rows(saver, thread)
        else:
            got = flaky.invoke(None, _config(thread))
        assert got == value, (thread, policy)


# workers


def test_one_worker_at_a_time_takes_the_turn(db: tuple[str, Any]) -> None:
    from functools import partial

    from pregelkit.checkpoint import _retention

    _, saver = db

    def take(holder: str, every: float = 300.0) -> bool:
        plan = partial(_retention.take_turn, holder=holder, lease=60.0, every=every)
        return bool(saver.run_queue(plan, "test"))

    def end(holder: str, finished: bool) -> None:
        saver.run_queue(partial(_retention.end_turn, holder=holder, finished=finished), "test")

    assert take("a")
    assert not take("b")  # a holds the lease
    assert take("a")  # a again: still its own
    end("a", finished=False)
    assert take("b")  # a gave up before the end: due at once
    end("b", finished=True)
    assert not take("a")  # the fleet pruned just now
    assert take("a", every=0)


def test_a_worker_with_a_policy_prunes_in_the_background(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for t in range(5):
        for _ in range(4):
            counter.invoke({"steps": 1}, _config(f"bg{t}"))
    # a thread of its own: its checkpoints made after the prune would stay
    handle = counter.submit({"steps": 5}, _config("served"))
    worker = Worker([counter], saver, retention=RetentionPolicy(keep_checkpoints=1))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert handle.result(timeout=30) == 5
        end = time.monotonic() + 60
        while any(_rows(saver, f"bg{t}") > 1 for t in range(5)):
            assert time.monotonic() < end, "the worker did not prune"
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert counter.invoke({"steps": 1}, _config("bg0")) == 5


def test_an_async_worker_with_a_policy_prunes_in_the_background(
    db: tuple[str, Any], arun: Any
) -> None:
    import asyncio

    from pregelkit.worker import AsyncWorker

    url, _ = db

    async def main() -> int:
        async with _async_saver(url) as saver:
            counter = _counter(saver)
            for _ in range(4):
                await counter.ainvoke({"steps": 1}, _config("aw"))
            worker = AsyncWorker([counter], saver, retention=RetentionPolicy(max_age=0))
            serving = asyncio.create_task(worker.run())
            try:
                for _ in range(600):
                    if len([t async for t in saver.alist(_config("aw"))]) == 1:
                        break
                    await asyncio.sleep(0.05)
            finally:
                worker.stop()
                await serving
            return len([t async for t in saver.alist(_config("aw"))])

    assert arun(main()) == 1


def test_worker_retention_takes_a_policy(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "p.db")) as saver:
        saver.setup()
        with pytest.raises(TypeError, match=r"takes a pregelkit\.durable\.RetentionPolicy"):
            Worker([_counter(saver)], saver, retention={"keep_checkpoints": 1})  # type: ignore[arg-type]


def test_a_prune_while_workers_run_removes_nothing_they_need(db: tuple[str, Any]) -> None:
    """Workers run many-step runs and runs waiting for a message while
    prunes with the harshest policy run back to back: every run ends with
    its right result."""
    from pregelkit import durable

    _, saver = db

    @task
    def add(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def busy(n: int) -> int:
        total = 0
        for _ in range(n):
            total = add(total).result()
        return total + durable.recv(topic="go")

    # ended runs and threads are kept: the handles read their results
    harsh = RetentionPolicy(keep_checkpoints=1, max_age=0)
    handles = [busy.submit(10 + i, _config(f"w{i}")) for i in range(8)]
    workers = [Worker([busy], saver, concurrency=4, lease_seconds=5) for _ in range(2)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for th in threads:
        th.start()
    try:
        for round_ in range(6):
            # while every thread runs or waits, even delete_threads_after=0 deletes none
            if round_ < 3:
                assert prune(saver, RetentionPolicy(delete_threads_after=0)).threads_deleted == 0
            prune(saver, harsh)
            if round_ == 3:
                for i in range(8):
                    durable.send(saver, f"w{i}", 100, topic="go")
        assert [h.result(timeout=60) for h in handles] == [110 + i for i in range(8)]
        report = prune(saver, RetentionPolicy(ended_runs_max_age=0, delete_threads_after=0))
        assert report.threads_deleted == 8
    finally:
        for w in workers:
            w.stop()
        for th in threads:
            th.join(30)


_KILLED_PRUNE = """
import sys
from pregelkit.durable import RetentionPolicy, prune
url = sys.argv[1]
if url.startswith("postgres"):
    from pregelkit.checkpoint.postgres import PostgresSaver as Saver
else:
    from pregelkit.checkpoint.sqlite import SqliteSaver as Saver
with Saver.from_conn_string(url) as saver:
    prune(saver, RetentionPolicy(keep_checkpoints=1))
"""


def test_a_prune_killed_midway_leaves_a_database_the_next_prune_finishes(
    db: tuple[str, Any],
) -> None:
    import os
    import signal
    import subprocess
    import sys

    url, saver = db
    counter = _counter(saver)
    for _ in range(12):
        counter.invoke({"steps": 1}, _config("k-000"))
    for t in range(1, 400):
        saver.copy_thread("k-000", f"k-{t:03}")
    full = len(list(saver.list(None)))
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PRUNE, url], env=env)
    try:
        end = time.monotonic() + 60
        while _count(url) == full:
            assert proc.poll() is None, "the prune ended before it was killed"
            assert time.monotonic() < end
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    left = _count(url)
    assert 400 < left < full, "killed midway"
    for t in range(400):
        assert counter.get_state(_config(f"k-{t:03}")).values == 12
    report = prune(saver, RetentionPolicy(keep_checkpoints=1))
    assert report.rows["checkpoints"] == left - 400
    assert _count(url) == 400
    assert counter.invoke({"steps": 1}, _config("k-399")) == 13


def _count(url: str) -> int:
    if url.startswith("postgres"):
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pregelkit_checkpoints").fetchone()
    else:
        import sqlite3

        conn = sqlite3.connect(url, timeout=30)
        try:
            row = conn.execute("SELECT count(*) FROM pregelkit_checkpoints").fetchone()
        finally:
            conn.close()
    assert row is not None
    return int(row[0])


def test_fired_schedule_slots_go_with_ended_runs_and_never_fire_again(
    db: tuple[str, Any],
) -> None:
    from datetime import UTC, datetime

    from pregelkit.testing import FakeClock

    _, saver = db
    seen: list[str] = []

    @entrypoint(checkpointer=saver)
    def tick(value: Any, config: Any) -> Any:
        seen.append(config["configurable"]["scheduled_at"])
        return value

    with FakeClock(datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)) as clock:
        tick.schedule("t", every=timedelta(minutes=1))
        for _ in range(3):
            clock.advance(60)
            Worker([tick], saver).run_until_idle()
        report = prune(saver, RetentionPolicy(ended_runs_max_age=0))
        assert report.rows["schedule_slots"] == 2 and report.rows["runs"] == 3
        Worker([tick], saver).run_until_idle()
        clock.advance(60)
        Worker([tick], saver).run_until_idle()
    assert len(seen) == len(set(seen)) == 4


# the command line


def test_pregelkit_prune_reports_then_removes(
    db: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    from pregelkit.cli import main

    url, saver = db
    counter = _counter(saver)
    for t in range(3):
        for _ in range(3):
            counter.invoke({"steps": 1}, _config(f"c{t}"))
    before = len(list(saver.list(None)))
    assert main(["prune", "--db", url]) == 2
    assert "say what to prune" in capfd.readouterr().err
    assert main(["prune", "--db", url, "--older-than", "3w"]) == 2
    assert "not a duration" in capfd.readouterr().err
    assert main(["prune", "--db", url, "--keep-latest", "--dry-run", "--json"]) == 0
    dry = json.loads(capfd.readouterr().out)
    assert dry["dry_run"] and dry["rows"]["checkpoints"] == before - 3
    assert len(list(saver.list(None))) == before
    assert main(["prune", "--db", url, "--keep-latest", "--older-than", "30d"]) == 0
    out = capfd.readouterr().out
    assert "prune removed" in out and f"{before - 3} checkpoints" in out
    assert "checkpoints" in out.splitlines()[0]
    assert len(list(saver.list(None))) == 3
    assert counter.invoke({"steps": 1}, _config("c0")) == 4


def test_ctrl_c_mid_prune_stops_between_transactions(
    db: tuple[str, Any], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pregelkit.checkpoint import _retention
    from pregelkit.cli import main

    url, saver = db
    counter = _counter(saver)
    for _ in range(3):
        counter.invoke({"steps": 1}, _config("k-000"))
    for t in range(1, 120):
        saver.copy_thread("k-000", f"k-{t:03}")
    monkeypatch.setattr(_retention, "THREADS_PER_SCAN", 10)
    real = _retention._history
    calls = [0]

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 4:
            raise KeyboardInterrupt
        return (yield from real(*args, **kwargs))

    monkeypatch.setattr(_retention, "_history", interrupted)
    assert main(["prune", "--db", url, "--keep-latest"]) == 130
    out = capfd.readouterr().out
    assert "interrupted between two transactions" in out and "prune removed" in out
    left = len(list(saver.list(None)))
    assert 120 < left < 120 * 6
    monkeypatch.setattr(_retention, "_history", real)
    assert main(["prune", "--db", url, "--keep-latest"]) == 0
    assert len(list(saver.list(None))) == 120
    assert counter.invoke({"steps": 1}, _config("k-119")) == 4


def test_children_of_a_waiting_parent_survive_any_prune(db: tuple[str, Any]) -> None:
    """A parent waits for a message after its children ended: prunes that
    delete ended threads and runs leave the children a resuming parent reads."""
    from pregelkit import durable

    _, saver = db

    @entrypoint(checkpointer=saver)
    def child(x: int) -> int:
        return x * 2

    @entrypoint(checkpointer=saver)
    def parent(xs: list[int]) -> int:
        total = sum(h.result() for h in [child.submit(x) for x in xs])
        return total + durable.recv(topic="go")

    harsh = RetentionPolicy(
        keep_checkpoints=1, max_age=0, ended_runs_max_age=0, delete_threads_after=0
    )
    handle = parent.submit([1, 2, 3], _config("parent"))
    worker = Worker([parent, child], saver, concurrency=4, lease_seconds=5)
    serving = threading.Thread(target=worker.run, daemon=True)
    serving.start()
    try:
        end = time.monotonic() + 60
        while handle.status() != "waiting":
            assert time.monotonic() < end
            time.sleep(0.02)
        for _ in range(3):
            report = prune(saver, harsh)
            assert report.threads_deleted == 0 and report.rows["runs"] == 0
        durable.send(saver, "parent", 100, topic="go")
        assert handle.result(timeout=60) == 112
    finally:
        worker.stop()
        serving.join(30)
