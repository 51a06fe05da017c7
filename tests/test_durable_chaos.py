"""Chaos for the durable primitives (issue 28's proof): worker processes,
sync ``Worker`` and ``AsyncWorker``, SIGKILLed at random while their runs
sleep, send, receive and wait for children, on SQLite and PostgreSQL.

Pairs of ``peer`` threads (tests/durable_flows.py; sync and async, paired
across families too) ping and pong, wait out a ``recv`` timeout and each
start a child, send it a message and wait for it. Most run on 2 ``Worker``
and 2 ``AsyncWorker`` processes; every third pair's responder runs under
``invoke``/``ainvoke`` in a process of its own (its child in process). For
``PREGELKIT_DURABLE_CHAOS_SECONDS`` (default 8) the killer SIGKILLs a
worker holding runs (and starts another) or an invoke caller (a worker
takes its thread over if it was parked in a wait; else the test resumes it
as its caller would, with ``invoke(None)``). At the end: every workflow
returns its expected result and published its events; every message sent
was consumed exactly once (``consumed_by`` set and unique) by the thread it
was sent to; each parent started exactly one child, which ran to its end,
with at most one queue row per thread; and each side effect ran once, or
again only under a later lease or in another process, never twice under
one holder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable_flows
import fleet_flows
from fleet_harness import TESTS, cfg, wait_for
from pregelkit import durable
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver

pytestmark = pytest.mark.chaos

PAIRS = int(os.environ.get("PREGELKIT_DURABLE_CHAOS_PAIRS", "8"))
CHAOS_SECONDS = float(os.environ.get("PREGELKIT_DURABLE_CHAOS_SECONDS", "8"))
KINDS = ("sync", "async", "sync", "async")
"""The worker processes: two of each."""


class Served:
    """A worker process of durable_flows, its stderr kept in a file."""

    def __init__(self, kind: str, db: str, effects: Path, tmp: Path, *args: str) -> None:
        self.kind, self.killed = kind, False
        self.err_path = tmp / f"{kind}-{time.monotonic_ns()}.err"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        }
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(TESTS / "durable_flows.py"), kind, db, str(effects), *args],
                cwd=TESTS, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    def kill(self) -> None:
        self.killed = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    if request.param == "sqlite":
        url = str(tmp_path / "q.db")
        with SqliteSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver
    else:
        url = request.getfixturevalue("postgres_database")("pregelkit_durable_chaos")
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver


def _jobs() -> dict[str, dict[str, Any]]:
    """Two peers per pair; the families go sync-sync, async-async,
    sync-async and async-sync in turn."""
    jobs = {}
    for i in range(PAIRS):
        fams = [("peer", "peer"), ("apeer", "apeer"), ("peer", "apeer"), ("apeer", "peer")][i % 4]
        a, b = f"p{i}a", f"p{i}b"
        jobs[a] = {"wf": fams[0], "partner": b, "k": 10 * i + 1, "first": True}
        jobs[b] = {"wf": fams[1], "partner": a, "k": 10 * i + 2, "first": False}
    return jobs


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = fleet_flows.connect(url)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()


def _holding(url: str) -> Counter[int]:
    """Runs held, by worker process id."""
    rows = _rows(url, "SELECT worker FROM pregelkit_runs WHERE status = 'running'")
    return Counter(int(worker.split(":")[-2]) for (worker,) in rows if worker)


def _holder(line: str) -> tuple[str, str, str]:
    """(thread, step, who ran it): the lease's fence on a worker, the
    process id under ``invoke`` (no lease: fence -1)."""
    thread, step, fence, pid = line.split()
    return thread, step, fence if fence != "-1" else f"pid {pid}"


_ACTIVE = (
    "SELECT thread_id FROM pregelkit_runs "
    "WHERE status IN ('queued', 'running', 'sleeping', 'waiting')"
)


def _done(flows: dict[str, Any], thread: str) -> Any:
    """The thread's output once its workflow returned, else ``None`` (a
    thread not started yet has no values: ``{}``)."""
    state = flows[flows["job_wf"][thread]].get_state(cfg(thread))
    return None if state.next or not state.values else state.values


def test_kills_during_waits_lose_nothing_and_repeat_nothing(
    db: tuple[str, Any], tmp_path: Path
) -> None:
    url, saver = db
    effects = tmp_path / "effects"
    rng = random.Random(int(os.environ.get("PREGELKIT_CHAOS_SEED", "28")))
    flows: dict[str, Any] = {
        wf.name: wf for wf in durable_flows.sync_flows(saver) + durable_flows.async_flows(saver)
    }
    jobs = _jobs()
    flows["job_wf"] = {t: job["wf"] for t, job in jobs.items()}
    # every third pair's responder runs in a process of its own (invoke, its
    # child in process too), the rest on the workers
    invoked = {t for t, job in jobs.items() if int(t[1:-1]) % 3 == 1 and not job["first"]}
    for t in sorted(set(jobs) - invoked):
        flows[jobs[t]["wf"]].submit(jobs[t], cfg(t))

    start = time.monotonic()
    pool = [Served(kind, url, effects, tmp_path) for kind in KINDS]
    invokers = [
        Served("invoke", url, effects, tmp_path, t, json.dumps(jobs[t])) for t in sorted(invoked)
    ]
    killed = hits = 0
    try:
        deadline = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 0.9))
            live = [p for p in invokers if p.proc.poll() is None]
            if live and rng.random() < 0.25:
                # an invoke caller dies: a worker takes its thread over if
                # it was parked in a wait, else its caller resumes it below
                rng.choice(live).kill()
                killed += 1
                hits += 1
                continue
            # a worker holding runs when there is one: the kill then lands
            # in a sleep, a send, a recv or a child's wait
            held = _holding(url)
            busy = [i for i, w in enumerate(pool) if held[w.proc.pid]] or range(len(pool))
            victim = rng.choice(list(busy))
            pool[victim].kill()
            hits += held[pool[victim].proc.pid]
            pool[victim] = Served(pool[victim].kind, url, effects, tmp_path)
            killed += 1

        def finished() -> bool:
            stranded = {
                t
                for t, p in zip(sorted(invoked), invokers[: len(invoked)], strict=True)
                if p.killed
            }
            active = {t for (t,) in _rows(url, _ACTIVE)}
            for t in sorted(stranded - active - resumed):
                if _done(flows, t) is None:
                    resumed.add(t)
                    invokers.append(
                        Served("invoke", url, effects, tmp_path, t, json.dumps(jobs[t]), "resume")
                    )
            return all(_done(flows, t) is not None for t in jobs)

        resumed: set[str] = set()
        try:
            wait_for("every workflow to finish", finished, timeout=60)
        except AssertionError:  # what a stuck run needs to be understood
            print(*_rows(url, "SELECT * FROM pregelkit_runs"), sep="\n")
            print(*_rows(url, "SELECT * FROM pregelkit_messages"), sep="\n")
            print(effects.read_text(), *(p.read_text() for p in tmp_path.glob("*.err")))
            raise
    finally:
        for w in pool + invokers:
            w.stop()
    took = time.monotonic() - start
    errs = "".join(p.read_text() for p in tmp_path.glob("*.err"))
    results = {t: _done(flows, t) for t in jobs}
    for thread, job in jobs.items():
        assert results[thread] == durable_flows.expected(job, jobs[job["partner"]]), errs

    # each parent started one child (named by the parent's thread and the
    # submit's position)
    logged = Counter(_holder(line) for line in effects.read_text().splitlines())
    kids: dict[str, str] = {}
    for thread, _, _ in logged:
        if "/" in thread:
            assert kids.setdefault(thread.split("/")[0], thread) == thread, (kids, thread)
    assert sorted(kids) == sorted(jobs)

    # each message: sent once, consumed once, by the thread it went to
    messages = _rows(url, "SELECT thread_id, topic, consumed_by FROM pregelkit_messages")
    sent = [(t, "ping" if not job["first"] else "pong") for t, job in jobs.items()]
    sent += [(kid, "hello") for kid in kids.values()]
    assert sorted((t, topic) for t, topic, _ in messages) == sorted(sent)
    consumers = [c for _, _, c in messages]
    assert None not in consumers and len(set(consumers)) == len(consumers), messages

    # each child ran once, to its end: one queue row at most per thread (a
    # queued child's run, or the parked row a worker took over), all done
    runs = _rows(url, "SELECT thread_id, status, error, worker FROM pregelkit_runs")
    assert max(Counter(t for t, *_ in runs).values()) == 1, runs
    assert [r for r in runs if r[1] != "done"] == []
    for parent, kid in kids.items():
        kid_wf = "kid" if jobs[parent]["wf"] == "peer" else "akid"
        state = flows[kid_wf].get_state(cfg(kid))
        assert (state.next, state.values) == ((), jobs[parent]["k"] * 3)
        assert durable.get_event(saver, kid, "kid") == jobs[parent]["k"]
        assert durable.get_event(saver, parent, "done") == results[parent]["got"]

    # each side effect: once, or again only under a later lease or in
    # another invoke caller (a resumed one)
    assert max(logged.values()) == 1, [k for k, n in logged.items() if n > 1]
    steps = Counter((thread, step) for thread, step, _ in logged)
    for thread in jobs:
        assert {s for t, s in steps if t == thread} == {"start", "talked", "end"}
        assert {s for t, s in steps if t == kids[thread]} == {"kid-start", "kid-end"}
    again = sum(n - 1 for n in steps.values())
    print(f"{killed} kills of processes holding {hits} runs, {took:.1f} s, {again} effects again")
    assert hits  # the kills did hit runs in flight
