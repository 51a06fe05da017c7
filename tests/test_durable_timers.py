"""Durable timers (``pregelkit.durable.sleep``): in-process waits, replays
that never sleep again, a resumed run that waits out only the rest, the
test clock, and what bad arguments get."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.channels.last_value import LastValue
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.runs import handle_of_thread
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import NondeterminismError, RunCancelledError
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.testing import FakeClock
from pregelkit.types import Command, interrupt

SRC = str(Path(__file__).resolve().parents[1] / "src")
T0 = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _until(condition: Any, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_sleep_waits_in_place_and_the_run_goes_on(saver: BaseCheckpointSaver[Any]) -> None:
    ran: list[int] = []

    @task
    def step(x: int) -> int:
        ran.append(x)
        return x + 1

    @entrypoint(checkpointer=saver)
    def main(x: int) -> int:
        y = step(x).result()
        durable.sleep(timedelta(milliseconds=200))
        return step(y).result()

    start = time.monotonic()
    assert main.invoke(1, _config("t")) == 3
    assert time.monotonic() - start >= 0.2
    assert ran == [1, 2]
    assert durable.waiting(main, _config("t")) is None


def test_waiting_shows_the_wake_time_while_a_run_sleeps() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def main(x: int) -> int:
        durable.sleep(3600)
        return x

    with FakeClock(T0, skip_sleeps=False) as clock:
        thread, out = _in_thread(lambda: main.invoke(7, _config("w")))
        _until(lambda: durable.waiting(main, _config("w")) is not None)
        wait = durable.waiting(main, _config("w"))
        assert wait is not None
        assert (wait.status, wait.kind, wait.topic) == ("sleeping", "sleep", None)
        assert wait.due_at == datetime.fromtimestamp(T0 + 3600, UTC)
        clock.advance(3599)
        time.sleep(0.05)
        assert thread.is_alive()
        clock.advance(1)
        thread.join(10)
    assert out == [7]
    assert durable.waiting(main, _config("w")) is None


def test_a_replay_never_sleeps_again_and_a_resume_waits_only_the_rest() -> None:
    saver = InMemorySaver()
    sleeps: list[str] = []

    @entrypoint(checkpointer=saver)
    def main(x: int) -> str:
        sleeps.append("before")
        durable.sleep(timedelta(hours=1))
        answer = interrupt("ok?")
        return f"{x} {answer}"

    with FakeClock(T0):  # the sleep moves this clock to its wake time at once
        main.invoke(1, _config("r"))
    # resumed an hour and a second later: the recorded wake time has passed
    with FakeClock(T0 + 3601, skip_sleeps=False):
        thread, out = _in_thread(lambda: main.invoke(Command(resume="yes"), _config("r")))
        thread.join(10)
    assert out == ["1 yes"]


def test_a_resumed_sleep_waits_out_only_the_rest(tmp_path: Path) -> None:
    """A process dies while its run sleeps; ``invoke(None)`` in another one
    half-way through waits the other half (recorded wake time), not the
    whole sleep again, and finished tasks are not run again."""
    db = tmp_path / "s.db"
    log = tmp_path / "log"
    script = tmp_path / "flow.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            from pregelkit import durable
            from pregelkit.checkpoint.sqlite import SqliteSaver
            from pregelkit.func import entrypoint, task

            @task
            def step(x):
                with open({str(log)!r}, "a") as f:
                    f.write(f"step {{x}}\\n")
                return x + 1

            with SqliteSaver.from_conn_string({str(db)!r}) as saver:
                @entrypoint(checkpointer=saver)
                def main(x):
                    y = step(x).result()
                    durable.sleep(float(sys.argv[2]))
                    return step(y).result()

                config = {{"configurable": {{"thread_id": "k"}}}}
                start = time.monotonic()
                out = main.invoke(None if sys.argv[1] == "resume" else 1, config)
                print(out, round(time.monotonic() - start, 2), flush=True)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, str(script), "start", "4"], env=env)
    _until(lambda: log.exists() and log.read_text() == "step 1\n", 30)
    time.sleep(1.0)  # into the sleep
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    done = subprocess.run(
        [sys.executable, str(script), "resume", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result, waited = done.stdout.split()
    assert result == "3"
    # killed a second into the 4 s sleep: the resume waits what is left of it
    # (the recorded wake time), not the whole sleep again
    assert float(waited) < 3.6
    assert log.read_text() == "step 1\nstep 2\n"
    # the dead run's parked row was taken over and went with the wait: no
    # worker will resume a thread that has moved on
    with SqliteSaver.from_conn_string(str(db)) as saver:
        assert handle_of_thread(saver, "k") is None


def test_the_test_clock_skips_a_sleep_of_days() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def reminder(x: int) -> int:
        durable.sleep_until(datetime.fromtimestamp(T0, UTC) + timedelta(days=3))
        return x

    with FakeClock(T0) as clock:
        start = time.monotonic()
        assert reminder.invoke(1, _config("d")) == 1
        assert time.monotonic() - start < 5
        assert clock.now() == T0 + 3 * 86400


def test_async_sleeps(async_saver: BaseCheckpointSaver[Any], arun: Any) -> None:
    @entrypoint(checkpointer=async_saver)
    async def main(x: int) -> int:
        await durable.asleep(0.1)
        await durable.asleep_until(datetime.now(UTC) + timedelta(milliseconds=100))
        return x * 2

    start = time.monotonic()
    assert arun(main.ainvoke(4, _config("a"))) == 8
    assert time.monotonic() - start >= 0.2


def test_a_sync_sleep_in_an_async_workflow_says_what_to_use() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    async def main(x: int) -> int:
        durable.sleep(1)
        return x

    with pytest.raises(RuntimeError, match=r"await pregelkit.durable.asleep"):
        asyncio.run(main.ainvoke(1, _config("s")))


def test_a_sleep_in_a_task_and_in_a_pregel_node() -> None:
    @task
    def nap(x: int) -> int:
        durable.sleep(0.05)
        return x + 1

    @entrypoint(checkpointer=InMemorySaver())
    def main(x: int) -> int:
        return nap(x).result()

    assert main.invoke(1, _config("n")) == 2

    def node(x: int) -> int:
        durable.sleep(0.05)
        return x * 10

    graph = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
    )
    assert graph.invoke(3, _config("p")) == 30


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: durable.sleep(-1), ValueError, "seconds >= 0"),
        (lambda: durable.sleep(float("nan")), ValueError, "seconds >= 0"),
        (lambda: durable.sleep(float("inf")), ValueError, "finite"),
        (lambda: durable.sleep(True), TypeError, "got bool"),
        (lambda: durable.sleep("5"), TypeError, "got str"),
        (lambda: durable.sleep_until(datetime(2030, 1, 1)), ValueError, "aware datetime"),
        (lambda: durable.sleep_until(12.0), TypeError, "takes a datetime"),
    ],
)
def test_bad_arguments_are_refused_before_anything_waits(call: Any, error: Any, match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_a_sleep_outside_a_workflow_says_where_it_belongs() -> None:
    with pytest.raises(RuntimeError, match="inside a running graph"):
        durable.sleep(1)


def test_cancel_ends_a_sleep_at_once(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            durable.sleep(3600)
            return x

        thread, out = _in_thread(lambda: main.invoke(1, _config("c")))
        _until(lambda: durable.waiting(main, _config("c")) is not None)
        start = time.monotonic()
        main.cancel(_config("c"))
        thread.join(30)
        assert not thread.is_alive()
        assert time.monotonic() - start < 25
        assert isinstance(out[0], RunCancelledError)


def test_code_that_now_sleeps_where_it_called_a_task_is_refused() -> None:
    saver = InMemorySaver()

    @task
    def step(x: int) -> int:
        return x

    def before(x: int) -> int:
        step(x).result()
        return interrupt("go?")

    def after(x: int) -> int:
        durable.sleep(0)
        return interrupt("go?")

    before.__name__ = after.__name__ = "main"
    entrypoint(checkpointer=saver)(before).invoke(1, _config("e"))
    with pytest.raises(NondeterminismError, match=r"pregelkit\.sleep"):
        entrypoint(checkpointer=saver)(after).invoke(Command(resume=1), _config("e"))
