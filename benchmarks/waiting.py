"""What sleeping and waiting runs cost idle workers (issue 28), on PostgreSQL.

Four idle workers (``pregelkit worker``, concurrency 4) poll the queue; the
statements they send per second are counted on the wire
(``pg_wire.WireCounter``) with no run in the queue, then with 10,000
sleeping or waiting runs none of which is due: the goal is the same count
(a claim reads only the due runs, through ``pregelkit_runs_due``). Then the
wake-up delay: 200 sleeping runs fall due 20 ms apart, and each one's delay
is from its due time to its first task's start on a worker (p50 / p99).

``python benchmarks/waiting.py`` prints a markdown table; it writes nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from fleet import postgres, reset, saver_for, start_workers, stop  # noqa: E402
from pg_wire import WireCounter  # noqa: E402

WAITING = 10_000
IDLE_SECONDS = 10.0
WAKES = 200

_INSERT = (
    "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
    "input, config_type, config, due_at, wait_kind, wait_topic, created_at, updated_at) "
    "VALUES (%s, %s, 'short', %s, 0, %s, %s, %s, %s, %s, %s, %s, 0, 0)"
)


def _rows(saver: Any, prefix: str, count: int, due: Any) -> None:
    """``count`` sleeping (and, with no due time, waiting) runs of ``short``."""
    serde = saver.serde
    value, config = serde.dumps_typed(1), serde.dumps_typed({})
    rows = []
    for i in range(count):
        at = due(i)
        status, kind = ("sleeping", "sleep") if at is not None else ("waiting", "recv")
        topic = None if at is not None else ""
        rows.append((f"{prefix}{i:05}", f"{prefix}{i}", status, *value, *config, at, kind, topic))
    with saver.conn.connection() as conn, conn.cursor() as cur:
        cur.executemany(_INSERT, rows)
        cur.execute("ANALYZE pregelkit_runs")


def _per_second(counter: WireCounter) -> float:
    before = counter.snapshot()["statements"]
    time.sleep(IDLE_SECONDS)
    return (counter.snapshot()["statements"] - before) / IDLE_SECONDS


def _delays(saver: Any, due: dict[str, float]) -> list[float]:
    """Each woken run's delay: its first task's start minus its due time."""
    with saver.conn.connection() as conn:
        rows = conn.execute(
            "SELECT thread_id, min(started_at) FROM pregelkit_attempts GROUP BY thread_id"
        ).fetchall()
    return [started - due[thread] for thread, started in rows if thread in due]


def main() -> None:
    with postgres() as url:
        reset(url)
        counter = WireCounter(url)
        procs = start_workers(counter.dsn, 4, "fleet_workload:short")
        try:
            time.sleep(3.0)  # started, and idle long enough to poll at their slowest
            empty = _per_second(counter)
            with saver_for(url) as saver:
                # half sleep until tomorrow, half wait for a message that never comes
                _rows(saver, "w", WAITING, lambda i: time.time() + 86400 if i % 2 else None)
            crowded = _per_second(counter)
            with saver_for(url) as saver:
                start = time.time() + 2.0
                due = {f"d{i}": start + i * 0.02 for i in range(WAKES)}
                _rows(saver, "d", WAKES, lambda i: due[f"d{i}"])
                deadline = time.monotonic() + 120
                while len(delays := _delays(saver, due)) < WAKES:
                    assert time.monotonic() < deadline, f"{len(delays)} of {WAKES} woke"
                    time.sleep(0.2)
        finally:
            stop(procs)
            counter.close()
    delays.sort()
    p50 = statistics.median(delays)
    p99 = delays[int(len(delays) * 0.99) - 1]
    print("| waiting runs | statements / s, 4 idle workers |")
    print("|---|---|")
    print(f"| 0 | {empty:.1f} |")
    print(f"| {WAITING:,} (none due) | {crowded:.1f} |")
    print()
    print(f"wake-up delay of {WAKES} sleeping runs due 20 ms apart, due time to first task:")
    print(f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")


if __name__ == "__main__":
    main()
