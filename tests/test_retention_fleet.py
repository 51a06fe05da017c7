"""Retention with workers running (SQLite and PostgreSQL): the background
prune of ``Worker(..., retention=...)``, prunes beside running and waiting
runs, a prune killed mid-way, ``pregelkit prune`` and Ctrl-C."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.durable import RetentionPolicy, prune
from pregelkit.func import entrypoint, task
from pregelkit.worker import Worker
from test_retention import _async_saver, _config, _counter, _rows, open_db, pg_database


@pytest.fixture(scope="module")
def _pg(postgres_database: Any) -> str:
    return pg_database(postgres_database, "pregelkit_retention_fleet")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    pg = request.getfixturevalue("_pg") if request.param == "postgres" else ""
    yield from open_db(request, tmp_path, pg)


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


def test_a_real_ctrl_c_mid_transaction_lets_it_commit_then_stops(
    db: tuple[str, Any], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT delivered inside a transaction (as a user's Ctrl-C lands): the
    transaction finishes and the prune stops after it, exit 130; raised
    where it landed, it could leave the saver's connection marked as held
    ("close() inside a grouped() block", 1 real Ctrl-C in 60)."""
    import signal

    from pregelkit.checkpoint import _retention
    from pregelkit.cli import main

    url, saver = db
    counter = _counter(saver)
    for _ in range(3):
        counter.invoke({"steps": 1}, _config("k-000"))
    for t in range(1, 40):
        saver.copy_thread("k-000", f"k-{t:03}")
    monkeypatch.setattr(_retention, "THREADS_PER_SCAN", 10)
    real = _retention._history
    calls = [0]

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            signal.raise_signal(signal.SIGINT)
        return (yield from real(*args, **kwargs))

    per_thread = len(list(saver.list(_config("k-000"))))
    monkeypatch.setattr(_retention, "_history", interrupted)
    assert main(["prune", "--db", url, "--keep-latest"]) == 130
    assert calls[0] == 2  # stopped right after the transaction it landed in
    # ... which committed: the threads of two scans (10 each) pruned, not of one
    assert len(list(saver.list(None))) == 40 * per_thread - 20 * (per_thread - 1)
    assert "interrupted between two transactions" in capfd.readouterr().out
    monkeypatch.setattr(_retention, "_history", real)
    assert main(["prune", "--db", url, "--keep-latest"]) == 0
    assert len(list(saver.list(None))) == 40
    assert counter.invoke({"steps": 1}, _config("k-039")) == 4


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


def test_a_sleeping_run_survives_the_harshest_prune(db: tuple[str, Any]) -> None:
    from pregelkit import durable
    from pregelkit.testing import FakeClock

    _, saver = db

    @task
    def add(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def napper(x: int) -> int:
        y = add(add(x).result()).result()
        durable.sleep(3600)
        return add(y).result()

    harsh = RetentionPolicy(
        keep_checkpoints=1, max_age=0, ended_runs_max_age=0, delete_threads_after=0
    )
    with FakeClock(skip_sleeps=False) as clock:
        handle = napper.submit(1, _config("nap"))
        worker = Worker([napper], saver, concurrency=1, lease_seconds=5)
        serving = threading.Thread(target=worker.run, daemon=True)
        serving.start()
        try:
            end = time.monotonic() + 60
            while handle.status() != "sleeping":
                assert time.monotonic() < end
                time.sleep(0.02)
            report = prune(saver, harsh)
            assert report.threads_deleted == 0 and report.rows["runs"] == 0
            clock.advance(3601)
            assert handle.result(timeout=30) == 4
        finally:
            worker.stop()
            serving.join(30)
