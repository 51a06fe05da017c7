"""Benchmark of retention (issue 29): how fast ``pregelkit.durable.prune``
removes history from a table of a million checkpoints, and what it costs the
workers that keep running meanwhile.

* build: one thread's history made by real runs (``HISTORY`` invokes of a
  two-task workflow: its checkpoints, writes and blobs), then copied by SQL
  to as many threads as make ``ROWS`` checkpoint rows (``INSERT ... SELECT``
  over a series: seconds, not a million invokes);
* load: 2 ``pregelkit worker`` processes (concurrency 4) serving
  ``fleet_workload:short`` while this process submits ``RATE`` runs a second
  to fresh threads; each run's claim latency (its first task's start minus
  its submit) and finish latency (its end minus its submit), p50 / p99,
  first for ``BASELINE`` seconds without a prune, then during the prune;
* prune: ``RetentionPolicy(keep_checkpoints=1)`` in this process: rows and
  checkpoints removed per second; on SQLite also with the pause a worker's
  background prune makes between two transactions.

Writes its section of docs/benchmarks.md (between ``<!-- retention -->``
markers), after ``benchmarks/waiting.py`` has written its own.

    python benchmarks/retention.py            # full: writes docs/benchmarks.md
    python benchmarks/retention.py --quick    # small, prints only
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- retention:start -->", "<!-- retention:end -->"
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import fleet_workload  # noqa: E402
from fleet import cfg, live_workers, postgres, saver_for, stop, wait_until  # noqa: E402

from pregelkit.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from pregelkit.checkpoint.retention import prune_job, run_steps  # noqa: E402
from pregelkit.durable import PruneReport, RetentionPolicy  # noqa: E402
from pregelkit.func import entrypoint, task  # noqa: E402
from pregelkit.worker._retention import PAUSE_SECONDS  # noqa: E402

ROWS = 1_000_000
HISTORY = 20
"""Invokes of the template thread: 2 checkpoints each (its input, its end)."""
RATE = 10.0
"""Runs submitted per second while the workers are measured."""
BASELINE = 10.0
THREADS_PER_INSERT = 2_000

TEMPLATE = "template"
_COLUMNS = {
    "pregelkit_checkpoints": (
        "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
        "metadata_type, metadata, metadata_json, channel_versions"
    ),
    "pregelkit_blobs": "checkpoint_ns, channel, version, type, blob",
    "pregelkit_writes": (
        "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path"
    ),
}


def _copies(url: str, first: int, last: int, table: str) -> str:
    """The statement copying the template thread's rows of ``table`` to the
    threads ``bench-<first>`` .. ``bench-<last>``."""
    columns = _COLUMNS[table]
    if url.startswith("postgresql://"):
        return (
            f"INSERT INTO {table} (thread_id, {columns}) "
            f"SELECT 'bench-' || lpad(i::text, 7, '0'), {columns} "
            f"FROM generate_series({first}, {last}) AS i, {table} "
            f"WHERE thread_id = '{TEMPLATE}'"
        )
    seq = ", seq" if table == "pregelkit_writes" else ""
    return (
        f"WITH RECURSIVE n(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM n WHERE i < {last}) "
        f"INSERT INTO {table} (thread_id, {columns}{seq}) "
        f"SELECT printf('bench-%07d', i), {columns}{seq} FROM n, {table} "
        f"WHERE thread_id = '{TEMPLATE}'"
    )


def build(url: str, saver: BaseCheckpointSaver[Any], rows: int) -> tuple[int, float]:
    """The template thread, then its copies up to ``rows`` checkpoints;
    returns (threads, seconds)."""

    @task
    def add(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def counter(step: int, *, previous: int | None = None) -> int:
        return add(add(previous or 0).result()).result() + step

    began = time.perf_counter()
    for i in range(HISTORY):
        counter.invoke(i, cfg(TEMPLATE))
    per_thread = len(list(saver.list(cfg(TEMPLATE))))
    threads = max(1, rows // per_thread)
    conn: Any = getattr(saver, "conn", None)
    for first in range(1, threads + 1, THREADS_PER_INSERT):
        last = min(threads, first + THREADS_PER_INSERT - 1)
        statements = [_copies(url, first, last, t) for t in _COLUMNS]
        if url.startswith("postgresql://"):
            with conn.connection() as c, c.transaction():
                for sql in statements:
                    c.execute(sql)
        else:
            conn.executescript("BEGIN; " + "; ".join(statements) + "; COMMIT;")
    if url.startswith("postgresql://"):
        with conn.connection() as c:
            c.execute("VACUUM ANALYZE")
            c.execute("CHECKPOINT")
    return threads, time.perf_counter() - began


def _count(saver: BaseCheckpointSaver[Any], table: str) -> int:
    def plan(d: Any) -> Any:
        row = yield d.q(f"SELECT count(*) FROM {table}", (), "one")
        return int(row[0])

    found: int = saver.run_queue(plan, "bench: count")
    return found


class Load:
    """Submits ``RATE`` runs a second to fresh threads, each stamped with
    the phase it was submitted in."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.short = fleet_workload.short.copy(checkpointer=saver)
        self.phase = "baseline"
        self.submitted: dict[str, str] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._submit, daemon=True)

    def _submit(self) -> None:
        i = 0
        while not self._done.wait(1 / RATE):
            thread = f"load-{i:06d}"
            self.short.submit(i, cfg(thread))
            self.submitted[thread] = self.phase
            i += 1

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@dataclass
class Latency:
    runs: int
    claim: list[float]
    finish: list[float]

    def cells(self) -> str:
        def p(xs: list[float], q: int) -> str:
            if len(xs) < 2:
                return "—"
            return f"{statistics.quantiles(xs, n=100)[q - 1] * 1000:,.0f}"

        return (
            f"{self.runs:,} | {p(self.claim, 50)} / {p(self.claim, 99)} | "
            f"{p(self.finish, 50)} / {p(self.finish, 99)}"
        )


def latencies(saver: BaseCheckpointSaver[Any], load: Load, phase: str) -> Latency:
    threads = [t for t, ph in load.submitted.items() if ph == phase]

    def plan(d: Any) -> Any:
        rows = yield d.q(
            "SELECT r.thread_id, r.created_at, r.finished_at, "
            "(SELECT min(a.started_at) FROM pregelkit_attempts AS a "
            " WHERE a.thread_id = r.thread_id) "
            "FROM pregelkit_runs AS r WHERE r.thread_id LIKE ? AND r.status = 'done'",
            ("load-%",),
            "all",
        )
        return rows

    rows = {r[0]: r for r in saver.run_queue(plan, "bench: latencies")}
    claim, finish = [], []
    for thread in threads:
        row = rows.get(thread)
        if row is None:
            continue
        _, created, finished, started = row
        finish.append(float(finished) - float(created))
        if started is not None:
            claim.append(float(started) - float(created))
    return Latency(len(threads), claim, finish)


def start_workers(url: str, n: int = 2) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pregelkit", "worker", "fleet_workload:short"]
    command += ["--db", url, "--concurrency", "4"]
    return [
        subprocess.Popen(
            command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(n)
    ]


def reset(url: str) -> None:
    tables = (
        "pregelkit_runs",
        "pregelkit_workers",
        "pregelkit_checkpoints",
        "pregelkit_writes",
        "pregelkit_blobs",
        "pregelkit_attempts",
    )
    with saver_for(url) as saver:
        conn: Any = getattr(saver, "conn", None)
        sql = "; ".join(f"DELETE FROM {t}" for t in tables)
        if url.startswith("postgresql://"):
            with conn.connection() as c:
                c.execute(sql)
        else:
            conn.executescript(sql)


def measure(url: str, rows: int, baseline: float, pause: float) -> tuple[str, str]:
    """Build, load, prune (``pause`` seconds between its transactions);
    the prune's row and the latency row of the section's tables."""
    reset(url)
    with saver_for(url) as saver:
        threads, built = build(url, saver, rows)
        checkpoints = _count(saver, "pregelkit_checkpoints")
        total = sum(_count(saver, t) for t in _COLUMNS)
        print(
            f"built {checkpoints:,} checkpoints ({total:,} rows, {threads:,} threads) "
            f"in {built:.0f} s",
            flush=True,
        )
        procs = start_workers(url)
        try:
            wait_until(lambda: live_workers(saver) == 2, timeout=60)
            with Load(saver) as load:
                time.sleep(baseline)
                load.phase = "prune"
                began = time.perf_counter()
                job = prune_job(saver, RetentionPolicy(keep_checkpoints=1), dry_run=False)
                counts = run_steps(saver, job, between=lambda: time.sleep(pause))
                report = PruneReport.of(counts, dry_run=False)
                took = time.perf_counter() - began
                load.phase = "after"
            wait_until(lambda: _all_done(saver), timeout=120, pause=0.2)
            base = latencies(saver, load, "baseline")
            during = latencies(saver, load, "prune")
        finally:
            stop(procs)
    return _prune_row(checkpoints, total, report, took), f"{base.cells()} | {during.cells()}"


def _all_done(saver: BaseCheckpointSaver[Any]) -> bool:
    def plan(d: Any) -> Any:
        row = yield d.q(
            "SELECT count(*) FROM pregelkit_runs WHERE status IN ('queued', 'running')", (), "one"
        )
        return int(row[0]) == 0

    done: bool = saver.run_queue(plan, "bench: all done")
    return done


def _prune_row(checkpoints: int, total: int, report: PruneReport, took: float) -> str:
    return (
        f"{checkpoints:,} | {total:,} | {report.rows['checkpoints']:,} | "
        f"{report.total_rows:,} | {took:.1f} | {report.total_rows / took:,.0f} | "
        f"{report.rows['checkpoints'] / took:,.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run; writes nothing")
    parser.add_argument(
        "--only", choices=("SQLite", "PostgreSQL"), help="one database; writes nothing"
    )
    args = parser.parse_args()
    rows = 20_000 if args.quick else ROWS
    baseline = 4.0 if args.quick else BASELINE
    load = os.getloadavg()[0]
    prune_rows: list[str] = []
    latency_rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, postgres() as pg:
        sqlite = os.path.join(tmp, "retention.db")
        for name, url, pause in (
            ("PostgreSQL", pg, 0.0),
            ("SQLite", sqlite, 0.0),
            ("SQLite", sqlite, PAUSE_SECONDS),
        ):
            if args.only not in (None, name):
                continue
            pruned, latency = measure(url, rows, baseline, pause)
            label = f"{name}, {pause * 1000:g} ms pauses" if pause else name
            prune_rows.append(f"| {label} | {pruned} |")
            latency_rows.append(f"| {label} | {latency} |")
            print(prune_rows[-1], latency_rows[-1], sep="\n", flush=True)
    section = "\n".join(
        [
            START,
            "## Retention (issue 29)",
            "",
            f"`python benchmarks/retention.py` on {platform.machine()}, {os.cpu_count()} CPUs "
            f"(load average {load:.1f} when it started: other jobs share them), Python "
            f"{platform.python_version()}. One thread's history made by {HISTORY} real "
            "runs of a two-task workflow (its checkpoints, pending writes and blobs), "
            f"copied by SQL to as many threads as make {rows:,} checkpoint rows; then "
            "`prune(saver, RetentionPolicy(keep_checkpoints=1))` in one process while "
            "2 `pregelkit worker` processes (concurrency 4) serve a two-task workflow "
            f"that this process submits {RATE:g} times a second (rows: checkpoints, "
            "writes and blobs together):",
            "",
            "| database | checkpoints | rows | checkpoints removed | rows removed "
            "| seconds | rows/s | checkpoints/s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
            *prune_rows,
            "",
            "The workers' runs meanwhile, in milliseconds (p50 / p99): claim is a "
            "run's first task's start minus its submit, finish its end minus its "
            f"submit; first {baseline:g} s with no prune, then the runs submitted while "
            "the prune ran. `prune()` runs its transactions back to back; a worker's "
            f"background prune waits {PAUSE_SECONDS * 1000:g} ms between two "
            "(`worker/_retention.py`), the rows with pauses:",
            "",
            "| database | runs before | claim before | finish before | runs during "
            "| claim during | finish during |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *latency_rows,
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
