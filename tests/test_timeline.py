"""Attempt records on every saver: what a run with a retried task, a cached
task, an interrupt and a resume leaves, what a killed process leaves, and
that records go with the thread (deleted, pruned, copied)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pregelkit.cache.memory import InMemoryCache
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.func import entrypoint, task
from pregelkit.observe.timeline import Timeline, aload_timeline, load_timeline
from pregelkit.types import CachePolicy, Command, RetryPolicy, interrupt

Saver = BaseCheckpointSaver[Any]
ROOT = Path(__file__).resolve().parent.parent


def _sync_workflow(saver: Saver) -> Any:
    failures = {"left": 1}

    @task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.001, retry_on=ValueError))
    def flaky(x: int) -> int:
        if failures["left"]:
            failures["left"] -= 1
            raise ValueError("first attempt fails")
        return x + 1

    @task(cache_policy=CachePolicy())
    def double(x: int) -> int:
        return x * 2

    @entrypoint(checkpointer=saver, cache=InMemoryCache())
    def wf(x: int) -> int:
        a = flaky(x).result()
        b = double(a).result()
        c = double(a).result()  # same key: a cache hit
        extra = interrupt("how much more?")
        return b + c + int(extra)

    return wf


def _async_workflow(saver: Saver) -> Any:
    failures = {"left": 1}

    @task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.001, retry_on=ValueError))
    async def flaky(x: int) -> int:
        if failures["left"]:
            failures["left"] -= 1
            raise ValueError("first attempt fails")
        return x + 1

    @task(cache_policy=CachePolicy())
    async def double(x: int) -> int:
        return x * 2

    @entrypoint(checkpointer=saver, cache=InMemoryCache())
    async def wf(x: int) -> int:
        a = await flaky(x)
        b = await double(a)
        c = await double(a)
        extra = interrupt("how much more?")
        return b + c + int(extra)

    return wf


FIRST_RUN = [
    ("double", 0, "cached", None),
    ("double", 1, "ok", None),
    ("flaky", 1, "error", "ValueError"),
    ("flaky", 2, "ok", None),
    ("wf", 1, "interrupted", None),
]
RESUME = [
    ("double", 0, "replayed", None),
    ("double", 0, "replayed", None),
    ("flaky", 0, "replayed", None),
    ("wf", 1, "ok", None),
]


def _shape(timeline: Timeline) -> list[list[tuple[Any, ...]]]:
    return [
        sorted((a.name, a.attempt, a.outcome, a.error_type) for a in run.attempts)
        for run in timeline.runs
    ]


def _check_records(timeline: Timeline, thread_id: str) -> None:
    assert timeline.thread_id == thread_id
    assert _shape(timeline) == [FIRST_RUN, RESUME]
    first, second = timeline.runs
    assert first.run_id != second.run_id
    assert first.ended_at is not None and first.ended_at <= second.started_at
    for run in timeline.runs:
        assert run.attempts[0].name == "wf"  # the entrypoint starts first
        assert [a.started_at for a in run.attempts] == sorted(a.started_at for a in run.attempts)
        for a in run.attempts:
            assert a.thread_id == thread_id and a.checkpoint_ns == "" and a.step == 0
            assert a.run_id == run.run_id and a.pid == os.getpid() and a.host
            assert a.ended_at is not None and a.duration is not None and a.duration >= 0
    failed = next(a for a in first.attempts if a.outcome == "error")
    assert failed.error_message == "first attempt fails"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_retry_cache_interrupt_resume_records(saver: Saver, durability: str) -> None:
    wf = _sync_workflow(saver)
    config = {"configurable": {"thread_id": "t1"}}
    wf.invoke(1, config, durability=durability)
    assert wf.invoke(Command(resume=5), config, durability=durability) == 4 + 4 + 5
    timeline = load_timeline(saver, "t1")
    _check_records(timeline, "t1")
    assert wf.get_timeline(config) == timeline
    assert load_timeline(saver, "never-ran").runs == ()


def test_async_records(async_saver: Saver, arun: Callable[[Awaitable[Any]], Any]) -> None:
    wf = _async_workflow(async_saver)
    config = {"configurable": {"thread_id": "t2"}}
    arun(wf.ainvoke(1, config, durability="sync"))
    assert arun(wf.ainvoke(Command(resume=5), config)) == 4 + 4 + 5
    timeline = arun(aload_timeline(async_saver, "t2"))
    _check_records(timeline, "t2")
    assert arun(wf.aget_timeline(config)) == timeline


def test_records_go_with_the_thread(saver: Saver) -> None:
    wf = _sync_workflow(saver)
    config = {"configurable": {"thread_id": "t3"}}
    wf.invoke(1, config)
    wf.invoke(Command(resume=1), config)
    saver.copy_thread("t3", "t3-copy")
    copied = load_timeline(saver, "t3-copy")
    assert _shape(copied) == [FIRST_RUN, RESUME]
    assert {a.thread_id for run in copied.runs for a in run.attempts} == {"t3-copy"}
    saver.prune(["t3"], strategy="keep_latest")
    assert _shape(load_timeline(saver, "t3")) == [RESUME]
    saver.delete_thread("t3")
    assert load_timeline(saver, "t3").runs == ()
    assert len(load_timeline(saver, "t3-copy").runs) == 2


def test_no_thread_id_and_wrong_saver_say_what_to_do(saver: Saver) -> None:
    wf = _sync_workflow(saver)
    with pytest.raises(ValueError, match="thread_id"):
        wf.get_timeline({})
    with pytest.raises(TypeError, match="checkpoint saver"):
        load_timeline("state.db", "t")  # type: ignore[arg-type]


def test_a_saver_without_records_runs_and_says_so() -> None:
    """A third-party saver that keeps no attempts still runs workflows."""
    from pregelkit.checkpoint.memory import InMemorySaver

    class Plain(InMemorySaver):
        put_attempts = BaseCheckpointSaver.put_attempts  # type: ignore[assignment]
        aput_attempts = BaseCheckpointSaver.aput_attempts  # type: ignore[assignment]
        list_attempts = BaseCheckpointSaver.list_attempts  # type: ignore[assignment]

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            super().put_writes(config, writes, task_id, task_path)

    saver = Plain()
    assert not saver.records_attempts
    wf = _sync_workflow(saver)
    config = {"configurable": {"thread_id": "t"}}
    wf.invoke(1, config)
    assert wf.invoke(Command(resume=1), config) == 9
    with pytest.raises(NotImplementedError, match="list_attempts"):
        wf.get_timeline(config)


# a killed process

KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pregelkit.func import entrypoint, task

    db, marker, durability = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if db.startswith("postgresql"):
        from pregelkit.checkpoint.postgres import PostgresSaver as Saver
    else:
        from pregelkit.checkpoint.sqlite import SqliteSaver as Saver

    @task
    def quick(x):
        return x + 1

    @task
    def stuck(x):
        marker.write_text(repr(time.time()))
        time.sleep(600)
        return x

    with Saver.from_conn_string(db) as saver:
        @entrypoint(checkpointer=saver)
        def wf(x):
            return stuck(quick(x).result()).result()

        wf.invoke(1, {"configurable": {"thread_id": "killed"}}, durability=durability)
    """
)


KILL_AFTER = 0.5


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_killed_process_leaves_unfinished_attempts(
    kind: str, durability: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        from pregelkit.checkpoint.sqlite import SqliteSaver as Saver

        db = str(tmp_path / "state.db")
    else:
        from pregelkit.checkpoint.postgres import PostgresSaver as Saver  # type: ignore[assignment]

        db = request.getfixturevalue("postgres_database")(f"pregelkit_killed_{durability}")
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, str(script), db, str(marker), durability], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None, "the workflow process ended before its task started"
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.001)
        # killed KILL_AFTER after the body started, without looking at the
        # database first: a running attempt's start is saved within a few ms
        # (START_SAVE_DELAY twice, plus a commit); the rest is a guard for a
        # loaded machine
        time.sleep(max(0.0, float(marker.read_text()) + KILL_AFTER - time.time()))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Saver.from_conn_string(db) as saver:
        (run,) = load_timeline(saver, "killed").runs
    assert run.ended_at is None
    got = {(a.name, a.attempt): (a.outcome, a.ended_at is None) for a in run.attempts}
    assert got == {
        ("wf", 1): (None, True),
        ("quick", 1): ("ok", False),
        ("stuck", 1): (None, True),
    }
    assert {a.pid for a in run.attempts} == {proc.pid}


# what else ends an attempt


def test_cancelled_timed_out_and_nondeterministic_attempts(
    async_saver: Saver, arun: Callable[[Awaitable[Any]], Any]
) -> None:
    import asyncio

    from pregelkit.errors import NodeTimeoutError, NondeterminismError
    from pregelkit.types import TimeoutPolicy

    started = asyncio.Event()

    @task
    async def forever() -> None:
        started.set()
        await asyncio.sleep(600)

    @task(timeout=TimeoutPolicy(run_timeout=0.05))
    async def slow() -> None:
        await asyncio.sleep(600)

    @entrypoint(checkpointer=async_saver)
    async def hangs(kind: str) -> None:
        await (forever() if kind == "cancel" else slow())

    async def cancel_midway() -> None:
        run = asyncio.create_task(hangs.ainvoke("cancel", {"configurable": {"thread_id": "c"}}))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    arun(cancel_midway())
    (run,) = arun(aload_timeline(async_saver, "c")).runs
    assert sorted((a.name, a.outcome) for a in run.attempts) == [
        ("forever", "cancelled"),
        ("hangs", "cancelled"),
    ]
    with pytest.raises(NodeTimeoutError):
        arun(hangs.ainvoke("timeout", {"configurable": {"thread_id": "to"}}))
    (run,) = arun(aload_timeline(async_saver, "to")).runs
    got = {a.name: (a.outcome, a.error_type) for a in run.attempts}
    assert got == {"slow": ("timeout", "NodeTimeoutError"), "hangs": ("error", "NodeTimeoutError")}

    @task
    async def one() -> int:
        return 1

    @task
    async def two() -> int:
        return 2

    def build(first: Any) -> Any:
        @entrypoint(checkpointer=async_saver)
        async def wf(x: int) -> int:
            a = await first()
            return a + interrupt("go on?")

        return wf

    config = {"configurable": {"thread_id": "nd"}}
    arun(build(one).ainvoke(1, config))
    with pytest.raises(NondeterminismError):
        arun(build(two).ainvoke(Command(resume=1), config))
    _, second = arun(aload_timeline(async_saver, "nd")).runs
    assert [(a.name, a.outcome) for a in second.attempts] == [("wf", "error")]
    assert second.attempts[0].error_type == "NondeterminismError"


def test_pregel_nodes_and_subgraph_attempts(saver: Saver) -> None:
    from pregelkit.channels.last_value import LastValue
    from pregelkit.pregel import NodeBuilder, Pregel

    inner = Pregel(
        nodes={"deep": NodeBuilder().subscribe_only("x").do(lambda v: v + "!").write_to("y")},
        channels={"x": LastValue(str), "y": LastValue(str)},
        input_channels="x",
        output_channels="y",
    )
    graph = Pregel(
        nodes={
            "one": NodeBuilder().subscribe_only("a").do(lambda v: v + "1").write_to("b"),
            "two": NodeBuilder().subscribe_only("b").do(inner.invoke).write_to("c"),
        },
        channels={k: LastValue(str) for k in "abc"},
        input_channels="a",
        output_channels="c",
        checkpointer=saver,
        interrupt_before_nodes=["two"],
    )
    config = {"configurable": {"thread_id": "p"}}
    graph.invoke("a", config)
    assert graph.invoke(None, config) == "a1!"
    first, second = graph.get_timeline(config).runs
    assert [(a.name, a.step, a.outcome, a.checkpoint_ns) for a in first.attempts] == [
        ("one", 0, "ok", "")
    ]
    got = sorted((a.name, a.step, a.outcome, a.checkpoint_ns[:4]) for a in second.attempts)
    assert got == [("deep", 0, "ok", "two:"), ("two", 1, "ok", "")]
    assert {a.run_id for a in second.attempts} == {second.run_id}


def test_a_call_that_waits_for_its_running_twin_is_cached(saver: Saver) -> None:
    @task(cache_policy=CachePolicy())
    def slow(x: int) -> int:
        time.sleep(0.2)
        return x

    @entrypoint(checkpointer=saver, cache=InMemoryCache())
    def wf(x: int) -> int:
        first, second = slow(x), slow(x)  # the second waits for the first
        return first.result() + second.result()

    assert wf.invoke(3, {"configurable": {"thread_id": "twins"}}) == 6
    (run,) = load_timeline(saver, "twins").runs
    assert sorted((a.name, a.attempt, a.outcome) for a in run.attempts) == [
        ("slow", 0, "cached"),
        ("slow", 1, "ok"),
        ("wf", 1, "ok"),
    ]


def test_an_exception_that_cannot_be_printed_is_still_recorded() -> None:
    from pregelkit.checkpoint.memory import InMemorySaver

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str()")

    saver = InMemorySaver()

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        raise Unprintable()

    with pytest.raises(Unprintable):
        wf.invoke(1, {"configurable": {"thread_id": "u"}})
    (run,) = load_timeline(saver, "u").runs
    (a,) = run.attempts
    assert (a.outcome, a.error_type) == ("error", "Unprintable")
    assert a.error_message == "<Unprintable: str() failed>"
