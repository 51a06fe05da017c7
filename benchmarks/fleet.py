"""Benchmarks of the worker fleet (issue 15): throughput and takeover time.

* throughput: short workflows (two tasks each) through 1, 2 and 4
  ``pregelkit worker`` processes (concurrency 4 each), on SQLite and on
  PostgreSQL; runs per second from the first submit to the last run done.
* takeover: a worker serving a run is SIGKILLed; time until another
  (idle, already running) worker has claimed the run, against the goal of
  at most lease + two heartbeats.
* fence: what checking the lease costs a task (a chain of tasks run with
  and without a lease in its config, ``durability="sync"`` as workers run).
* queue limits (issue 29): what a named queue's limits cost: runs per
  second through 2 worker processes on the default queue against a queue
  with every limit set (none of them binding), and claims per second in one
  process (a run's end with the claim of the next), limits off and on.

Writes its section of docs/benchmarks.md (between ``<!-- fleet -->``
markers), after ``benchmarks/run.py`` has written the rest. PostgreSQL
comes from ``PREGELKIT_TEST_PG_DSN`` or a throwaway server (tests/_pg_server.py).

    python benchmarks/fleet.py            # full: writes docs/benchmarks.md
    python benchmarks/fleet.py --quick    # small, prints only
    python benchmarks/fleet.py --queues   # the queue-limits section alone (writes it)
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
QSTART, QEND = "<!-- fleet-queues:start -->", "<!-- fleet-queues:end -->"
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
            "DELETE FROM pregelkit_blobs; DELETE FROM pregelkit_queue_starts"
        )
        conn: Any = getattr(saver, "conn", None)
        if url.startswith("postgresql://"):
            with conn.connection() as c:
                c.execute(sql)
        else:
            conn.executescript(sql)


def start_workers(
    url: str, n: int, target: str, lease: float = LEASE, queues: tuple[str, ...] = ()
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
                *(arg for queue in queues for arg in ("--queue", queue)),
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


def wait_until(check: Callable[[], bool], timeout: float = 120.0, pause: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        time.sleep(pause)


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


def _postmaster(url: str) -> int | None:
    """The PostgreSQL server's main process; none for SQLite, whose database
    work is done inside the worker processes."""
    if not url.startswith("postgresql://"):
        return None
    import psycopg

    with psycopg.connect(url) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        with open(f"/proc/{backend}/stat") as f:  # while the backend lives
            return int(f.read().rsplit(")", 1)[1].split()[1])


def _server_cpu_seconds(postmaster: int | None) -> float:
    """CPU time the server has used so far, over every backend: those alive
    now (the workers open theirs after the clock starts) and, through the
    postmaster's count of its reaped children, those that have exited."""
    if postmaster is None:
        return 0.0
    with open(f"/proc/{postmaster}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{postmaster}/task/{postmaster}/children") as f:
        children = list(map(int, f.read().split()))
    return reaped + _cpu_seconds([postmaster, *children])


@dataclass
class Wire:
    """What the workers sent PostgreSQL per run (``pg_wire.WireCounter``)."""

    statements: float
    """BEGIN and COMMIT included."""
    transactions: float
    """Explicit ones: BEGIN ... COMMIT."""
    alone: float
    """Statements outside an explicit transaction."""
    implicit: float
    """The transactions those make up on the server (a simple query's
    statements, or those sent before one Sync, are one)."""
    round_trips: float

    def __str__(self) -> str:
        return (
            f"{self.statements:.1f} statements: {self.transactions:.1f} BEGIN/COMMIT "
            f"transactions and {self.alone:.1f} statements alone in "
            f"{self.implicit:.1f} transactions; "
            f"{self.round_trips:.1f} round trips"
        )


@dataclass
class Rate:
    per_second: float
    worker_ms: float
    """CPU milliseconds per run in the worker processes (SQLite's work included)."""
    server_ms: float
    """CPU milliseconds per run in the PostgreSQL server."""
    wire: Wire | None = None


def throughput(
    url: str,
    workers: int,
    runs: int,
    workflow: str = "short",
    counter: Any = None,
    queue: Any = None,
) -> Rate:
    """Runs per second of ``workflow`` through ``workers`` worker processes,
    and the CPU each run cost the workers and the database server, measured
    as an operator would: ``runs`` queued first, then the workers started;
    the clock (the database's) runs from the first worker's start of
    serving to the last run's end, each worker's CPU from its start of
    serving (its imports and connecting left out). With ``counter`` (a
    ``pg_wire.WireCounter``) the workers connect through it and the rate
    says what they sent per run; its hop slows them, so such a pass is not
    a timed figure. ``queue``: a ``Queue`` the runs are submitted to (with
    50 keys), which the workers serve."""
    reset(url)
    target = f"fleet_workload:{workflow}"
    with saver_for(url) as saver:
        wf = getattr(fleet_workload, workflow).copy(checkpointer=saver)
        if queue is None:
            handles = [wf.submit(i, cfg(f"t{i}")) for i in range(runs)]
        else:
            from pregelkit.durable import declare_queue

            declare_queue(saver, queue)
            handles = [
                wf.submit(i, cfg(f"t{i}"), queue=queue.name, key=f"k{i % 50}") for i in range(runs)
            ]
        postmaster = _postmaster(url)
        db0 = _server_cpu_seconds(postmaster)
        sent0 = counter.snapshot() if counter else None
        served = () if queue is None else (queue.name,)
        procs = start_workers(counter.dsn if counter else url, workers, target, queues=served)
        try:
            cpu0: dict[int, float] = {}
            started: list[float] = []

            def serving() -> bool:
                for pid, since in _serving(saver):
                    if pid not in cpu0:
                        cpu0[pid] = _cpu_seconds([pid])
                        started.append(since)
                return len(cpu0) == workers

            wait_until(serving, 60)
            # the clock is the database's: asked seldom, the server's CPU is the workers'
            wait_until(lambda: _done(saver) == runs, 600, pause=0.1)
            cpu = _cpu_seconds(list(cpu0)) - sum(cpu0.values())
            db = _server_cpu_seconds(postmaster) - db0
            sent = counter.snapshot() - sent0 if counter else None
            elapsed = _last_end(saver) - min(started)
            assert handles[-1].result() == runs - 1 + 2
        finally:
            stop(procs)
    rate = Rate(runs / elapsed, cpu / runs * 1e3, db / runs * 1e3)
    if sent is not None:
        rate.wire = Wire(
            sent["statements"] / runs,
            sent["begin"] / runs,
            sent["autocommit"] / runs,
            sent["implicit"] / runs,
            sent["round_trips"] / runs,
        )
    return rate


def _serving(saver: BaseCheckpointSaver[Any]) -> list[tuple[int, float]]:
    """The workers serving: each one's pid (its id is ``host:pid:suffix``)
    and when it started serving, by the database's clock (its first
    heartbeat, which registers it; read before its next one)."""

    def workers(d: Any) -> Any:
        rows = yield d.q("SELECT worker_id, seen_at FROM pregelkit_workers", (), "all")
        return [(int(str(w).split(":")[-2]), float(seen)) for w, seen in rows]

    found: list[tuple[int, float]] = saver.run_queue(workers, "bench: workers")
    return found


def _last_end(saver: BaseCheckpointSaver[Any]) -> float:
    def last(d: Any) -> Any:
        row = yield d.q("SELECT max(finished_at) FROM pregelkit_runs", (), "one")
        return float(row[0])

    end: float = saver.run_queue(last, "bench: last end")
    return end


def wire(url: str, runs: int, workflow: str = "short") -> Wire:
    """Statements, transactions and round trips per run one worker sends
    (its start and stop left out), counted in a pass of its own."""
    from pg_wire import WireCounter

    counter = WireCounter(url)
    try:
        counted = throughput(url, 1, runs, workflow, counter).wire
        assert counted is not None
        return counted
    finally:
        counter.close()


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


LIMITED = ("limited", 10_000, 100, (1_000_000, 1.0), 1_000)
"""A queue with every limit set and none binding: concurrency, per worker,
a rate limit, per key."""


def _limited() -> Any:
    from pregelkit.durable import Queue

    return Queue(*LIMITED)


def claims(url: str, cycles: int, limited: bool) -> float:
    """Claims per second in this process: a run's end recorded with the
    claim of the next (``finish_and_claim``, what a busy worker makes), on
    the default queue or on a queue with every limit set, behind a backlog."""
    from functools import partial

    from pregelkit.checkpoint import _queues, _runqueue

    reset(url)
    with saver_for(url) as saver:
        wf = fleet_workload.short.copy(checkpointer=saver)
        queue = _limited() if limited else None
        route: dict[str, Any] = {}
        if queue is not None:
            from pregelkit.durable import declare_queue

            declare_queue(saver, queue)
            route = {"queue": queue.name}
        for i in range(cycles + 50):
            wf.submit(i, cfg(f"c{i}"), key=f"k{i % 50}" if route else None, **route)
        common = {"worker_id": "w", "workflows": ["short"], "lease_seconds": 30}
        if queue is None:
            take: Any = partial(_runqueue.claim, limit=1, **common)
            end: Any = partial(_runqueue.finish_and_claim, **common)
        else:
            names = {"queues": [queue.name], "known": _queues.Known()}  # as a worker keeps
            take = partial(_queues.claim, limit=1, **common, **names)
            end = partial(_queues.finish_and_claim, **common, **names)
        alone = queue is None
        (run,) = saver.run_queue(take, "bench: claim", single=alone)
        start = time.perf_counter()
        for _ in range(cycles):
            plan = partial(end, lease=(run.run_id, run.fence), status="done", result=None,
                           error=None)  # fmt: skip
            ended, run = saver.run_queue(plan, "bench: end and claim", single=alone)
            assert ended and run is not None
        return cycles / (time.perf_counter() - start)


def queue_section(pg: str, tmp: str, quick: bool) -> str:
    """The queue-limits section: runs/s through workers and claims/s in one
    process, the default queue against a limited one, medians of rounds
    alternating off and on."""
    rounds = 1 if quick else 3
    runs, cycles = (60, 200) if quick else (200, 500)
    rows: list[str] = []
    for name, url in (("SQLite", os.path.join(tmp, "queues.db")), ("PostgreSQL", pg)):
        got: dict[str, list[float]] = {"off": [], "on": [], "claims off": [], "claims on": []}
        for _ in range(rounds):
            got["off"].append(throughput(url, 2, runs).per_second)
            got["on"].append(throughput(url, 2, runs, queue=_limited()).per_second)
            got["claims off"].append(claims(url, cycles, False))
            got["claims on"].append(claims(url, cycles, True))
        med = {k: statistics.median(v) for k, v in got.items()}
        rows.append(
            f"| {name} | {med['off']:,.1f} | {med['on']:,.1f} | {med['on'] / med['off'] - 1:+.0%} "
            f"| {med['claims off']:,.0f} | {med['claims on']:,.0f} "
            f"| {med['claims on'] / med['claims off'] - 1:+.0%} |"
        )
        print(rows[-1], flush=True)
    concurrency, per_worker, rate, per_key = LIMITED[1:]
    return "\n".join(
        [
            QSTART,
            "## Queue limits (issue 29)",
            "",
            "What a named queue's limits cost (`python benchmarks/fleet.py --queues`): the "
            "CPU-light workflow through 2 worker processes (concurrency 4) on the default "
            f"queue, against a queue with every limit set and none binding (concurrency "
            f"{concurrency:,}, {per_worker} per worker, {rate[0]:,} starts per {rate[1]:g} s, "
            f"{per_key:,} per key; runs over 50 keys), {runs} runs a figure; and claims per "
            f"second in one process, each a run's end with the claim of the next "
            f"(`finish_and_claim`) behind a backlog, {cycles} a figure. Medians of "
            f"{rounds} rounds alternating off and on. A claim of a limited queue locks the "
            "queue's row, then counts what runs and starts, in a transaction of five "
            "statements the worker sends as one query on PostgreSQL (BEGIN, the run's end, "
            "the lock, the claim built on the limits it last read, COMMIT: one round trip, "
            "as the default queue's one statement). Goal: limits cost at most 20%.",
            "",
            "| database | runs/s, default queue | runs/s, limited queue | change "
            "| claims/s, default | claims/s, limited | change |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            QEND,
        ]
    )


def write_section(section: str, start: str, end: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, _, rest = text.partition(start)
        _, _, tail = rest.partition(end)
        text = head + section + tail
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.write_text(text)
    print(f"wrote {DOC}")


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
    parser.add_argument(
        "--only", choices=("SQLite", "PostgreSQL"), help="one database; writes nothing"
    )
    parser.add_argument("--queues", action="store_true", help="the queue-limits section alone")
    args = parser.parse_args()
    if args.queues:
        with tempfile.TemporaryDirectory() as tmp, postgres() as pg:
            queues = queue_section(pg, tmp, args.quick)
        if args.quick:
            print(queues)
        else:
            write_section(queues, QSTART, QEND)
        return
    runs = {"short": 60 if args.quick else 400, "waits": 40 if args.quick else 160}
    load = os.getloadavg()[0]
    rows: list[str] = []
    takeovers: list[str] = []
    fences: list[str] = []
    sent: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, postgres() as pg:
        for name, url in (("SQLite", os.path.join(tmp, "fleet.db")), ("PostgreSQL", pg)):
            if args.only not in (None, name):
                continue
            for workflow, what in WORKLOADS:
                rates = {n: throughput(url, n, runs[workflow], workflow) for n in (1, 2, 4)}
                rows.append(_rate_row(name, what.split(":")[0], rates))
                print(rows[-1], flush=True)
                if name == "PostgreSQL":
                    counted = wire(url, runs[workflow], workflow)
                    sent.append(
                        f"| {what.split(':')[0]} | {counted.statements:.1f} "
                        f"| {counted.transactions + counted.implicit:.1f} "
                        f"| {counted.transactions:.1f} | {counted.alone:.1f} "
                        f"| {counted.round_trips:.1f} |"
                    )
                    print(sent[-1], flush=True)
            times = [takeover(url) for _ in range(1 if args.quick else 3)]
            takeovers.append(
                f"| {name} | {LEASE:g} s | {LEASE * 5 / 3:.2f} s | "
                + ", ".join(f"{t:.2f}" for t in times)
                + " s |"
            )
            plain, leased = fence_cost(url, 50 if args.quick else 200, 3 if args.quick else 7)
            fences.append(f"| {name} | {plain:,.0f} | {leased:,.0f} | {leased - plain:+,.0f} |")
            print(takeovers[-1], fences[-1], sep="\n", flush=True)
        queues = "" if args.only else queue_section(pg, tmp, args.quick)
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
            "What a worker sends PostgreSQL per run (a pass of its own, one worker, "
            "through `benchmarks/pg_wire.py`'s counting proxy; statements include BEGIN "
            "and COMMIT; transactions are the BEGIN ... COMMIT ones and those the "
            "statements sent alone make up on the server: a simple query's, or those "
            "sent before one Sync, are one). Goal "
            "for the CPU-light workflow: at most 15 statements in 6 transactions, at "
            "least 400 runs/s and at most 2 ms of worker CPU per run:",
            "",
            "| workflow | statements | transactions | of them BEGIN/COMMIT "
            "| statements alone | round trips |",
            "| --- | --- | --- | --- | --- | --- |",
            *sent,
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
    if args.quick or args.only:
        print(section, queues, sep="\n")
        return
    write_section(section, START, END)
    write_section(queues, QSTART, QEND)


if __name__ == "__main__":
    main()
