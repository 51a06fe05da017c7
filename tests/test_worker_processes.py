"""Worker processes killed, paused, stopped, and cut off from their database.

Workers run as ``pregelkit worker`` subprocesses on the same database as the
test (SQLite file or PostgreSQL); the workflows (``fleet_flows``) log each
step to a table, fenced by the run's lease, so the tests can tell which
holder ran what. Wall-clock bounds are generous guards, not goals (those
are in benchmarks/fleet.py).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

import fleet_flows
from fleet_harness import (
    LEASE,
    WorkerProcess,
    cfg,
    check_exactly_once,
    saved_rows,
    steps_logged,
    wait_for,
)
from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.worker import Worker

from pgserver import PgServer


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(url: str, *targets: str, step_seconds: float = 0.0) -> WorkerProcess:
        w = WorkerProcess(url, *targets, tmp=tmp_path, step_seconds=step_seconds)
        started.append(w)
        return w

    yield start
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
        if w.proc.stdout is not None:
            w.proc.stdout.close()


def test_killed_worker_run_resumes_elsewhere(
    queue_db: tuple[str, Any], workers: Callable[..., WorkerProcess]
) -> None:
    url, saver = queue_db
    handle = fleet_flows.chain.copy(checkpointer=saver).submit(6, cfg("k"))
    a = workers(url, "fleet_flows:chain", step_seconds=0.3)
    wait_for("two steps", lambda: len(steps_logged(url, "k")) >= 2)
    a.signal(signal.SIGKILL)
    a.proc.wait()
    killed = time.monotonic()
    Worker([fleet_flows.chain], saver, lease_seconds=LEASE).run_until_idle()
    assert handle.result(timeout=5) == sum(range(6))
    record = handle.record()
    assert (record.status, record.attempts, record.fence) == ("done", 2, 2)
    assert time.monotonic() - killed < 30
    logged = steps_logged(url, "k")
    check_exactly_once(logged, 6, interrupted=1)
    # the steps the dead worker finished were not run again
    first = {s for s, f in logged if f == 1}
    assert len(first) >= 2
    assert len([s for s, f in logged if f == 2 and s in first]) <= 1


def test_paused_worker_cannot_write_after_losing_its_lease(
    queue_db: tuple[str, Any], workers: Callable[..., WorkerProcess]
) -> None:
    url, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handle = chain.submit(5, cfg("p"))
    a = workers(url, "fleet_flows:chain", step_seconds=0.4)
    wait_for("a step", lambda: steps_logged(url, "p"))
    a.signal(signal.SIGSTOP)
    # another worker takes the run once the lease expires, and finishes it
    Worker([fleet_flows.chain], saver, lease_seconds=LEASE).run_until_idle()
    assert handle.result(timeout=5) == sum(range(5))
    logged, saved, state = steps_logged(url, "p"), saved_rows(url, "p"), chain.get_state(cfg("p"))
    a.signal(signal.SIGCONT)
    wait_for("the paused worker to drop the run", lambda: "lease lost" in a.stderr)
    time.sleep(1.0)  # what it would write, it would have written by now
    assert steps_logged(url, "p") == logged
    assert saved_rows(url, "p") == saved
    assert chain.get_state(cfg("p")).values == state.values
    assert handle.record().status == "done"
    check_exactly_once(logged, 5, interrupted=1)
    # the paused worker lives on and stops cleanly
    assert a.proc.poll() is None
    assert a.stop() == 0


def test_sigterm_hands_runs_back(
    queue_db: tuple[str, Any], workers: Callable[..., WorkerProcess]
) -> None:
    url, saver = queue_db
    slow = fleet_flows.slow.copy(checkpointer=saver)
    handle = slow.submit([0.3] * 10, cfg("s"))
    a = workers(url, "fleet_flows:slow")
    wait_for("the run to start", lambda: handle.status() == "running")
    time.sleep(0.5)
    a.signal(signal.SIGTERM)
    assert a.proc.wait(timeout=20) == 0
    # it says why it stops, and what it waits for
    assert (
        "INFO stopping (signal SIGTERM): claiming no more runs; waiting for 1 run to finish "
        "its started tasks, then handing it back to the queue"
    ) in a.stderr
    assert "handed back" in a.stderr
    record = handle.record()
    assert (record.status, record.worker) == ("queued", None)
    Worker([slow], saver, lease_seconds=LEASE).run_until_idle()
    assert handle.result(timeout=5) == pytest.approx(3.0)
    assert handle.record().attempts == 2


def test_worker_survives_a_database_restart(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server goes away mid-run for longer than the saver's retry budget
    (here one try): the run stops with a StorageError, its lease lapses,
    and the same worker, never restarted, takes it again once the server is
    back and serves new runs too."""
    server = PgServer(durable=True)
    server.start()
    try:
        url = server.dsn
        with PostgresSaver.from_conn_string(url) as setup:
            setup.setup()
        fleet_flows.create_log(url)
        monkeypatch.setenv("FLEET_DB", url)
        monkeypatch.setenv("FLEET_STEP_SECONDS", "0.3")
        with ConnectionPool(
            url, min_size=1, max_size=6, kwargs={"autocommit": True}, timeout=0.5
        ) as pool:
            saver = PostgresSaver(pool, retry=StorageRetry(attempts=1))
            chain = fleet_flows.chain.copy(checkpointer=saver)
            handle = chain.submit(8, cfg("r"))
            handle.saver = PostgresSaver(pool)  # the caller's saver rides out the restart
            worker = Worker([fleet_flows.chain], saver, lease_seconds=LEASE)
            served = threading.Thread(target=worker.run)
            served.start()
            try:
                wait_for("two steps", lambda: len(steps_logged(url, "r")) >= 2)
                server.stop()
                time.sleep(2.0)
                server.start()
                assert handle.result(timeout=60) == sum(range(8))
                assert handle.record().attempts >= 2  # the run stopped and was taken again
                later = chain.submit(3, cfg("r2"))
                later.saver = handle.saver
                assert later.result(timeout=30) == 3
                assert served.is_alive()
            finally:
                worker.stop()
                served.join(timeout=30)
            assert not served.is_alive()
        warnings = [r.getMessage() for r in caplog.records if r.name == "pregelkit.worker"]
        assert any("database failure" in w for w in warnings), warnings
        check_exactly_once(steps_logged(url, "r"), 8, interrupted=1)
    finally:
        server.destroy()
