"""Benchmarks of runs that wait (issue 28): what an idle fleet costs while
many runs sleep or wait, and how late a worker wakes one.

* idle: N = 0, 1,000 and 10,000 runs sleeping (an hour) or waiting (for a
  message that never comes), half each, put there by workers as a real run
  gets there (its wait recorded, its row suspended); then 4 idle
  ``pregelkit worker`` processes (default lease) for ``WINDOW`` seconds:
  statements and round trips per second they send (PostgreSQL, through
  ``pg_wire.WireCounter``), CPU per second in the workers and in the
  server. Goal: independent of N. And the plan of the claim at 10,000.
* wake: runs sleeping until due times spread over a few seconds, and runs
  woken by ``durable.send`` at times spread as much, 4 workers: each run
  returns ``time.time()`` after its wait, minus its due time (or the send's):
  p50 / p99 / max.

Writes its section of docs/benchmarks.md (between ``<!-- waiting -->``
markers), after ``benchmarks/fleet.py`` has written its own.

    python benchmarks/waiting.py            # full: writes docs/benchmarks.md
    python benchmarks/waiting.py --quick    # small, prints only
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- waiting:start -->", "<!-- waiting:end -->"
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import waiting_workload  # noqa: E402
from fleet import (  # noqa: E402
    _cpu_seconds,
    _postmaster,
    _server_cpu_seconds,
    cfg,
    live_workers,
    postgres,
    saver_for,
    stop,
    wait_until,
)

from pregelkit import durable  # noqa: E402
from pregelkit.checkpoint import _runqueue  # noqa: E402
from pregelkit.checkpoint.base import BaseCheckpointSaver  # noqa: E402

WORKFLOWS = ("sleeps", "sleeps_until", "receives")
WINDOW = 15.0
"""Seconds the idle fleet is watched: a heartbeat (every lease / 3 = 10 s)
falls in it at least once per worker."""
SETTLE = 5.0
"""Seconds the idle workers get first: to start, and for their poll pause to
grow to its longest (``worker._core.IDLE_POLL_SECONDS``)."""


def reset(url: str) -> None:
    tables = (
        "pregelkit_runs",
        "pregelkit_workers",
        "pregelkit_checkpoints",
        "pregelkit_writes",
        "pregelkit_blobs",
        "pregelkit_messages",
        "pregelkit_events",
    )
    with saver_for(url) as saver:
        conn: Any = getattr(saver, "conn", None)
        sql = "; ".join(f"DELETE FROM {t}" for t in tables)
        if url.startswith("postgresql://"):
            with conn.connection() as c:
                c.execute(sql)
        else:
            conn.executescript(sql)


def start_workers(url: str, n: int, concurrency: int = 4) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pregelkit", "worker"]
    command += [f"waiting_workload:{w}" for w in WORKFLOWS]
    command += ["--db", url, "--concurrency", str(concurrency)]
    return [
        subprocess.Popen(
            command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(n)
    ]


def count(saver: BaseCheckpointSaver[Any], statuses: Sequence[str]) -> int:
    marks = ", ".join("?" for _ in statuses)

    def plan(d: Any) -> Any:
        sql = f"SELECT count(*) FROM pregelkit_runs WHERE status IN ({marks})"
        row = yield d.q(sql, tuple(statuses), "one")
        return int(row[0])

    found: int = saver.run_queue(plan, "bench: count")
    return found


def fill(url: str, saver: BaseCheckpointSaver[Any], start: int, stop_at: int) -> float:
    """Runs ``start`` .. ``stop_at`` - 1 queued, half to sleep an hour and
    half to wait for a message, and suspended by two loading workers; the
    seconds that took."""
    if stop_at <= start:
        return 0.0
    began = time.perf_counter()
    sleeps = waiting_workload.sleeps.copy(checkpointer=saver)
    receives = waiting_workload.receives.copy(checkpointer=saver)
    for i in range(start, stop_at):
        if i % 2:
            receives.submit("never", cfg(f"w{i}"))
        else:
            sleeps.submit(3600.0, cfg(f"s{i}"))
    loaders = start_workers(url, 2, concurrency=8)
    try:
        wait_until(lambda: count(saver, ("sleeping", "waiting")) == stop_at, 1800, 0.5)
    finally:
        stop(loaders)
    took = time.perf_counter() - began
    if url.startswith("postgresql://"):
        # the load's aftermath (autovacuum of the rows it updated, a
        # checkpoint) is not what the idle fleet costs: done before it
        conn: Any = getattr(saver, "conn", None)
        with conn.connection() as c:
            c.execute("VACUUM ANALYZE")
            c.execute("CHECKPOINT")
    return took


@dataclass
class Idle:
    waiting: int
    statements: float | None
    """Per second, BEGIN and COMMIT included; None without a wire count (SQLite)."""
    round_trips: float | None
    worker_ms: float
    """CPU milliseconds per second, the 4 worker processes together."""
    server_ms: float | None


def idle(url: str, saver: BaseCheckpointSaver[Any], waiting: int, window: float) -> Idle:
    """What 4 idle workers cost per second while ``waiting`` runs wait."""
    counter = None
    if url.startswith("postgresql://"):
        from pg_wire import WireCounter

        counter = WireCounter(url)
    postmaster = _postmaster(url)
    procs = start_workers(counter.dsn if counter else url, 4)
    try:
        wait_until(lambda: live_workers(saver) == 4, 60)
        time.sleep(SETTLE)
        pids = [p.pid for p in procs]
        cpu0, db0 = _cpu_seconds(pids), _server_cpu_seconds(postmaster)
        sent0, t0 = (counter.snapshot() if counter else None), time.perf_counter()
        time.sleep(window)
        elapsed = time.perf_counter() - t0
        sent = counter.snapshot() - sent0 if counter and sent0 is not None else None
        cpu = _cpu_seconds(pids) - cpu0
        db = _server_cpu_seconds(postmaster) - db0
        assert count(saver, ("sleeping", "waiting")) == waiting, "a waiting run was claimed"
    finally:
        stop(procs)
        if counter:
            counter.close()
    return Idle(
        waiting,
        sent["statements"] / elapsed if sent is not None else None,
        sent["round_trips"] / elapsed if sent is not None else None,
        cpu / elapsed * 1e3,
        db / elapsed * 1e3 if postmaster else None,
    )


def claim_plan(url: str, saver: BaseCheckpointSaver[Any]) -> list[str]:
    """The plan of an idle worker's claim (nothing due) over the rows there are."""
    dialect = _runqueue.POSTGRES if url.startswith("postgresql://") else _runqueue.SQLITE
    statement = next(_runqueue.claim(dialect, "bench", list(WORKFLOWS), 4, 30.0))
    conn: Any = getattr(saver, "conn", None)
    if not url.startswith("postgresql://"):
        rows = conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
        return [str(row[-1]) for row in rows]
    with conn.connection() as c:
        c.execute("BEGIN")
        try:  # ANALYZE runs the UPDATE: rolled back
            explain = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "
            rows = c.execute(explain + statement.sql, statement.params).fetchall()
        finally:
            c.execute("ROLLBACK")
    return [str(row[0]) for row in rows]


@dataclass
class Wake:
    delays: list[float]
    suspended: int
    """How many of the runs were suspended (claimed a second time to wake)."""

    def __str__(self) -> str:
        ms = sorted(d * 1e3 for d in self.delays)
        p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
        return (
            f"{statistics.median(ms):,.0f} | {p99:,.0f} | {ms[-1]:,.0f} | "
            f"{self.suspended} of {len(ms)}"
        )


def _attempts(saver: BaseCheckpointSaver[Any]) -> int:
    def plan(d: Any) -> Any:
        row = yield d.q("SELECT count(*) FROM pregelkit_runs WHERE attempts >= 2", (), "one")
        return int(row[0])

    found: int = saver.run_queue(plan, "bench: attempts")
    return found


def wake(url: str, runs: int, spread: float) -> tuple[Wake, Wake]:
    """Wake-up delays with 4 workers: of ``runs`` sleeping until due times
    spread over ``spread`` seconds, then of ``runs`` woken by sends spread so."""
    reset(url)
    with saver_for(url) as saver:
        procs = start_workers(url, 4)
        try:
            wait_until(lambda: live_workers(saver) == 4, 60)
            sleeps = waiting_workload.sleeps_until.copy(checkpointer=saver)
            first = time.time() + 5.0
            handles = [sleeps.submit(first + spread * i / runs, cfg(f"s{i}")) for i in range(runs)]
            woke = [h.result(timeout=120) for h in handles]
            timers = Wake(
                [w - (first + spread * i / runs) for i, w in enumerate(woke)], _attempts(saver)
            )
            receives = waiting_workload.receives.copy(checkpointer=saver)
            handles = [receives.submit("go", cfg(f"r{i}")) for i in range(runs)]
            wait_until(lambda: count(saver, ("waiting",)) == runs, 120, 0.1)
            for i in range(runs):
                durable.send(saver, f"r{i}", time.time(), topic="go")
                time.sleep(spread / runs)
            got = [h.result(timeout=120) for h in handles]
            messages = Wake([w - s for s, w in got], _attempts(saver) - timers.suspended)
        finally:
            stop(procs)
    return timers, messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run; writes nothing")
    parser.add_argument(
        "--only", choices=("SQLite", "PostgreSQL"), help="one database; writes nothing"
    )
    args = parser.parse_args()
    sizes = (0, 100, 1_000) if args.quick else (0, 1_000, 10_000)
    window = 5.0 if args.quick else WINDOW
    wake_runs = 40 if args.quick else 200
    load = os.getloadavg()[0]
    idle_rows: list[str] = []
    wake_rows: list[str] = []
    plans: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, postgres() as pg:
        for name, url in (("PostgreSQL", pg), ("SQLite", os.path.join(tmp, "waiting.db"))):
            if args.only not in (None, name):
                continue
            reset(url)
            loaded = 0
            with saver_for(url) as saver:
                for n in sizes:
                    took = fill(url, saver, loaded, n)
                    loaded = n
                    cost = idle(url, saver, n, window)
                    idle_rows.append(
                        f"| {name} | {n:,} | "
                        + (
                            f"{cost.statements:.1f} | {cost.round_trips:.1f} | "
                            if cost.statements is not None and cost.round_trips is not None
                            else "— | — | "
                        )
                        + f"{cost.worker_ms:.1f} | "
                        + (f"{cost.server_ms:.1f} |" if cost.server_ms is not None else "— |")
                    )
                    print(idle_rows[-1], f"(loaded in {took:.0f} s)", flush=True)
                plans.append(f"{name}, {loaded:,} runs waiting:\n\n```\n")
                plans[-1] += "\n".join(claim_plan(url, saver)) + "\n```"
                print(plans[-1], flush=True)
            timers, messages = wake(url, wake_runs, 4.0)
            wake_rows += [f"| {name} | timer | {timers} |", f"| {name} | message | {messages} |"]
            print(*wake_rows[-2:], sep="\n", flush=True)
    section = "\n".join(
        [
            START,
            "## Runs that wait (issue 28)",
            "",
            f"`python benchmarks/waiting.py` on {platform.machine()}, {os.cpu_count()} CPUs "
            f"(load average {load:.1f} when it started: other jobs share them), Python "
            f"{platform.python_version()}. 4 `pregelkit worker` processes (concurrency 4, "
            "default lease of 30 s) with nothing to do while N runs wait: half sleep "
            "for an hour, half wait for a message that never comes, each put there by "
            "a worker as any run gets there (its wait recorded in its checkpoint, its "
            "row suspended; on PostgreSQL then `VACUUM ANALYZE` and `CHECKPOINT`, so "
            "that autovacuum's visit after the load is not counted). Watched for "
            f"{window:g} s after {SETTLE:g} s to settle: statements (BEGIN and COMMIT "
            "included) and round trips per second the four send PostgreSQL (through "
            "`benchmarks/pg_wire.py`'s counting proxy), and CPU milliseconds per second "
            "in the four workers (SQLite's work included) and in the PostgreSQL server "
            "(counted in 10 ms clock ticks: about 3 ms/s either way). "
            "Goal: the same whatever N:",
            "",
            "| database | runs waiting | statements/s | round trips/s "
            "| worker CPU ms/s | server CPU ms/s |",
            "| --- | --- | --- | --- | --- | --- |",
            *idle_rows,
            "",
            "An idle worker's claim with the most runs waiting (none due):",
            "",
            "\n\n".join(plans),
            "",
            f"How late a run wakes, with 4 workers: {wake_runs} runs sleeping until due "
            "times spread over 4 s (each suspended first: due 5 s or more after it "
            f"started), then {wake_runs} runs waiting for a message, sent one by one over "
            "4 s. The delay is the run's `time.time()` after its wait minus its due time "
            "(or the send's), in milliseconds; an idle worker asks the queue after a "
            "pause growing from 0.2 s to 1 s (`IDLE_POLL_SECONDS`):",
            "",
            "| database | woken by | p50 ms | p99 ms | max ms | suspended first |",
            "| --- | --- | --- | --- | --- | --- |",
            *wake_rows,
            END,
        ]
    )
    if args.quick or args.only:
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
