"""Stopping a run after one of its attempts timed out and was retried.

A timed-out attempt once cleared the runner's link to the run's stop, so a
later Ctrl-C or cancellation ending one task went unreported: the run's
other branches ran on to their end. Each test runs the same workflow with
and without a first attempt that times out; both must stop alike.

The workflow: ``flaky`` (its first attempt hangs past its timeout, the retry
returns), then two branches ``outer(0)`` and ``outer(1)``, each calling
``step`` ``N`` times in a row. The stop comes once two steps have ended; the
branch that was not hit by it must start at most the one step it was
starting, not run on to ``N``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import NodeTimeoutError, RunCancelledError
from pregelkit.func import entrypoint, task
from pregelkit.types import RetryPolicy

T = TypeVar("T")
N = 10
RETRY = RetryPolicy(retry_on=NodeTimeoutError, initial_interval=0.01, jitter=False)
CONFIG: Any = {"configurable": {"thread_id": "t"}}
GUARD = 60.0


def _wait_for(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GUARD
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


SCRIPT = """
import os, sys, time
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import NodeTimeoutError
from pregelkit.func import entrypoint, task
from pregelkit.types import RetryPolicy

LOG, DB, TIMES_OUT = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
tries = []

def note(line):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (line + "\\n").encode())
    os.close(fd)

@task(timeout=0.5, retry_policy=RetryPolicy(retry_on=NodeTimeoutError, initial_interval=0.01))
def flaky():
    tries.append(1)
    if len(tries) == 1 and TIMES_OUT:
        time.sleep(5)
    return 1

@task
def step(i):
    note(f"start {i}")
    time.sleep(0.3)
    note(f"end {i}")
    return i

@task
def outer(n, k):
    return [step(k * 100 + i).result() for i in range(n)]

with SqliteSaver.from_conn_string(DB) as saver:
    @entrypoint(checkpointer=saver)
    def wf(n):
        flaky().result()
        branches = [outer(n, 0), outer(n, 1)]
        return [b.result() for b in branches]

    wf.invoke(__N__, {"configurable": {"thread_id": "t"}})
"""


def _starts(log: Path) -> int:
    return log.read_text().count("start") if log.exists() else 0


@pytest.mark.parametrize("times_out", [False, True], ids=["plain", "after-timeout"])
def test_ctrl_c_stops_every_branch(tmp_path: Path, times_out: bool) -> None:
    script = tmp_path / "flow.py"
    script.write_text(SCRIPT.replace("__N__", str(N)))
    log = tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log), str(tmp_path / "db"), "1" if times_out else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: log.exists() and log.read_text().count("end") >= 2)
        proc.send_signal(signal.SIGINT)
        at_signal = _starts(log)
        out, err = proc.communicate(timeout=GUARD)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err, (out, err)
    # each branch may start the step it was about to, no more
    assert _starts(log) <= at_signal + 2, log.read_text()


class Starts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[int] = []

    def add(self, i: int) -> None:
        with self.lock:
            self.ids.append(i)

    def __len__(self) -> int:
        with self.lock:
            return len(self.ids)


def _async_workflow(starts: Starts, times_out: bool) -> Any:
    tries: list[int] = []

    @task(timeout=0.3, retry_policy=RETRY)
    async def flaky() -> int:
        tries.append(1)
        if len(tries) == 1 and times_out:
            await asyncio.sleep(5)
        return 1

    @task
    async def step(i: int) -> int:
        starts.add(i)
        await asyncio.sleep(0.1)
        return i

    @task
    async def outer(n: int, k: int) -> list[int]:
        return [await step(k * 100 + i) for i in range(n)]

    @entrypoint(checkpointer=InMemorySaver())
    async def wf(n: int) -> list[list[int]]:
        await flaky()
        first, second = outer(n, 0), outer(n, 1)
        return [await first, await second]

    return wf


@pytest.mark.parametrize("times_out", [False, True], ids=["plain", "after-timeout"])
def test_cancelling_the_ainvoke_task_stops_every_branch(
    times_out: bool, arun: Callable[[Awaitable[T]], T]
) -> None:
    starts = Starts()
    wf = _async_workflow(starts, times_out)

    async def main() -> tuple[int, int]:
        run = asyncio.create_task(wf.ainvoke(N, CONFIG))
        while len(starts) < 4:
            assert not run.done(), run
            await asyncio.sleep(0.01)
        run.cancel()
        at_cancel = len(starts)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, GUARD)
        await asyncio.sleep(0.3)
        return at_cancel, len(starts)

    at_cancel, after = arun(main())
    assert after <= at_cancel + 2, starts.ids


@pytest.mark.parametrize("times_out", [False, True], ids=["plain", "after-timeout"])
def test_cancel_stops_every_branch(times_out: bool) -> None:
    starts = Starts()
    tries: list[int] = []

    @task(timeout=0.3, retry_policy=RETRY)
    def flaky() -> int:
        tries.append(1)
        if len(tries) == 1 and times_out:
            time.sleep(5)
        return 1

    @task
    def step(i: int) -> int:
        starts.add(i)
        time.sleep(0.1)
        return i

    @task
    def outer(n: int, k: int) -> list[int]:
        return [step(k * 100 + i).result() for i in range(n)]

    @entrypoint(checkpointer=InMemorySaver())
    def wf(n: int) -> list[list[int]]:
        flaky().result()
        branches = [outer(n, 0), outer(n, 1)]
        return [b.result() for b in branches]

    marks: list[int] = []

    def cancel_soon() -> None:
        _wait_for(lambda: len(starts) >= 4)
        marks.append(len(starts))
        wf.cancel(CONFIG)

    canceller = threading.Thread(target=cancel_soon)
    canceller.start()
    with pytest.raises(RunCancelledError):
        wf.invoke(N, CONFIG)
    canceller.join()
    time.sleep(0.3)
    # the mark is read every 0.1 s: a step (0.1 s) or two may start meanwhile
    assert len(starts) <= marks[0] + 4, starts.ids
    assert len(starts) < 2 * N, starts.ids


def test_the_subprocess_script_runs_to_its_end(tmp_path: Path) -> None:
    """The Ctrl-C script is sound: left alone it runs every step."""
    script = tmp_path / "flow.py"
    script.write_text(SCRIPT.replace("__N__", "2"))
    log = tmp_path / "log"
    done = subprocess.run(
        [sys.executable, str(script), str(log), str(tmp_path / "db"), "1"],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 0, done.stderr
    assert _starts(log) == 4, log.read_text()
