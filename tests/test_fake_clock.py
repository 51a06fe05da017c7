"""A clock you control (``pregelkit.testing.FakeClock``, the ``fake_clock``
fixture): retry backoff is not waited for, timeouts stay on real time, and
workers a test starts in subprocesses follow the test's clock through the
file named by ``PREGELKIT_FAKE_CLOCK``: a 30-day reminder, a daily schedule
and an hourly rate limit each go on within a second of ``advance()``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pregelkit._internal import _clock
from pregelkit.checkpoint.queues import Queue, declare_queue
from pregelkit.checkpoint.runs import list_runs
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import NodeTimeoutError
from pregelkit.func import entrypoint, task
from pregelkit.testing import FakeClock
from pregelkit.testing.pytest_plugin import fake_clock  # noqa: F401 - the fixture
from pregelkit.types import RetryPolicy, TimeoutPolicy

SRC = str(Path(__file__).resolve().parents[1] / "src")
HOUR = 3600.0
REAL_BOUND = 2.0
"""Real seconds a worker may take to act on an advance: it looks every 0.05 s
under a fake clock (typically 0.1-0.2 s in all); not its idle pause of up to
1.2 s plus a schedule look each second, with margin for a loaded machine."""


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _until(condition: Callable[[], Any], seconds: float = 15.0) -> float:
    """Wait for ``condition``; the real seconds it took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "timed out"
        time.sleep(0.01)
    return time.monotonic() - start


def _flaky() -> Callable[[int], int]:
    failed: list[int] = []

    def flaky(x: int) -> int:
        if not failed:
            failed.append(x)
            raise ConnectionError("the first attempt fails")
        return x * 2

    return flaky


# retry backoff


@pytest.mark.parametrize("skip_sleeps", [True, False])
def test_an_hour_of_retry_backoff_is_not_waited_for(skip_sleeps: bool) -> None:
    once = task(
        retry_policy=RetryPolicy(
            initial_interval=HOUR, max_interval=HOUR, max_attempts=2, jitter=False
        )
    )(_flaky())

    @entrypoint()
    def wf(x: int) -> int:
        return once(x).result()

    with FakeClock(1000.0, skip_sleeps=skip_sleeps) as clock:
        start = time.monotonic()
        assert wf.invoke(21) == 42
        assert time.monotonic() - start < 5
        # a clock that skips sleeps moved past the backoff; one that stands still did not
        assert clock.now() == (1000.0 + HOUR if skip_sleeps else 1000.0)


def test_async_retry_backoff_is_not_waited_for(fake_clock: FakeClock) -> None:  # noqa: F811 - the plugin's fixture
    flaky = _flaky()

    @task(
        retry_policy=RetryPolicy(
            initial_interval=HOUR, max_interval=HOUR, max_attempts=2, jitter=False
        )
    )
    async def once(x: int) -> int:
        return flaky(x)

    @entrypoint()
    async def wf(x: int) -> int:
        return await once(x)

    before = fake_clock.now()
    start = time.monotonic()
    assert asyncio.run(wf.ainvoke(4)) == 8
    assert time.monotonic() - start < 5
    assert fake_clock.now() == before + HOUR


def test_timeouts_stay_on_real_time(fake_clock: FakeClock) -> None:  # noqa: F811 - the plugin's fixture
    """A timeout bounds a real hang: the fake clock neither hides it nor
    fires it on a task that is working."""

    @task(timeout=TimeoutPolicy(run_timeout=0.5))
    def hangs() -> None:
        fake_clock.advance(timedelta(days=1))  # moving the fake clock fires nothing
        time.sleep(0.2)
        fake_clock.advance(timedelta(days=1))
        time.sleep(30)

    @entrypoint()
    def wf(x: int) -> None:
        hangs().result()

    start = time.monotonic()
    with pytest.raises(NodeTimeoutError):
        wf.invoke(1)
    assert 0.5 <= time.monotonic() - start < 10


def test_the_clock_is_named_in_the_environment_while_in_use() -> None:
    assert _clock.ENV not in os.environ
    with FakeClock(500.0) as clock:
        path = clock.env[_clock.ENV]
        assert os.environ[_clock.ENV] == path
        follower = _clock.FileClock(path)
        assert follower.now() == 500.0
        clock.advance(timedelta(days=30))
        assert follower.now() == 500.0 + 30 * 86400
        assert follower.backoff(HOUR) == 0.0
    assert _clock.ENV not in os.environ
    assert not os.path.exists(path)
    with pytest.raises(RuntimeError, match="unset PREGELKIT_FAKE_CLOCK outside tests"):
        follower.now()
    with pytest.raises(RuntimeError, match="enter the clock first"):
        _ = FakeClock().env


# workers in subprocesses

FLOWS = """
from datetime import timedelta

from pregelkit import durable
from pregelkit.func import entrypoint, task


def make(saver, log):
    @task
    def note(what):
        with open(log, "a") as f:
            f.write(what + "\\n")
        return what

    @entrypoint(checkpointer=saver)
    def reminder(user):
        note("signed up " + user).result()
        durable.sleep(timedelta(days=30))
        return note("reminded " + user).result()

    @entrypoint(checkpointer=saver)
    def digest(x):
        return note("digest").result()

    @entrypoint(checkpointer=saver)
    def mail(x):
        return note(f"mail {x}").result()

    return [reminder, digest, mail]
"""

SERVE = """
import sys

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.worker import Worker

from flows import make

url, log = sys.argv[1:]
with SqliteSaver.from_conn_string(url) as saver:
    Worker(make(saver, log), saver, concurrency=2, lease_seconds=5, queues=["mail"]).run()
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[SqliteSaver, dict[str, Any], Path]]:
    """A saver, the workflows by name, and the log their tasks write; the
    worker is started by the test, under its clock."""
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "serve.py").write_text(SERVE)
    sys.path.insert(0, str(tmp_path))
    try:
        from flows import make  # type: ignore[import-not-found]

        url, log = str(tmp_path / "q.db"), tmp_path / "log"
        log.touch()
        with SqliteSaver.from_conn_string(url) as saver:
            saver.setup()
            declare_queue(saver, Queue("mail", rate_limit=(1, HOUR)))
            yield saver, {wf.name: wf for wf in make(saver, str(log))}, log
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flows", None)


@pytest.fixture
def start_worker(
    tmp_path: Path,
    fake_clock: FakeClock,  # noqa: F811 - the plugin's fixture
) -> Iterator[Callable[[], None]]:
    """Start a worker subprocess under the test's clock; stopped before the clock ends."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        # the environment names the fake clock's file: a FakeClock in use put it there
        env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}"}
        script = [sys.executable, str(tmp_path / "serve.py"), str(tmp_path / "q.db")]
        started.append(subprocess.Popen([*script, str(tmp_path / "log")], env=env))

    yield start
    for child in started:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(30)


def test_a_worker_subprocess_sends_a_30_day_reminder_after_advance(
    fleet: tuple[SqliteSaver, dict[str, Any], Path],
    start_worker: Callable[[], None],
    fake_clock: FakeClock,  # noqa: F811 - the plugin's fixture
) -> None:
    _, wfs, log = fleet
    handle = wfs["reminder"].submit("ada", _config("r1"))
    start_worker()
    _until(lambda: handle.status() == "sleeping")
    assert log.read_text().split("\n")[:-1] == ["signed up ada"]
    fake_clock.advance(timedelta(days=29, hours=23))
    time.sleep(0.3)  # a day early: the worker leaves it asleep
    assert handle.status() == "sleeping"
    fake_clock.advance(timedelta(hours=1))
    took = _until(lambda: handle.status() == "done")
    assert handle.result(timeout=5) == "reminded ada"
    print(f"30-day reminder: {took:.3f} s after advance")
    assert took < REAL_BOUND, f"the reminder took {took:.2f} s of real time after advance"


def test_a_worker_subprocess_fires_a_daily_schedule_and_keeps_an_hourly_rate_limit(
    fleet: tuple[SqliteSaver, dict[str, Any], Path],
    start_worker: Callable[[], None],
    fake_clock: FakeClock,  # noqa: F811 - the plugin's fixture
) -> None:
    saver, wfs, log = fleet
    first_slot = datetime.fromtimestamp(fake_clock.now() + 2 * HOUR, UTC).replace(microsecond=0)
    made = wfs["digest"].schedule("daily", every=timedelta(days=1), start_at=first_slot)
    assert made.next_at == first_slot
    first, second = (wfs["mail"].submit(i, _config(f"m{i}"), queue="mail") for i in (1, 2))
    start_worker()
    assert first.result(timeout=30) == "mail 1"
    time.sleep(0.5)  # an hour's limit of one start: the second waits, no slot is due
    assert second.status() == "queued"
    assert "digest" not in log.read_text()
    fake_clock.advance(timedelta(hours=2, seconds=1))  # past the hour, and the slot
    took = _until(lambda: second.status() == "done" and "digest" in log.read_text())
    print(f"schedule and rate limit: {took:.3f} s after advance")
    assert took < REAL_BOUND, f"took {took:.2f} s of real time after advance"
    # the digest's task wrote its line before its run was marked done: wait for that too
    _until(lambda: [r.status for r in list_runs(saver) if r.workflow == "digest"] == ["done"])
    assert log.read_text().count("digest") == 1
