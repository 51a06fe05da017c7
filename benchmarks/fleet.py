"""Benchmarks of the worker fleet (issue 15): throughput and takeover time.

* throughput: short workflows (two tasks each) through 1, 2 and 4
  ``pregelkit worker`` processes (concurrency 4 each), on SQLite and on
  PostgreSQL; runs per second from the first submit to the last run done.
* takeover: a worker serving a run is SIGKILLed; time until another
  (idle, already running) worker has claimed the run, against the goal of
  at most lease + two heartbeats.
* fence: what checking the lease costs a task (a chain of tasks run with
  and without a lease in its config, ``durability="sync"`` as workers run).

Writes its section of docs/benchmarks.md (between ``<!-- fleet -->``
markers), after ``benchmarks/run.py`` has written the rest. PostgreSQL
comes from ``PREGELKIT_TEST_PG_DSN`` or a throwaway server (tests/_pg_server.py).

    python benchmarks/fleet.py            # full: writes docs/benchmarks.md
    python benchmarks/fleet.py --quick    # small, prints only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- fleet:start -->", "<!-- fleet:end -->"
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import fleet_workload  # noqa: E402

from pregelkit.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from pregelkit.checkpoint.runs import RunHandle  # noqa: E402

LEASE = 2.0
TIMES = "\N{MULTIPLICATION SIGN}"


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@contextlib.contextmanager
def saver_for(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    if url.startswith("postgresql://"):
        from psycopg_pool import ConnectionPool

        from pregelkit.checkpoint.postgres import PostgresSaver

        with ConnectionPool(url, min_size=1, max_size=4, kwargs={"autocommit": True}) as pool:
            saver = PostgresSaver(pool)
            saver.setup()
            yield saver
    else:
        from pregelkit.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url) as sqlite_saver:
            sqlite_saver.setup()
            yield sqlite_saver


def reset(url: str) -> None:
    with saver_for(url) as saver:
        sql = (
            "DELETE FROM pregelkit_runs; DELETE FROM pregelkit_workers; "
            "DELETE FROM pregelkit_checkpoints; DELETE FROM pregelkit_writes; "
            "DELETE FROM pregelkit_blobs"
        )
        conn: Any = getattr(saver, "conn", None)
        if url.startswith("postgresql://"):
            with conn.connection() as c:
                c.execute(sql)
        else:
            conn.executescript(sql)


def start_workers(
    url: str, n: int, target: str, lease: float = LEASE
) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pregelkit",
                "worker",
                target,
                "--db",
                url,
                "--concurrency",
                "4",
                "--lease",
                str(lease),
            ],
            cwd=HERE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def live_workers(saver: BaseCheckpointSaver[Any]) -> int:
    from pregelkit.checkpoint import _runqueue

    _, workers = saver.run_queue(
        lambda d: _runqueue.list_runs(d, None, 1, 5.0), "bench: workers"
    )  # fmt: skip
    return len(workers)


def wait_until(check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        time.sleep(0.01)


def _cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) the processes ``pids`` have used so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone: counted up to its last look
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _server_pids(url: str) -> list[int]:
    """The PostgreSQL server's processes (postmaster and backends); none for SQLite,
    whose database work is done inside the worker processes."""
    if not url.startswith("postgresql://"):
        return []
    import psycopg

    with psycopg.connect(url) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        with open(f"/proc/{backend}/stat") as f:  # while the backend lives
            postmaster = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{postmaster}/task/{postmaster}/children") as f:
        return [postmaster, *map(int, f.read().split())]


@dataclass
class Rate:
    per_second: float
    worker_ms: float
    """CPU milliseconds per run in the worker processes (SQLite's work included)."""
    server_ms: float
    """CPU milliseconds per run in the PostgreSQL server."""


def throughput(url: str, workers: int, runs: int, workflow: str = "short") -> Rate:
    """Runs per second of ``workflow`` through ``workers`` worker processes,
    and the CPU each run cost the workers and the database server."""
    reset(url)
    procs = start_workers(url, workers, f"fleet_workload:{workflow}")
    try:
        with saver_for(url) as saver:
            wait_until(lambda: live_workers(saver) == workers, 60)
            wf = getattr(fleet_workload, workflow).copy(checkpointer=saver)
            pids = [p.pid for p in procs]
            server = _server_pids(url)
            cpu0, db0 = _cpu_seconds(pids), _cpu_seconds(server)
            started = time.perf_counter()
            handles = [wf.submit(i, cfg(f"t{i}")) for i in range(runs)]
            last = handles[-1]
            wait_until(lambda: _done(saver) == runs, 600)
            elapsed = time.perf_counter() - started
            cpu, db = _cpu_seconds(pids) - cpu0, _cpu_seconds(server) - db0
            assert last.result() == runs - 1 + 2
        return Rate(runs / elapsed, cpu / runs * 1e3, db / runs * 1e3)
    finally:
        stop(procs)


def _done(saver: BaseCheckpointSaver[Any]) -> int:
    """How many runs are done: one count, cheap to ask every few milliseconds."""

    def count(d: Any) -> Any:
        row = yield d.q("SELECT count(*) FROM pregelkit_runs WHERE status = 'done'", (), "one")
        return int(row[0])

    done: int = saver.run_queue(count, "bench: count done")
    return done


def takeover(url: str) -> float:
    """Seconds from SIGKILL of the worker holding a run to another worker's claim."""
    reset(url)
    with saver_for(url) as saver:
        first = start_workers(url, 1, "fleet_workload:sleepy")
        wait_until(lambda: live_workers(saver) == 1, 60)
        handle: RunHandle = fleet_workload.sleepy.copy(checkpointer=saver).submit(200, cfg("k"))
        wait_until(lambda: handle.status() == "running", 60)
        second = start_workers(url, 1, "fleet_workload:sleepy")
        wait_until(lambda: live_workers(saver) == 2, 60)
        time.sleep(1.0)  # the run is well under way, its lease renewed
        first[0].send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        first[0].wait()
        wait_until(lambda: handle.record().attempts == 2, 60)
        took = time.perf_counter() - killed
        stop(second)
        return took


def fence_cost(url: str, tasks: int, rounds: int) -> tuple[float, float]:
    """CPU µs per task (this process: the engine and, for SQLite, the
    database) of a chain run without and with a lease (``sync``
    durability), in alternating rounds; medians."""
    from pregelkit._internal._constants import CONFIG_KEY_LEASE
    from pregelkit.checkpoint import _runqueue
    from pregelkit.func import entrypoint, task

    @task
    def inc(x: int) -> int:
        return x + 1

    with saver_for(url) as saver:

        @entrypoint(checkpointer=saver)
        def chain(n: int) -> int:
            x = 0
            for _ in range(n):
                x = inc(x).result()
            return x

        def once(thread: str, leased: bool) -> float:
            conf: dict[str, Any] = {"thread_id": thread, "__pregel_durability": "sync"}
            if leased:
                handle = chain.submit(0, cfg(thread))
                (claimed,) = saver.run_queue(
                    lambda d: _runqueue.claim(d, "bench", [str(chain.name)], 1, 600), "claim"
                )
                assert claimed.run_id == handle.run_id
                conf[CONFIG_KEY_LEASE] = (claimed.run_id, claimed.fence)
            cpu = time.process_time()
            chain.invoke(tasks, {"configurable": conf})
            return (time.process_time() - cpu) / tasks * 1e6

        run = uuid.uuid4().hex[:8]
        once(f"warm-{run}", False)
        once(f"warm-{run}-l", True)
        plain, leased = [], []
        for i in range(rounds):
            plain.append(once(f"p{i}-{run}", False))
            leased.append(once(f"l{i}-{run}", True))
        return statistics.median(plain), statistics.median(leased)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    if dsn := os.environ.get("PREGELKIT_TEST_PG_DSN"):
        yield dsn
        return
    import _pg_server

    with _pg_server.postgres_server() as dsn:
        yield dsn


WORKLOADS = (
    ("short", "CPU-light: two tasks that add numbers"),
    ("waits", "I/O-bound: two tasks that wait 0.2 s each on a service"),
)


def _rate_row(name: str, what: str, rates: dict[int, Rate]) -> str:
    one = rates[1].per_second
    cells = [f"{rates[1].per_second:,.1f}"] + [
        f"{rates[n].per_second:,.1f} ({rates[n].per_second / one:.2f}{TIMES})" for n in (2, 4)
    ]
    cpu = " / ".join(f"{rates[n].worker_ms:.1f}" for n in (1, 2, 4))
    db = " / ".join(f"{rates[n].server_ms:.1f}" for n in (1, 2, 4)) if rates[1].server_ms else "—"
    return f"| {name} | {what} | {' | '.join(cells)} | {cpu} | {db} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run; writes nothing")
    args = parser.parse_args()
    runs = {"short": 60 if args.quick else 400, "waits": 40 if args.quick else 160}
    load = os.getloadavg()[0]
    rows: list[str] = []
    takeovers: list[str] = []
    fences: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, postgres() as pg:
        for name, url in (("SQLite", os.path.join(tmp, "fleet.db")), ("PostgreSQL", pg)):
            for workflow, what in WORKLOADS:
                rates = {n: throughput(url, n, runs[workflow], workflow) for n in (1, 2, 4)}
                rows.append(_rate_row(name, what.split(":")[0], rates))
                print(rows[-1], flush=True)
            times = [takeover(url) for _ in range(1 if args.quick else 3)]
            takeovers.append(
                f"| {name} | {LEASE:g} s | {LEASE * 5 / 3:.2f} s | "
                + ", ".join(f"{t:.2f}" for t in times)
                + " s |"
            )
            plain, leased = fence_cost(url, 50 if args.quick else 200, 3 if args.quick else 7)
            fences.append(f"| {name} | {plain:,.0f} | {leased:,.0f} | {leased - plain:+,.0f} |")
            print(takeovers[-1], fences[-1], sep="\n", flush=True)
    section = "\n".join(
        [
            START,
            "## Worker fleet (issue 15)",
            "",
            f"`python benchmarks/fleet.py` on {platform.machine()}, {os.cpu_count()} CPUs "
            f"(load average {load:.1f} when it started: other jobs share them), Python "
            f"{platform.python_version()}. Workers run with concurrency 4 (threads) and "
            f"durability `sync`; {runs['short']} runs of the CPU-light workflow, "
            f"{runs['waits']} of the I/O-bound one, per figure. CPU is milliseconds per "
            "run (user + system) for 1 / 2 / 4 workers: in the worker processes (SQLite's "
            "work included) and in the PostgreSQL server.",
            "",
            f"Throughput, runs per second ({TIMES} = against one worker):",
            "",
            "| database | workflow | 1 worker | 2 workers | 4 workers "
            "| worker CPU ms/run | server CPU ms/run |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            "Time from SIGKILL of the worker holding a run to another worker claiming it "
            "(goal: at most lease + two heartbeats):",
            "",
            "| database | lease | goal | measured |",
            "| --- | --- | --- | --- |",
            *takeovers,
            "",
            "What the fence costs a task: CPU µs per task of a 200-task chain in this "
            "process (the engine, and SQLite's work), `sync`, medians of 7 alternating "
            "rounds:",
            "",
            "| database | no lease | with lease | cost |",
            "| --- | --- | --- | --- |",
            *fences,
            "",
            "See [scale-out](scale-out.md) for what limits these and the projection.",
            END,
        ]
    )
    if args.quick:
        print(section)
        return
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + section + tail
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.write_text(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
