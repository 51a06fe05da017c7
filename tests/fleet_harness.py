"""Worker processes for the worker tests: ``pregelkit worker`` subprocesses on
the test's database, and the checks the process and chaos tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fleet_flows

TESTS = Path(__file__).resolve().parent
LEASE = 1.0
CONCURRENCY = 4
"""Runs a worker process serves at once."""


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class WorkerProcess:
    """``pregelkit worker`` in a subprocess, its stderr kept in a file."""

    def __init__(
        self, url: str, *targets: str, tmp: Path, step_seconds: float = 0.0, lease: float = LEASE
    ) -> None:
        self.err_path = tmp / f"worker-{time.monotonic_ns()}.err"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
            "FLEET_DB": url,
            "FLEET_STEP_SECONDS": str(step_seconds),
        }
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pregelkit", "worker", *targets, "--db", url,
                 "--concurrency", str(CONCURRENCY), "--lease", str(lease)],
                cwd=TESTS, env=env, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def steps_logged(url: str, thread: str) -> list[tuple[int, int]]:
    """(step, fence) of each logged step of the thread."""
    return [(r[1], r[3]) for r in fleet_flows.log_rows(url) if r[0] == thread]


def saved_rows(url: str, thread: str) -> tuple[int, int]:
    conn = fleet_flows.connect(url)
    p = "%s" if fleet_flows.is_postgres(url) else "?"
    try:
        return tuple(  # type: ignore[return-value]
            conn.execute(
                f"SELECT count(*) FROM {table} WHERE thread_id = {p}", (thread,)
            ).fetchone()[0]
            for table in ("pregelkit_checkpoints", "pregelkit_writes")
        )
    finally:
        conn.close()


def check_exactly_once(logged: list[tuple[int, int]], n: int, interrupted: int) -> None:
    """Each step ran once, except at most ``interrupted`` steps a holder was
    stopped in before its result was saved: those ran once per holder."""
    per_step = Counter(step for step, _ in logged)
    assert sorted(per_step) == list(range(n))
    again = [s for s, count in per_step.items() if count > 1]
    assert len(again) <= interrupted, logged
    for s in again:
        fences = [f for step, f in logged if step == s]
        assert len(set(fences)) == len(fences), f"step {s} ran twice under one lease: {logged}"
