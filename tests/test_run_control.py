"""Stopping runs: leaving a stream, Ctrl-C, asyncio cancellation, ``cancel()``
from this or another process, and drains.

Each way must stop the run the same way: no task starts after the stop is
noticed, running asyncio tasks are cancelled (a drain lets them finish), what
finished is saved, the thread lock is free when control returns, and the
thread resumes to the right result without running any finished body twice.
Bodies record their starts, so "no body twice" is checked on what ran, not on
what the library says. Everything runs on the memory, SQLite and PostgreSQL
savers (``saver``/``async_saver``); what is about processes and signals
(Ctrl-C, ``pregelkit cancel`` from another process) runs in subprocesses.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pregelkit.channels.last_value import LastValue
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.config import get_stream_writer
from pregelkit.errors import GraphDrained, RunCancelledError
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.runtime import RunControl
from pregelkit.types import interrupt

T = TypeVar("T")
TESTS = Path(__file__).parent
WORKFLOW = TESTS / "run_control_workflow.py"


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class Bodies:
    """What the task bodies did: each start and each end, in order, with the time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, int, float]] = []

    def add(self, kind: str, i: int) -> None:
        with self.lock:
            self.events.append((kind, i, time.monotonic()))

    def started(self) -> list[int]:
        return [i for kind, i, _ in self.events if kind == "start"]

    def finished(self) -> list[int]:
        return [i for kind, i, _ in self.events if kind == "end"]

    def started_after(self, t: float) -> list[int]:
        return [i for kind, i, at in self.events if kind == "start" and at > t]


def chain(saver: BaseCheckpointSaver[Any], bodies: Bodies, sleep: float = 0.05) -> Pregel:
    """``n`` chained task calls; the entrypoint streams ``i`` after each."""

    @task
    def step(i: int) -> int:
        bodies.add("start", i)
        time.sleep(sleep)
        bodies.add("end", i)
        return i * 10

    @entrypoint(checkpointer=saver)
    def workflow(n: int) -> list[int]:
        out = []
        for i in range(n):
            out.append(step(i).result())
            get_stream_writer()(i)
        return out

    return workflow


def achain(saver: BaseCheckpointSaver[Any], bodies: Bodies, sleep: float = 0.05) -> Pregel:
    @task
    async def step(i: int) -> int:
        bodies.add("start", i)
        await asyncio.sleep(sleep)
        bodies.add("end", i)
        return i * 10

    @entrypoint(checkpointer=saver)
    async def workflow(n: int) -> list[int]:
        out = []
        for i in range(n):
            out.append(await step(i))
            get_stream_writer()(i)
        return out

    return workflow


def after_step(bodies: Bodies, i: int, action: Callable[[], object]) -> threading.Thread:
    """Run ``action`` from another thread once step ``i`` has finished: tied
    to the run's progress, not to the clock (a busy machine starts late)."""

    def wait_then_act() -> None:
        deadline = time.monotonic() + 60
        while ("end", i) not in [(k, j) for k, j, _ in bodies.events]:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        action()

    thread = threading.Thread(target=wait_then_act)
    thread.start()
    return thread


async def aafter_step(bodies: Bodies, i: int) -> None:
    deadline = time.monotonic() + 60
    while ("end", i) not in [(k, j) for k, j, _ in bodies.events]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)


def assert_free(saver: BaseCheckpointSaver[Any], thread: str) -> None:
    """The thread lock is free: a new run could take it right now."""
    with saver.lock_thread(thread):
        pass


def assert_resumes(workflow: Pregel, thread: str, n: int, bodies: Bodies) -> None:
    before = list(bodies.finished())
    assert workflow.invoke(None, cfg(thread)) == [i * 10 for i in range(n)]
    # every body finished once: a saved result is never computed again
    assert sorted(bodies.finished()) == list(range(n)), (before, bodies.events)


def quiet_after(bodies: Bodies, seconds: float = 0.3) -> None:
    """Nothing of the stopped run goes on in the background."""
    count = len(bodies.events)
    time.sleep(seconds)
    assert len(bodies.events) == count, bodies.events


# leaving a stream (sync)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_break_out_of_stream_stops_the_run(
    saver: BaseCheckpointSaver[Any], durability: str
) -> None:
    bodies = Bodies()
    workflow = chain(saver, bodies)
    for chunk in workflow.stream(10, cfg("t"), stream_mode="custom", durability=durability):
        if chunk == 2:
            break
    assert_free(saver, "t")
    quiet_after(bodies)
    # the step that was running when the caller left may finish (a thread
    # cannot be stopped); none after it starts
    assert bodies.started() in ([0, 1, 2], [0, 1, 2, 3]), bodies.events
    assert workflow.get_state(cfg("t")).next == ("workflow",)
    assert_resumes(workflow, "t", 10, bodies)


def test_collected_stream_stops_the_run(saver: BaseCheckpointSaver[Any]) -> None:
    bodies = Bodies()
    workflow = chain(saver, bodies)
    stream = workflow.stream(10, cfg("t"), stream_mode="custom")
    assert [next(stream), next(stream)] == [0, 1]
    del stream
    gc.collect()
    assert_free(saver, "t")
    quiet_after(bodies)
    assert len(bodies.started()) <= 3, bodies.events
    assert_resumes(workflow, "t", 10, bodies)


# cancel() from another thread (across processes: below)


def test_cancel_stops_the_run_and_the_thread_waits_for_uncancel(
    saver: BaseCheckpointSaver[Any],
) -> None:
    bodies = Bodies()
    workflow = chain(saver, bodies, sleep=0.2)
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.monotonic())
        workflow.cancel(cfg("t"))

    timer = after_step(bodies, 1, cancel)
    t0 = time.monotonic()
    with pytest.raises(RunCancelledError, match="'t' was cancelled") as info:
        workflow.invoke(10, cfg("t"))
    timer.join()
    assert info.value.thread_id == "t"
    assert time.monotonic() - t0 < 5
    # noticed within a poll (0.1 s) and a task boundary: a step is 0.2 s
    assert len(bodies.started_after(cancelled_at[0])) <= 1, bodies.events
    assert_free(saver, "t")
    quiet_after(bodies)
    state = workflow.get_state(cfg("t"))
    assert state.metadata is not None and state.metadata["stopped"] == "cancelled"
    assert state.next == ("workflow",)
    # never by accident: no input, None or Command runs it until uncancel()
    for again in (None, 3):
        with pytest.raises(RunCancelledError, match="uncancel"):
            workflow.invoke(again, cfg("t"))
    workflow.uncancel(cfg("t"))
    state = workflow.get_state(cfg("t"))
    assert state.metadata is not None and "stopped" not in state.metadata
    assert_resumes(workflow, "t", 10, bodies)


def test_cancel_before_the_run_starts(saver: BaseCheckpointSaver[Any]) -> None:
    bodies = Bodies()
    workflow = chain(saver, bodies)
    workflow.cancel(cfg("t"))
    with pytest.raises(RunCancelledError):
        workflow.invoke(3, cfg("t"))
    assert bodies.events == []
    workflow.uncancel(cfg("t"))
    assert workflow.invoke(3, cfg("t")) == [0, 10, 20]


def test_delete_thread_forgets_the_cancel_mark(saver: BaseCheckpointSaver[Any]) -> None:
    workflow = chain(saver, Bodies())
    workflow.cancel(cfg("t"))
    saver.delete_thread("t")
    assert workflow.invoke(2, cfg("t")) == [0, 10]


def test_cancel_needs_a_thread_and_a_saver_with_marks() -> None:
    workflow = chain(InMemorySaver(), Bodies())
    with pytest.raises(ValueError, match="thread_id"):
        workflow.cancel({})

    class NoMarks(InMemorySaver):  # a saver that keeps no marks (the base's defaults)
        get_thread_control = BaseCheckpointSaver.get_thread_control  # type: ignore[assignment]
        put_thread_control = BaseCheckpointSaver.put_thread_control  # type: ignore[assignment]

    plain = chain(NoMarks(), Bodies())
    with pytest.raises(TypeError, match="keeps no run-control marks"):
        plain.cancel(cfg("t"))
    assert plain.invoke(2, cfg("t")) == [0, 10]  # runs fine, just cannot be cancelled
    with pytest.raises(TypeError, match="RunControl"):
        workflow.invoke(2, cfg("u"), control="drain")


# drains


def test_drain_stops_at_the_next_task_call_and_resumes(saver: BaseCheckpointSaver[Any]) -> None:
    bodies = Bodies()
    workflow = chain(saver, bodies, sleep=0.1)
    control = RunControl()
    timer = after_step(bodies, 1, lambda: control.request_drain("deploy"))
    with pytest.raises(GraphDrained) as info:
        workflow.invoke(10, cfg("t"), control=control)
    timer.join()
    assert info.value.reason == "deploy" and control.drain_reason == "deploy"
    # nothing was cut short: each started body finished
    assert bodies.started() == bodies.finished(), bodies.events
    assert len(bodies.started()) < 10
    state = workflow.get_state(cfg("t"))
    assert state.metadata is not None and state.metadata["stopped"] == "drained"
    assert state.next == ("workflow",)
    assert_resumes(workflow, "t", 10, bodies)
    state = workflow.get_state(cfg("t"))
    assert state.metadata is not None and "stopped" not in state.metadata


def test_drain_of_a_graph_finishes_the_current_step(saver: BaseCheckpointSaver[Any]) -> None:
    ran: list[str] = []
    control = RunControl()

    def node(name: str, drain: bool = False) -> Callable[[int], int]:
        def run(x: int) -> int:
            ran.append(name)
            if drain:
                control.request_drain()
            time.sleep(0.05)
            return x + 1

        return run

    graph = Pregel(
        nodes={
            "a": NodeBuilder().subscribe_only("a").do(node("a", drain=True)).write_to("b"),
            "b": NodeBuilder().subscribe_only("b").do(node("b")).write_to("c"),
            "c": NodeBuilder().subscribe_only("c").do(node("c")).write_to("out"),
        },
        channels={k: LastValue(int) for k in ("a", "b", "c", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=saver,
    )
    with pytest.raises(GraphDrained):
        graph.invoke(0, cfg("g"), control=control)
    assert ran == ["a"]  # its step finished and was saved; the next did not start
    state = graph.get_state(cfg("g"))
    assert state.next == ("b",) and state.values["b"] == 1
    assert state.metadata is not None and state.metadata["stopped"] == "drained"
    assert graph.invoke(None, cfg("g")) == 3
    assert ran == ["a", "b", "c"]


def test_a_run_that_ends_at_the_drain_returns_normally() -> None:
    control = RunControl()
    control.request_drain()
    graph = Pregel(
        nodes={"a": NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to("out")},
        channels={"a": LastValue(int), "out": LastValue(int)},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    # drained before its first step: it stops there, resumable
    with pytest.raises(GraphDrained):
        graph.invoke(1, cfg("g"), control=control)
    assert graph.invoke(None, cfg("g")) == 2


# async: aclose, cancelling the task, acancel, drain


def test_aclose_of_astream_stops_the_run(
    async_saver: BaseCheckpointSaver[Any], arun: Callable[[Awaitable[T]], T]
) -> None:
    bodies = Bodies()
    workflow = achain(async_saver, bodies, sleep=0.1)

    async def main() -> None:
        stream = workflow.astream(10, cfg("t"), stream_mode="custom")
        async for chunk in stream:
            if chunk == 2:
                break
        await stream.aclose()
        async with async_saver.alock_thread("t"):
            pass
        count = len(bodies.events)
        await asyncio.sleep(0.3)
        assert len(bodies.events) == count, bodies.events
        assert await workflow.ainvoke(None, cfg("t")) == [i * 10 for i in range(10)]

    arun(main())
    # the running step (if any) was cancelled, not finished: it ran again, once
    assert sorted(bodies.finished()) == list(range(10)), bodies.events


def test_cancelling_the_ainvoke_task_stops_the_run(
    async_saver: BaseCheckpointSaver[Any], arun: Callable[[Awaitable[T]], T]
) -> None:
    bodies = Bodies()
    workflow = achain(async_saver, bodies, sleep=0.1)

    async def main() -> None:
        run = asyncio.create_task(workflow.ainvoke(10, cfg("t")))
        await aafter_step(bodies, 2)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        async with async_saver.alock_thread("t"):
            pass
        count = len(bodies.events)
        await asyncio.sleep(0.3)
        assert len(bodies.events) == count, bodies.events
        assert 1 <= len(bodies.finished()) < 10
        assert await workflow.ainvoke(None, cfg("t")) == [i * 10 for i in range(10)]

    arun(main())
    assert sorted(bodies.finished()) == list(range(10)), bodies.events


def test_acancel_stops_only_its_run_among_runs_on_one_event_loop(
    async_saver: BaseCheckpointSaver[Any], arun: Callable[[Awaitable[T]], T]
) -> None:
    """The marks of all runs on an event loop are read by one timer: the
    cancelled thread stops, the other runs on, and no read is left running."""
    bodies = Bodies()
    workflow = achain(async_saver, bodies, sleep=0.05)

    async def main() -> None:
        other = asyncio.create_task(workflow.ainvoke(6, cfg("other")))
        target = asyncio.create_task(workflow.ainvoke(10, cfg("t")))
        await aafter_step(bodies, 1)
        await workflow.acancel(cfg("t"))
        with pytest.raises(RunCancelledError):
            await target
        assert await other == [i * 10 for i in range(6)]
        assert (await workflow.aget_state(cfg("other"))).next == ()
        reads = [
            t for t in asyncio.all_tasks() if "_LoopWatcher._read" in t.get_coro().__qualname__
        ]
        assert reads == []

    arun(main())


class SlowMarks(InMemorySaver):
    """Reads its marks slowly, like a database under load: a poll is still
    reading when a short run ends."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def aget_thread_control(self, thread_id: str) -> str | None:
        self.reads.append("start")
        try:
            await asyncio.sleep(0.5)
            return await super().aget_thread_control(thread_id)
        finally:
            await asyncio.sleep(0.05)  # a cancelled query's round trip and rollback
            self.reads.append("end")


@pytest.mark.parametrize("cancelled", [False, True], ids=["returns", "cancelled"])
def test_a_run_leaves_no_mark_read_running_on_its_event_loop(cancelled: bool) -> None:
    """A caller that stops running the event loop once the run is over
    (``runner.run``, a test harness) would freeze a read still in flight:
    on PostgreSQL, a transaction left open that blocks every TRUNCATE and
    ALTER of the table. The run's end waits for its read instead."""
    saver = SlowMarks()

    @task
    async def slow() -> int:
        await asyncio.sleep(5 if cancelled else 0.3)
        return 1

    @entrypoint(checkpointer=saver)
    async def workflow(n: int) -> int:
        return await slow() + n

    async def run() -> int:
        job = asyncio.create_task(workflow.ainvoke(1, cfg("t")))
        if cancelled:
            await asyncio.sleep(0.8)  # the first read (0.5 s), then a poll in flight
            job.cancel()
        return await job

    with asyncio.Runner() as runner:
        if cancelled:
            with pytest.raises(asyncio.CancelledError):
                runner.run(run())
        else:
            assert runner.run(run()) == 2
        left = [t for t in asyncio.all_tasks(runner.get_loop()) if not t.done()]
        assert left == []
        # the start-of-run read, and a poll that was in flight at the end
        assert saver.reads == ["start", "end", "start", "end"]


@pytest.mark.parametrize("ending", ["returns", "raises", "interrupted", "aclosed", "cancelled"])
def test_an_async_run_leaves_nothing_running_on_its_event_loop(
    ending: str, async_saver: BaseCheckpointSaver[Any], _loop_runner: asyncio.Runner
) -> None:
    """However an async run ends, once its caller has control back no task
    of the run is left on the loop to finish later (a loop that is not run
    again would freeze it with its locks and transactions). Only ``break``
    out of ``async for`` leaves closing to Python's async generator
    finalizer, which runs on the loop: docs/guides/stopping-runs.md says to
    call ``aclose()``."""

    @task
    async def step(i: int) -> int:
        await asyncio.sleep(0.05)
        return i

    @entrypoint(checkpointer=async_saver)
    async def workflow(how: str) -> int:
        total = 0
        for i in range(6):
            total += await step(i)
        if how == "raises":
            raise ValueError("the body failed")
        if how == "interrupted":
            interrupt("approve?")
        return total

    before: set[asyncio.Task[Any]] = set()

    async def main() -> None:
        before.update(asyncio.all_tasks())
        if ending == "aclosed":
            stream = workflow.astream(ending, cfg("t"), stream_mode="updates")
            await stream.__anext__()
            await stream.aclose()
        elif ending == "cancelled":
            run = asyncio.create_task(workflow.ainvoke(ending, cfg("t")))
            await asyncio.sleep(0.15)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        elif ending == "raises":
            with pytest.raises(ValueError, match="the body failed"):
                await workflow.ainvoke(ending, cfg("t"))
        else:
            await workflow.ainvoke(ending, cfg("t"))

    _loop_runner.run(main())
    left = [t for t in asyncio.all_tasks(_loop_runner.get_loop()) - before if not t.done()]
    assert left == []


def test_acancel_cancels_running_async_tasks(
    async_saver: BaseCheckpointSaver[Any], arun: Callable[[Awaitable[T]], T]
) -> None:
    bodies = Bodies()

    @task
    async def leaf(i: int) -> int:
        bodies.add("start", i)
        await asyncio.sleep(0.1 * (i + 1))
        bodies.add("end", i)
        return i

    @entrypoint(checkpointer=async_saver)
    async def fan(n: int) -> int:
        return sum(await asyncio.gather(*(leaf(i) for i in range(n))))

    async def main() -> list[int]:
        async def cancel_soon() -> None:
            await aafter_step(bodies, 1)
            await fan.acancel(cfg("f"))

        canceller = asyncio.create_task(cancel_soon())
        with pytest.raises(RunCancelledError):
            await fan.ainvoke(10, cfg("f"))
        first_run = bodies.finished()
        await canceller
        state = await fan.aget_state(cfg("f"))
        assert state.metadata is not None and state.metadata["stopped"] == "cancelled"
        await fan.auncancel(cfg("f"))
        assert await fan.ainvoke(None, cfg("f")) == 45
        return first_run

    first_run = arun(main())
    # the slow leaves (up to 1 s, cancel after 0.2 s) were cancelled, not waited for
    assert 1 in first_run and 9 not in first_run, bodies.events
    finished = bodies.finished()
    assert sorted(finished) == list(range(10)) and len(finished) == 10, bodies.events


def test_async_drain(
    async_saver: BaseCheckpointSaver[Any], arun: Callable[[Awaitable[T]], T]
) -> None:
    bodies = Bodies()
    workflow = achain(async_saver, bodies, sleep=0.1)
    control = RunControl()

    async def main() -> None:
        async def drain_soon() -> None:
            await aafter_step(bodies, 1)
            control.request_drain()

        drainer = asyncio.create_task(drain_soon())
        with pytest.raises(GraphDrained):
            await workflow.ainvoke(10, cfg("t"), control=control)
        await drainer
        assert bodies.started() == bodies.finished()  # a drain cancels nothing
        state = await workflow.aget_state(cfg("t"))
        assert state.metadata is not None and state.metadata["stopped"] == "drained"
        assert await workflow.ainvoke(None, cfg("t")) == [i * 10 for i in range(10)]

    arun(main())
    assert sorted(bodies.finished()) == list(range(10)), bodies.events


# processes and signals


def _log(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    return [(k, int(i)) for k, i in (line.split() for line in path.read_text().splitlines())]


def _wait_for(predicate: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _db(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return str(tmp_path / "state.db")
    make: Callable[[str], str] = request.getfixturevalue("postgres_database")
    return make(f"pregelkit_rc_{abs(hash(request.node.nodeid)) % 10**10}")


def _uncancel(db: str) -> None:
    """What ``pregelkit resume`` does first: clear the mark (here straight
    through the saver, as the workflow script was not started by the CLI)."""
    if not db.endswith(".db"):
        with PostgresSaver.from_conn_string(db) as pg:
            pg.put_thread_control("x", None)
    else:
        with SqliteSaver.from_conn_string(db) as sq:
            sq.put_thread_control("x", None)


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_cancel_from_another_process(
    kind: str, use_async: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    db = _db(kind, tmp_path, request)
    log = tmp_path / "log"
    args = [str(WORKFLOW), "--db", db, "--thread", "x", "--log", str(log), "--n", "12"]
    args += ["--sleep", "0.3"] + (["--async"] if use_async else [])
    proc = _spawn(args)
    try:
        _wait_for(lambda: ("end", 1) in _log(log))
        cancel = subprocess.run(
            [sys.executable, "-m", "pregelkit", "cancel", "x", "--db", db],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cancel.returncode == 0, cancel.stderr
        assert "cancelled: thread x" in cancel.stdout
        starts_at_cancel = [i for k, i in _log(log) if k == "start"]
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 4, (out, err)
    starts = [i for k, i in _log(log) if k == "start"]
    # it noticed within a task boundary: at most the one task starting as the
    # mark was written (a poll is 0.1 s, a task 0.3 s)
    assert len(starts) <= len(starts_at_cancel) + 1, (starts_at_cancel, starts)
    # resuming needs the explicit ask; then it finishes with nothing done twice
    again = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=TESTS
    )
    assert again.returncode == 4 and "cancelled" in again.stdout
    _uncancel(db)
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=TESTS
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [i * 10 for i in range(12)]
    ends = [i for k, i in _log(log) if k == "end"]
    assert sorted(ends) == list(range(12)), _log(log)


def test_ctrl_c_in_invoke_saves_and_reraises(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    log = tmp_path / "log"
    args = [str(WORKFLOW), "--db", db, "--thread", "x", "--log", str(log), "--n", "10"]
    proc = _spawn([*args, "--sleep", "0.3"])
    try:
        _wait_for(lambda: ("end", 1) in _log(log))
        proc.send_signal(signal.SIGINT)
        sent = [i for k, i in _log(log) if k == "start"]
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    starts = [i for k, i in _log(log) if k == "start"]
    assert len(starts) <= len(sent) + 1, (sent, starts)
    done = subprocess.run(
        [sys.executable, *args, "--sleep", "0.01"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [i * 10 for i in range(10)]
    assert sorted(i for k, i in _log(log) if k == "end") == list(range(10)), _log(log)


def _flow_module(tmp_path: Path, log: Path) -> Path:
    module = tmp_path / "flow.py"
    module.write_text(
        "import os, time\n"
        "from pregelkit.func import entrypoint, task\n"
        f"LOG = {str(log)!r}\n"
        "def note(line):\n"
        "    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
        "    os.write(fd, (line + '\\n').encode()); os.close(fd)\n"
        "@task\n"
        "def step(i: int) -> int:\n"
        "    note(f'start {i}'); time.sleep(0.3); note(f'end {i}')\n"
        "    return i * 10\n"
        "@entrypoint()\n"
        "def flow(n: int) -> list[int]:\n"
        "    return [step(i).result() for i in range(n)]\n"
    )
    return module


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).parent / "pregelkit")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_pregelkit_cancel_threads_status_and_resume(tmp_path: Path) -> None:
    log = tmp_path / "log"
    module = _flow_module(tmp_path, log)
    db = str(tmp_path / "cli.sqlite")
    assert (
        _cli("run", f"{module}:flow", "2", "--thread", "a", "--db", db, cwd=tmp_path).returncode
        == 0
    )
    unknown = _cli("cancel", "nope", "--db", db, cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown thread 'nope'" in unknown.stderr
    # a finished thread has nothing to cancel: refused, and left unmarked
    finished = _cli("cancel", "a", "--db", db, "--json", cwd=tmp_path)
    assert finished.returncode == 2, finished.stdout
    assert json.loads(finished.stdout)["error"]["type"] == "not_resumable"
    assert "cannot cancel thread 'a': it is done" in finished.stderr
    threads = _cli("threads", "--db", db, "--json", cwd=tmp_path)
    assert "cancelled" not in threads.stdout, threads.stdout
    again = _cli("run", f"{module}:flow", "2", "--thread", "a", "--db", db, cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_ctrl_c_in_pregelkit_run_then_resume(tmp_path: Path) -> None:
    log = tmp_path / "log"
    module = _flow_module(tmp_path, log)
    db = str(tmp_path / "cli.sqlite")
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pregelkit",
            "run",
            f"{module}:flow",
            "8",
            "--thread",
            "c",
            "--db",
            db,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        _wait_for(lambda: ("end", 1) in _log(log))
        run.send_signal(signal.SIGINT)
        sent = [i for k, i in _log(log) if k == "start"]
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, (out, err)
    hint = err.strip().splitlines()[-1].split("continue with: ")[-1]
    assert hint.startswith("pregelkit ") and "resume c" in hint, err
    starts = [i for k, i in _log(log) if k == "start"]
    assert len(starts) <= len(sent) + 1, (sent, starts)
    # the printed hint works
    resumed = subprocess.run(
        [str(Path(sys.executable).parent / "pregelkit"), *shlex.split(hint)[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "[0, 10, 20, 30, 40, 50, 60, 70]" in resumed.stdout
    assert sorted(i for k, i in _log(log) if k == "end") == list(range(8)), _log(log)


def test_a_cancel_during_the_last_task_of_a_run_that_ends_done_leaves_no_mark(
    saver: BaseCheckpointSaver[Any],
) -> None:
    """The run finishes its last task and ends done: the thread is done, not
    cancelled (a cancelled finished thread refused every later run)."""
    started = threading.Event()

    @task
    def slow(x: int) -> int:
        started.set()
        time.sleep(0.5)
        return x + 1

    @entrypoint(checkpointer=saver)
    def flow(x: int) -> int:
        return slow(x).result()

    canceller = threading.Thread(
        target=lambda: started.wait(10) and flow.cancel(cfg("last")) is None
    )
    canceller.start()
    assert flow.invoke(1, cfg("last")) == 2
    canceller.join()
    state = flow.get_state(cfg("last"))
    assert state.metadata is not None and "stopped" not in state.metadata
    assert state.next == ()
    assert flow.invoke(5, cfg("last")) == 6  # not refused as cancelled
