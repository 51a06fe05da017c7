"""Timeouts: ``TimeoutPolicy`` on tasks, entrypoints and nodes, and ``step_timeout``.

Every run that could hang runs in a subprocess with a wall-clock guard: the
bodies hang for 60 s, and the test asserts the caller got control back in
well under that (``LIMIT``), so a broken timeout fails instead of hanging the
suite. Each script prints one JSON line of facts that the test asserts.
Durable scenarios run on every saver kind (memory, SQLite file, PostgreSQL).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pregelkit.errors import NodeTimeoutError
from pregelkit.func import entrypoint, task
from pregelkit.pregel._graph.nodes import NodeBuilder
from pregelkit.types import RetryPolicy, TimeoutPolicy, default_retry_on

LIMIT = 12.0  # seconds a hanging run may take to hand control back, slack included
GUARD = 120  # seconds before the subprocess is killed: the test fails, never hangs

PRELUDE = '''
import asyncio, contextlib, json, os, sys, time
from pregelkit.channels.last_value import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_stream_writer
from pregelkit.errors import NodeTimeoutError
from pregelkit.func import entrypoint, task
from pregelkit.pregel._graph.nodes import NodeBuilder
from pregelkit.pregel.main import Pregel
from pregelkit.runtime import get_runtime
from pregelkit.types import RetryPolicy, TimeoutPolicy

DB, LOG, THREAD = sys.argv[1], sys.argv[2], sys.argv[3]
CONFIG = {"configurable": {"thread_id": THREAD}}
FLAG = LOG + ".done"  # once it exists, bodies stop hanging

def log(name):
    with open(LOG, "a") as f:
        f.write(name + "\\n")

def runs():
    if not os.path.exists(LOG):
        return {}
    out = {}
    for line in open(LOG).read().split():
        out[line] = out.get(line, 0) + 1
    return out

def hangs():
    return not os.path.exists(FLAG)

@contextlib.contextmanager
def saver():
    if DB == "memory":
        yield InMemorySaver()
    elif DB.endswith(".db"):
        from pregelkit.checkpoint.sqlite import SqliteSaver
        with SqliteSaver.from_conn_string(DB) as s:
            yield s
    else:
        from pregelkit.checkpoint.postgres import PostgresSaver
        with PostgresSaver.from_conn_string(DB) as s:
            s.setup()
            yield s

@contextlib.asynccontextmanager
async def asaver():
    if DB == "memory":
        yield InMemorySaver()
    elif DB.endswith(".db"):
        from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
        async with AsyncSqliteSaver.from_conn_string(DB) as s:
            yield s
    else:
        from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
        async with AsyncPostgresSaver.from_conn_string(DB) as s:
            await s.setup()
            yield s

def timed(fn):
    """(result or error facts, seconds) of fn()."""
    t0 = time.monotonic()
    try:
        out = {"result": fn()}
    except NodeTimeoutError as exc:
        out = {"error": type(exc).__name__, "node": exc.node, "kind": exc.kind,
               "timeout": exc.timeout, "message": str(exc)}
    out["seconds"] = time.monotonic() - t0
    return out

def atimed(coro):
    return timed(lambda: asyncio.run(coro))

def saved_writes(s):
    """Every (task name, channel, value) the saver holds for the thread, as text."""
    out = []
    for tup in s.list(CONFIG):
        for tid, chan, value in tup.pending_writes or ():
            out.append(repr((chan, value)))
    return out

def report(**facts):
    print(json.dumps(facts, default=repr))
'''


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return str(tmp_path / "t.db")
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


def run(script: str, tmp_path: Path, db: str = "memory", env: dict[str, str] | None = None) -> Any:
    """Run PRELUDE + ``script`` in a fresh interpreter; its last stdout line, parsed."""
    path = tmp_path / f"script_{uuid.uuid4().hex[:8]}.py"
    path.write_text(PRELUDE + textwrap.dedent(script))
    log = tmp_path / f"log_{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [sys.executable, str(path), db, str(log), uuid.uuid4().hex],
        capture_output=True,
        text=True,
        timeout=GUARD,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# the step: step_timeout bounds a superstep


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_step_timeout_bounds_a_node_that_never_finishes(tmp_path: Path, mode: str) -> None:
    """Before: an async node that never finished hung the run forever, and a
    sync caller never got control back. Now both get NodeTimeoutError."""
    out = run(
        f"""
        async def ahang(x):
            await asyncio.sleep(60)
        def hang(x):
            time.sleep(60)
        fn = ahang if "{mode}" == "async" else hang
        node = NodeBuilder().subscribe_only("a").do(fn).write_to("b").build()
        g = Pregel(nodes={{"stuck": node}}, channels={{"a": LastValue(int), "b": LastValue(int)}},
                   input_channels="a", output_channels="b", step_timeout=0.5)
        if "{mode}" == "async":
            report(**atimed(g.ainvoke(1)))
        else:
            report(**timed(lambda: g.invoke(1)))
        """,
        tmp_path,
    )
    assert out["error"] == "NodeTimeoutError" and out["kind"] == "step"
    assert "stuck" in out["message"] and "0.5s" in out["message"]
    assert 0.5 <= out["seconds"] < LIMIT


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_step_timeout_saves_finished_tasks_and_resume_reruns_only_the_stuck(
    tmp_path: Path, db: str, mode: str
) -> None:
    out = run(
        f"""
        def fast(x):
            log("fast")
            return x + 1
        def slow(x):
            log("slow")
            if hangs():
                time.sleep(60)
            return x + 10
        async def aslow(x):
            log("slow")
            if hangs():
                await asyncio.sleep(60)
            return x + 10
        def graph(s):
            nodes = {{
                "fast": NodeBuilder().subscribe_only("a").do(fast).write_to("f").build(),
                "slow": NodeBuilder().subscribe_only("a").do(
                    aslow if "{mode}" == "async" else slow).write_to("s").build(),
            }}
            chans = {{c: LastValue(int) for c in ("a", "f", "s")}}
            return Pregel(nodes=nodes, channels=chans, input_channels="a",
                          output_channels=["f", "s"], step_timeout=1.0, checkpointer=s)

        async def amain():
            async with asaver() as s:
                g = graph(s)
                t = time.monotonic()
                try:
                    await g.ainvoke(1, CONFIG)
                except NodeTimeoutError as exc:
                    first = {{"kind": exc.kind, "seconds": time.monotonic() - t}}
                open(FLAG, "w").close()
                second = await g.ainvoke(None, CONFIG)
                return first, second

        if "{mode}" == "async":
            first, second = asyncio.run(amain())
        else:
            with saver() as s:
                g = graph(s)
                t = time.monotonic()
                try:
                    g.invoke(1, CONFIG)
                except NodeTimeoutError as exc:
                    first = {{"kind": exc.kind, "seconds": time.monotonic() - t}}
                open(FLAG, "w").close()
                second = g.invoke(None, CONFIG)
        report(first=first, second=second, runs=runs())
        """,
        tmp_path,
        db,
    )
    assert out["first"]["kind"] == "step" and out["first"]["seconds"] < LIMIT
    assert out["second"] == {"f": 2, "s": 11}
    assert out["runs"] == {"fast": 1, "slow": 2}


# tasks: @task(timeout=...)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_task_timeout_resume_reruns_only_the_timed_out_task(
    tmp_path: Path, db: str, mode: str
) -> None:
    out = run(
        f"""
        @task
        def a(x):
            log("a")
            return x + 1

        @task(timeout=0.5)
        def slow(x):
            log("slow")
            if hangs():
                time.sleep(60)
            return x * 10

        @task(timeout=0.5)
        async def aslow(x):
            log("slow")
            if hangs():
                await asyncio.sleep(60)
            return x * 10

        def make(s):
            if "{mode}" == "async":
                @entrypoint(checkpointer=s)
                async def wf(x):
                    return await aslow(await a(x))
            else:
                @entrypoint(checkpointer=s)
                def wf(x):
                    return slow(a(x).result()).result()
            return wf

        async def amain():
            async with asaver() as s:
                wf = make(s)
                t = time.monotonic()
                try:
                    await wf.ainvoke(1, CONFIG)
                except NodeTimeoutError as exc:
                    first = {{"node": exc.node, "timeout": exc.timeout,
                              "seconds": time.monotonic() - t}}
                open(FLAG, "w").close()
                return first, await wf.ainvoke(None, CONFIG)

        if "{mode}" == "async":
            first, second = asyncio.run(amain())
        else:
            with saver() as s:
                wf = make(s)
                t = time.monotonic()
                try:
                    wf.invoke(1, CONFIG)
                except NodeTimeoutError as exc:
                    first = {{"node": exc.node, "timeout": exc.timeout,
                              "seconds": time.monotonic() - t}}
                open(FLAG, "w").close()
                second = wf.invoke(None, CONFIG)
        report(first=first, second=second, runs=runs())
        """,
        tmp_path,
        db,
    )
    assert out["first"]["node"] in ("slow", "aslow") and out["first"]["timeout"] == 0.5
    assert 0.5 <= out["first"]["seconds"] < LIMIT
    assert out["second"] == 20
    assert out["runs"] == {"a": 1, "slow": 2}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_late_result_of_a_timed_out_task_is_never_written(
    tmp_path: Path, db: str, mode: str
) -> None:
    """The entrypoint survives its task's timeout and waits while the abandoned
    body finishes: the body's stream chunk and return value reach neither the
    stream, nor the saver, nor the cache (a later call runs the task afresh)."""
    out = run(
        f"""
        from pregelkit.cache.memory import InMemoryCache
        from pregelkit.types import CachePolicy

        @task(timeout=0.3, cache_policy=CachePolicy())
        def slow(x):
            log("slow")
            if hangs():
                time.sleep(1.0)
                get_stream_writer()("LATE-CHUNK")
                return "LATE-RESULT"
            return "FRESH"

        @task(timeout=0.3, cache_policy=CachePolicy())
        async def aslow(x):
            log("slow")
            if hangs():
                await asyncio.to_thread(time.sleep, 1.0)
                get_stream_writer()("LATE-CHUNK")
                return "LATE-RESULT"
            return "FRESH"

        cache = InMemoryCache()

        def make(s):
            if "{mode}" == "async":
                @entrypoint(checkpointer=s, cache=cache)
                async def wf(x):
                    try:
                        return await aslow(x)
                    except NodeTimeoutError:
                        await asyncio.sleep(2.0)
                        return "survived"
            else:
                @entrypoint(checkpointer=s, cache=cache)
                def wf(x):
                    try:
                        return slow(x).result()
                    except NodeTimeoutError:
                        time.sleep(2.0)
                        return "survived"
            return wf

        AGAIN = {{"configurable": {{"thread_id": THREAD + "-again"}}}}

        async def amain():
            async with asaver() as s:
                wf = make(s)
                chunks = [c async for c in wf.astream(1, CONFIG, stream_mode=["custom", "updates"])]
                await asyncio.sleep(1.0)
                open(FLAG, "w").close()
                again = await wf.ainvoke(1, AGAIN)
                return chunks, again, s

        if "{mode}" == "async":
            chunks, again, s = asyncio.run(amain())
            if DB == "memory":
                written = saved_writes(s)
            else:
                with saver() as s:
                    written = saved_writes(s)
        else:
            with saver() as s:
                wf = make(s)
                chunks = list(wf.stream(1, CONFIG, stream_mode=["custom", "updates"]))
                time.sleep(1.0)
                written = saved_writes(s)
                open(FLAG, "w").close()
                again = wf.invoke(1, AGAIN)
        report(chunks=repr(chunks), written=written, again=again, runs=runs())
        """,
        tmp_path,
        db,
    )
    assert "survived" in out["chunks"]
    assert "LATE" not in out["chunks"]
    assert out["written"] and not any("LATE" in w for w in out["written"])
    assert out["again"] == "FRESH"
    assert out["runs"] == {"slow": 2}


def test_caller_that_runs_a_deferred_call_itself_is_not_stuck_in_it(tmp_path: Path) -> None:
    """A chain of calls waited on at once: the caller would run each one itself;
    a timed call still hands back control at its deadline."""
    out = run(
        """
        @task(timeout=0.5)
        def hang(x):
            time.sleep(60)

        @entrypoint(checkpointer=InMemorySaver())
        def wf(x):
            return hang(x).result()

        report(**timed(lambda: wf.invoke(1, CONFIG)))
        """,
        tmp_path,
    )
    assert out["node"] == "hang" and out["seconds"] < LIMIT


def test_sync_task_in_an_async_run_does_not_hold_up_asyncio_run(tmp_path: Path) -> None:
    """A sync task of an async workflow runs off the event loop; if it hangs past
    its timeout, it must not sit on the loop's default executor, which
    ``asyncio.run`` waits for on exit."""
    out = run(
        """
        @task(timeout=0.5)
        def hang(x):
            time.sleep(60)

        @entrypoint(checkpointer=InMemorySaver())
        async def wf(x):
            return await hang(x)

        report(**atimed(wf.ainvoke(1, CONFIG)))
        """,
        tmp_path,
    )
    assert out["node"] == "hang" and out["seconds"] < LIMIT


def test_interrupt_inside_a_timed_task_resumes() -> None:
    from pregelkit.checkpoint.memory import InMemorySaver
    from pregelkit.types import Command, interrupt

    @task(timeout=30)
    def ask(question: str) -> str:
        answer: str = interrupt(question)
        return answer.upper()

    @entrypoint(checkpointer=InMemorySaver(), timeout=30)
    def wf(question: str) -> str:
        return ask(question).result()

    config = {"configurable": {"thread_id": "t"}}
    first = wf.invoke("name?", config)
    assert [i.value for i in first["__interrupt__"]] == ["name?"]
    assert wf.invoke(Command(resume="ada"), config) == "ADA"


# entrypoints and nodes


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_entrypoint_timeout_bounds_a_body_stuck_in_an_untimed_task(
    tmp_path: Path, mode: str
) -> None:
    """The entrypoint's body runs an untimed task inline (it waits on it at once)
    and that task hangs: the entrypoint's own timeout still hands back control."""
    out = run(
        f"""
        @task
        def hang(x):
            time.sleep(60)

        @task
        async def ahang(x):
            await asyncio.sleep(60)

        if "{mode}" == "async":
            @entrypoint(checkpointer=InMemorySaver(), timeout=TimeoutPolicy(run_timeout=0.5))
            async def wf(x):
                return await ahang(x)
            report(**atimed(wf.ainvoke(1, CONFIG)))
        else:
            @entrypoint(checkpointer=InMemorySaver(), timeout=0.5)
            def wf(x):
                return hang(x).result()
            report(**timed(lambda: wf.invoke(1, CONFIG)))
        """,
        tmp_path,
    )
    assert out["error"] == "NodeTimeoutError" and out["node"] == "wf" and out["kind"] == "run"
    assert 0.5 <= out["seconds"] < LIMIT


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("how", ["timeout", "set_timeout"])
def test_node_timeout(tmp_path: Path, mode: str, how: str) -> None:
    out = run(
        f"""
        def hang(x):
            time.sleep(60)
        async def ahang(x):
            await asyncio.sleep(60)
        fn = ahang if "{mode}" == "async" else hang
        node = NodeBuilder().subscribe_only("a").do(fn).write_to("b").{how}(0.5).build()
        ok = NodeBuilder().subscribe_only("a").do(lambda x: x).write_to("c").build()
        g = Pregel(nodes={{"stuck": node, "ok": ok}},
                   channels={{c: LastValue(int) for c in "abc"}},
                   input_channels="a", output_channels=["b", "c"])
        if "{mode}" == "async":
            report(**atimed(g.ainvoke(1)))
        else:
            report(**timed(lambda: g.invoke(1)))
        """,
        tmp_path,
    )
    assert out["node"] == "stuck" and out["kind"] == "run" and out["timeout"] == 0.5
    assert out["seconds"] < LIMIT


def test_subgraph_in_a_timed_out_node_saves_nothing_late(tmp_path: Path) -> None:
    """A node whose step is a subgraph times out; the subgraph runs on in the
    abandoned thread and finishes, but its late result is neither applied
    nor saved, in its own namespace or anywhere."""
    out = run(
        """
        def work(x):
            time.sleep(1.5)
            return "LATE"

        inner = Pregel(
            nodes={"work": NodeBuilder().subscribe_only("x").do(work).write_to("y").build()},
            channels={"x": LastValue(object), "y": LastValue(object)},
            input_channels="x", output_channels="y",
        )
        saver = InMemorySaver()
        outer = Pregel(
            nodes={"sub": NodeBuilder().subscribe_only("a").do(inner).write_to("b").timeout(0.5)
                   .build()},
            channels={"a": LastValue(object), "b": LastValue(object)},
            input_channels="a", output_channels="b", checkpointer=saver,
        )
        first = timed(lambda: outer.invoke("go", CONFIG))
        time.sleep(2.5)
        seen = [repr((t.checkpoint["channel_values"], t.pending_writes))
                for t in saver.list(None)]
        report(first=first, late=[s for s in seen if "LATE" in s], saved=len(seen))
        """,
        tmp_path,
    )
    assert out["first"]["node"] == "sub" and out["first"]["seconds"] < LIMIT
    assert out["saved"] > 0 and out["late"] == []


# idle_timeout


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("signal", "refresh_on", "survives"),
    [
        ("heartbeat", "auto", True),
        ("write", "auto", True),
        ("heartbeat", "heartbeat", True),
        ("write", "heartbeat", False),
        ("nothing", "auto", False),
    ],
)
def test_idle_timeout_restarts_on_progress(
    tmp_path: Path, mode: str, signal: str, refresh_on: str, survives: bool
) -> None:
    """Ten 0.2 s steps against an idle_timeout of 0.6 s: 2 s in all, so it
    finishes only if each step's signal restarts the clock."""
    out = run(
        f"""
        policy = TimeoutPolicy(idle_timeout=0.6, refresh_on="{refresh_on}")

        def signal():
            if "{signal}" == "heartbeat":
                get_runtime().heartbeat()
            elif "{signal}" == "write":
                get_stream_writer()("tick")

        @task(timeout=policy)
        def work(x):
            for _ in range(10):
                time.sleep(0.2)
                signal()
            return "done"

        @task(timeout=policy)
        async def awork(x):
            for _ in range(10):
                await asyncio.sleep(0.2)
                signal()
            return "done"

        if "{mode}" == "async":
            @entrypoint(checkpointer=InMemorySaver())
            async def wf(x):
                return await awork(x)
            report(**atimed(wf.ainvoke(1, CONFIG)))
        else:
            @entrypoint(checkpointer=InMemorySaver())
            def wf(x):
                return work(x).result()
            report(**timed(lambda: wf.invoke(1, CONFIG)))
        """,
        tmp_path,
    )
    if survives:
        assert out.get("result") == "done", out
    else:
        assert out["kind"] == "idle" and out["timeout"] == 0.6, out
        assert out["seconds"] < 1.9


# retries


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retry_on_timeout_is_opt_in(tmp_path: Path, mode: str) -> None:
    out = run(
        f"""
        def body():
            log("try")
            if runs()["try"] < 3:
                time.sleep(60)
            return "ok"

        async def abody():
            log("try")
            if runs()["try"] < 3:
                await asyncio.sleep(60)
            return "ok"

        def graph(policy):
            fn = lambda x: body()
            if "{mode}" == "async":
                async def fn(x):
                    return await abody()
            node = NodeBuilder().subscribe_only("a").do(fn).write_to("b").timeout(0.3)
            node = node.add_retry_policies(policy).build()
            return Pregel(nodes={{"n": node}}, channels={{c: LastValue(object) for c in "ab"}},
                          input_channels="a", output_channels="b")

        def go(g):
            if "{mode}" == "async":
                return atimed(g.ainvoke(1))
            return timed(lambda: g.invoke(1))

        fast = dict(initial_interval=0.01, jitter=False, max_attempts=3)
        default = go(graph(RetryPolicy(**fast)))
        default_runs = runs()["try"]
        opted = go(graph(RetryPolicy(retry_on=NodeTimeoutError, **fast)))
        report(default=default, default_runs=default_runs, opted=opted, runs=runs()["try"])
        """,
        tmp_path,
    )
    assert out["default"]["kind"] == "run" and out["default_runs"] == 1
    assert out["opted"]["result"] == "ok"
    assert out["runs"] == 3  # 1 (default, not retried) + 2: a timeout, then success


# the pool


def test_workers_stuck_in_abandoned_bodies_do_not_starve_the_pool(tmp_path: Path) -> None:
    """Two workers: one waits for the entrypoint's bounded body, the other runs
    an untimed call that hangs, abandoned by step_timeout. The next run still
    gets three calls running at once (they meet at a barrier: the caller runs
    one, two workers the others), one of them on the worker the pool added in
    place of the stuck one."""
    out = run(
        """
        import threading

        @task
        def hang(x):
            time.sleep(60)

        barrier = threading.Barrier(3, timeout=5)

        @task
        def meet(x):
            barrier.wait()
            return x

        @entrypoint(checkpointer=InMemorySaver())
        def stuck(n):
            calls = [hang(i) for i in range(n)]  # handed to the workers
            time.sleep(60)

        @entrypoint(checkpointer=InMemorySaver())
        def fine(n):
            return sum(f.result() for f in [meet(i) for i in range(n)])

        stuck.step_timeout = 0.5
        first = timed(lambda: stuck.invoke(4, CONFIG))
        try:
            second = timed(lambda: fine.invoke(3, CONFIG))
        except threading.BrokenBarrierError:
            second = "starved"
        report(first=first, second=second)
        """,
        tmp_path,
        env={"PREGELKIT_MAX_WORKERS": "2"},
    )
    assert out["first"]["kind"] == "step" and out["first"]["seconds"] < LIMIT
    assert out["second"] != "starved"
    assert out["second"]["result"] == 3 and out["second"]["seconds"] < LIMIT


# what a user may pass


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1, ValueError),
        (0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (timedelta(seconds=-2), ValueError),
        ("5", TypeError),
        (True, TypeError),
        ([1], TypeError),
    ],
)
def test_bad_timeouts_fail_at_decoration_naming_the_parameter(value: Any, error: type) -> None:
    with pytest.raises(error, match=r"@task\(timeout=\.\.\.\)"):
        task(timeout=value)
    with pytest.raises(error, match=r"@entrypoint\(timeout=\.\.\.\)"):
        entrypoint(timeout=value)
    with pytest.raises(error, match=r"NodeBuilder\.timeout"):
        NodeBuilder().timeout(value)
    with pytest.raises(error, match=r"NodeBuilder\.set_timeout"):
        NodeBuilder().set_timeout(value)
    with pytest.raises(error, match=r"TimeoutPolicy\.run_timeout"):
        TimeoutPolicy(run_timeout=value)
    with pytest.raises(error, match=r"TimeoutPolicy\.idle_timeout"):
        TimeoutPolicy(idle_timeout=value)


@pytest.mark.parametrize("value", [-1, 0, math.nan, "1", True])
def test_bad_step_timeout_fails_when_the_graph_is_built(value: Any) -> None:
    from pregelkit.channels.last_value import LastValue
    from pregelkit.pregel.main import Pregel

    node = NodeBuilder().subscribe_only("a").do(lambda x: x).write_to("b").build()
    with pytest.raises((ValueError, TypeError), match="step_timeout"):
        Pregel(
            nodes={"n": node},
            channels={"a": LastValue(int), "b": LastValue(int)},
            input_channels="a",
            output_channels="b",
            step_timeout=value,
        )


def test_timeout_policy_coercion() -> None:
    assert TimeoutPolicy.coerce(2) == TimeoutPolicy(run_timeout=2.0)
    assert TimeoutPolicy.coerce(timedelta(minutes=1)) == TimeoutPolicy(run_timeout=60.0)
    assert TimeoutPolicy.coerce(None) is None
    policy = TimeoutPolicy(idle_timeout=timedelta(seconds=5), refresh_on="heartbeat")
    assert policy.idle_timeout == 5.0 and policy.run_timeout is None
    with pytest.raises(ValueError, match="run_timeout or idle_timeout"):
        TimeoutPolicy()
    with pytest.raises(ValueError, match="refresh_on"):
        TimeoutPolicy(run_timeout=1, refresh_on="writes")  # type: ignore[arg-type]


def test_node_timeout_error_is_a_timeout_error_not_retried_by_default() -> None:
    import pickle

    exc = NodeTimeoutError("fetch", 1.25, kind="run", timeout=1.0, run_timeout=1.0)
    assert isinstance(exc, TimeoutError)
    assert not default_retry_on(exc)
    assert "'fetch'" in str(exc) and "1s" in str(exc)
    back = pickle.loads(pickle.dumps(exc))
    assert (back.node, back.kind, back.timeout, str(back)) == ("fetch", "run", 1.0, str(exc))
    assert RetryPolicy(retry_on=NodeTimeoutError).retry_on is NodeTimeoutError
