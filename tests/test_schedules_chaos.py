"""Chaos for schedules (issue 29's proof): a schedule firing every second,
served by 4 worker processes (2 ``Worker``, 2 ``AsyncWorker``) that are
SIGKILLed and SIGSTOPped at random, on SQLite and PostgreSQL.

The schedule (``catchup="all"``) has ``SLOTS`` slots, one a second from a
second after the test starts; the killer runs until the last one is due,
then lets the stopped workers go on and starts fresh ones. At the end every
slot fired exactly once: one slot row, one queued run on the slot's thread
(``schedule:<id>:<slot>``), which ended ``done`` with the slot time as its
result, and no other run of the workflow. The slots are real seconds (no
compressed clock): the workers share the machine's clock, and the whole
test takes about ``SLOTS`` + 5 seconds per database.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import fleet_flows
import schedule_flows
from fleet_harness import TESTS, wait_for
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver

pytestmark = pytest.mark.chaos

SLOTS = int(os.environ.get("PREGELKIT_SCHEDULE_CHAOS_SLOTS", "12"))
KINDS = ("sync", "async", "sync", "async")


class Served:
    def __init__(self, kind: str, db: str, tmp: Path) -> None:
        self.kind, self.stopped = kind, False
        self.err_path = tmp / f"{kind}-{time.monotonic_ns()}.err"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        }
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(TESTS / "schedule_flows.py"), kind, db],
                cwd=TESTS, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.stopped = sig == signal.SIGSTOP

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
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
        url = request.getfixturevalue("postgres_database")("pregelkit_schedules_chaos")
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = fleet_flows.connect(url)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()


def test_kills_and_pauses_fire_every_slot_exactly_once(db: tuple[str, Any], tmp_path: Path) -> None:
    url, saver = db
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    end = start + timedelta(seconds=SLOTS - 1)
    schedule_flows.flows(saver).schedule(
        "beat", every=timedelta(seconds=1), start_at=start, end_at=end, catchup="all"
    )
    served = [Served(kind, url, tmp_path) for kind in KINDS]
    kills = pauses = 0
    rng = random.Random()
    try:
        while datetime.now(UTC) < end + timedelta(seconds=1):
            time.sleep(rng.uniform(0.2, 0.6))
            i = rng.randrange(len(served))
            victim = served[i]
            if victim.stopped:
                victim.signal(signal.SIGCONT)
            elif rng.random() < 0.5:
                victim.signal(signal.SIGKILL)
                victim.proc.wait(30)
                kills += 1
                served[i] = Served(victim.kind, url, tmp_path)
            else:
                victim.signal(signal.SIGSTOP)
                pauses += 1
        for worker in served:
            if worker.stopped:
                worker.signal(signal.SIGCONT)
        slots = {(start + timedelta(seconds=k)).isoformat().replace("+00:00", "Z")
                 for k in range(SLOTS)}  # fmt: skip
        threads = {f"schedule:beat:{slot}" for slot in slots}

        def all_done() -> bool:
            rows = _rows(url, "SELECT thread_id, status FROM pregelkit_runs")
            return {t for t, s in rows if s == "done"} == threads and len(rows) == SLOTS

        wait_for("every slot's run to end", all_done, timeout=60)
    finally:
        for worker in served:
            worker.end()
    assert kills + pauses > 0
    fired = _rows(url, "SELECT slot_at, thread_id, run_id FROM pregelkit_schedule_slots")
    assert sorted(thread for _, thread, _ in fired) == sorted(threads)
    runs = _rows(url, "SELECT run_id, thread_id, status FROM pregelkit_runs")
    assert {run_id for run_id, _, _ in runs} == {run_id for _, _, run_id in fired}
    assert sorted(thread for _, thread, _ in runs) == sorted(threads)
    results = {handle_thread: saver.get_tuple({"configurable": {"thread_id": handle_thread}})
               for handle_thread in threads}  # fmt: skip
    for thread, saved in results.items():
        assert saved is not None and thread.endswith(saved.checkpoint["channel_values"]["__end__"])
