"""Chaos for named queues (issue 29): 4 worker processes on PostgreSQL,
SIGKILLed (and replaced) or SIGSTOPped past their 1 s lease at random, while
300 submits go to 3 queues with limits over 20 keys, some repeating a dedup
id. Checked from the records: every run done, once per dedup id at a time;
no queue over its concurrency, no key over its key concurrency and no worker
over its worker concurrency (from the attempts' fenced start and end rows,
each written only under a live lease); no more starts in any window than the
rate limit (from the claims' own start rows, written in their transactions).

Marked ``chaos``; about 20-30 s on 2 cores.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

import queue_chaos_flows
from fleet_harness import cfg, wait_for
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.durable import Queue, declare_queue

pytestmark = pytest.mark.chaos

TESTS = Path(__file__).resolve().parent
QUEUES = (
    Queue("conc", concurrency=3),
    Queue("keys", concurrency=8, worker_concurrency=2, key_concurrency=1),
    Queue("rate", concurrency=4, rate_limit=(20, 1.0)),
)
SUBMITS, KEYS, WORKERS = 300, 20, 4
CHAOS_SECONDS = float(os.environ.get("PREGELKIT_CHAOS_SECONDS", "8"))


@pytest.fixture
def chaos_db(postgres_database: Any) -> Iterator[tuple[str, PostgresSaver]]:
    dsn = postgres_database("pregelkit_queue_chaos")
    with ConnectionPool(dsn, min_size=1, max_size=4, kwargs={"autocommit": True}) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        with pool.connection() as conn:
            conn.execute(queue_chaos_flows.LOG)
        yield dsn, saver


class Proc:
    def __init__(self, url: str, tmp: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        }
        self.err = tmp / f"w-{time.monotonic_ns()}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(TESTS / "queue_chaos_flows.py"), url,
                 *(q.name for q in QUEUES)],
                cwd=TESTS, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, delta in events:  # an end at the instant of a start comes first
        now += delta
        most = max(most, now)
    return most


def test_queue_limits_hold_under_kills_and_stops(
    chaos_db: tuple[str, PostgresSaver], tmp_path: Path
) -> None:
    url, saver = chaos_db
    rng = random.Random(int(os.environ.get("PREGELKIT_CHAOS_SEED", "29")))
    for queue in QUEUES:
        declare_queue(saver, queue)
    wf = queue_chaos_flows.qflow.copy(checkpointer=saver)
    pool = [Proc(url, tmp_path) for _ in range(WORKERS)]
    handles, dedups = [], {}
    killed = paused = 0
    try:
        for i in range(SUBMITS):
            queue = QUEUES[i % 3].name
            key = f"k{rng.randrange(KEYS)}"
            dedup = f"d{i // 10}" if i % 10 in (0, 3) else None  # pairs on one queue
            h = wf.submit(
                [queue, key, rng.uniform(0.03, 0.15)], cfg(f"t{i}"), queue=queue, key=key,
                dedup_id=dedup,
            )  # fmt: skip
            handles.append(h)
            if dedup is not None:
                dedups.setdefault((queue, dedup), []).append(h)
            if i % 30 == 29:
                time.sleep(0.1)
        deadline = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 0.8))
            victim = rng.randrange(WORKERS)
            if rng.random() < 0.5:
                pool[victim].proc.send_signal(signal.SIGKILL)
                pool[victim].proc.wait()
                pool[victim] = Proc(url, tmp_path)
                killed += 1
            else:
                pool[victim].proc.send_signal(signal.SIGSTOP)
                time.sleep(rng.uniform(1.2, 2.0))  # past its 1 s lease
                pool[victim].proc.send_signal(signal.SIGCONT)
                paused += 1
        wait_for(
            "every run to end",
            lambda: all(h.status() in ("done", "failed", "cancelled") for h in handles),
            timeout=120,
        )
    finally:
        for p in pool:
            p.stop()
    assert killed and paused
    runs = {h.run_id: h.record() for h in handles}
    for h in handles:
        assert h.result(timeout=1) == "ok", runs[h.run_id]
    # dedup: the runs of one (queue, dedup id) never were active at once
    for (queue, dedup), same in dedups.items():
        spans = sorted({(runs[h.run_id].created_at, runs[h.run_id].finished_at or 0) for h in same})
        for (_, first_end), (second_start, _) in itertools.pairwise(spans):
            assert second_start >= first_end, (queue, dedup, spans)
    assert len(runs) < SUBMITS  # some dedups met an active run
    with saver.conn.connection() as conn:  # type: ignore[attr-defined]
        log = conn.execute(
            "SELECT run_id, fence, queue, key, event, at, pid FROM queue_chaos_log"
        ).fetchall()
        starts = [r[0] for r in conn.execute(
            "SELECT started_at FROM pregelkit_queue_starts WHERE queue = 'rate' ORDER BY started_at"
        ).fetchall()]  # fmt: skip
    opened: dict[tuple[str, int], tuple[str, str, float, int]] = {}
    attempts: list[tuple[str, str, int, float, float]] = []
    for run_id, fence, queue, key, event, at, pid in log:
        if event == "start":
            opened[(run_id, fence)] = (queue, key, at, pid)
    for run_id, fence, queue, key, event, at, pid in log:
        if event == "end":
            began = opened[(run_id, fence)][2]
            attempts.append((queue, key, pid, began, at))
    assert len(attempts) >= len(runs)
    for limits in QUEUES:
        mine = [a for a in attempts if a[0] == limits.name]
        most = most_at_once([(a[3], a[4]) for a in mine])
        assert most <= (limits.concurrency or SUBMITS)
        if limits.name == "conc":
            assert most == limits.concurrency  # the limit was met, and held
        if limits.key_concurrency:
            for key in {a[1] for a in mine}:
                spans = [(a[3], a[4]) for a in mine if a[1] == key]
                assert most_at_once(spans) <= limits.key_concurrency, (limits.name, key)
        if limits.worker_concurrency:
            for pid in {a[2] for a in mine}:
                spans = [(a[3], a[4]) for a in mine if a[2] == pid]
                assert most_at_once(spans) <= limits.worker_concurrency, (limits.name, pid)
    count, per = QUEUES[2].rate_limit or (0, 0.0)
    assert len(starts) >= sum(1 for a in attempts if a[0] == "rate")
    busiest = 0
    for i, at in enumerate(starts):
        within = sum(1 for t in starts[i:] if t <= at + per)
        busiest = max(busiest, within)
        assert within <= count, (at, within)
    assert busiest >= count * 3 // 4  # the rate limit was pressed against, and held
