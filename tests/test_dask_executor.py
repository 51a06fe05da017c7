"""Task and node bodies on a real Dask cluster (``DaskExecutor``).

One ``LocalCluster`` of two worker processes serves the module. Bodies log
``<tag> <pid>`` lines to a file (they run in other processes, so a list in
this one would see nothing); the driver's saver is wrapped to count what it
records per task, so "recorded once" is checked where it is decided.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") == "true":
    import distributed  # under CI a missing extra is a failure, not a skip
else:
    distributed = pytest.importorskip("distributed", reason="pip install 'pregelkit[dask]'")

from pregelkit.cache.memory import InMemoryCache
from pregelkit.channels import LastValue, Topic
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_config, get_store, get_stream_writer
from pregelkit.errors import InterruptNotPendingError, NodeTimeoutError
from pregelkit.executors.dask import DaskExecutor
from pregelkit.func import entrypoint, patched, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.runtime import get_runtime
from pregelkit.store.memory import InMemoryStore
from pregelkit.types import CachePolicy, Command, Interrupt, RetryPolicy, Send, interrupt

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def executor(client: Any) -> DaskExecutor:
    return DaskExecutor(client)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "bodies.log"


def note(log: str, line: str) -> None:
    """Append one line with one write: bodies in several processes share the file."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


class CountingSaver(InMemorySaver):
    """Counts the results recorded per task id (``__return__`` writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: Counter[str] = Counter()

    def put_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = "", **kw: Any
    ) -> None:
        self.returns[task_id] += sum(1 for chan, _ in writes if chan == "__return__")
        super().put_writes(config, writes, task_id, task_path, **kw)


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@task
def square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_fan_out_runs_on_the_workers(executor: DaskExecutor) -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def local(n: int) -> list[tuple[int, int]]:
        return [f.result() for f in [square(i) for i in range(n)]]

    assert {pid for _, pid in local.invoke(2, cfg("here"))} == {os.getpid()}
    flow = local.copy(executor=executor)
    out = flow.invoke(8, cfg("fan"))
    assert [v for v, _ in out] == [i * i for i in range(8)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids  # every body ran in a worker process
    assert pids <= set(executor.client.run(os.getpid).values())


def test_pregel_nodes_run_on_the_workers(executor: DaskExecutor) -> None:
    graph = Pregel(
        nodes={
            "a": NodeBuilder().subscribe_only("x").do(lambda v: (v + 1, os.getpid())).write_to("y"),
        },
        channels={"x": LastValue(int), "y": LastValue(Any)},
        input_channels="x",
        output_channels="y",
    ).copy(executor=executor)
    value, pid = graph.invoke(1)
    assert value == 2 and pid != os.getpid()


def test_sends_and_commands_come_back_from_remote_nodes(executor: DaskExecutor) -> None:
    graph = Pregel(
        nodes={
            "fan": NodeBuilder()
            .subscribe_only("n")
            .do(
                lambda n: Command(update={"note": "fanned"}, goto=[Send("w", i) for i in range(n)])
            ),
            "w": NodeBuilder().do(lambda i: (i * 10, os.getpid())).write_to("out"),
        },
        channels={"n": LastValue(int), "note": LastValue(str), "out": Topic(Any, accumulate=True)},
        input_channels="n",
        output_channels=["note", "out"],
        checkpointer=InMemorySaver(),
        executor=executor,
    )
    result = graph.invoke(4, cfg("sends"))
    assert result["note"] == "fanned"
    assert sorted(v for v, _ in result["out"]) == [0, 10, 20, 30]
    assert os.getpid() not in {pid for _, pid in result["out"]}


def test_interrupt_and_resume(executor: DaskExecutor, log: Path) -> None:
    path = str(log)

    @task
    def approve(item: str) -> str:
        note(path, f"approve {item}")
        first = interrupt(f"approve {item}?")
        second = interrupt("sure?")
        return f"{item}:{first}:{second}"

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(items: list[str]) -> list[str]:
        return [f.result() for f in [approve(i) for i in items]]

    config = cfg("hitl")
    flow.invoke(["a"], config)
    (first,) = flow.get_state(config).interrupts
    assert first.value == "approve a?"
    flow.invoke(Command(resume="yes"), config)
    (pending,) = flow.get_state(config).interrupts
    assert pending.value == "sure?" and pending.id != first.id
    with pytest.raises(InterruptNotPendingError):  # the first answer, re-sent
        flow.invoke(Command(resume={first.id: "yes"}), config)
    # the body's second interrupt() takes the answer mapped to its own id
    assert flow.invoke(Command(resume={pending.id: "really"}), config) == ["a:yes:really"]
    assert lines(log) == ["approve a"] * 3


def test_a_thread_saved_when_a_tasks_calls_shared_an_id_is_answered_remotely(
    executor: DaskExecutor,
) -> None:
    """A thread saved before each interrupt() call had its own id waits at
    its task's second question under the first's id; a remote body takes the
    answer mapped to it, as a local one does."""

    @task
    def approve(item: str) -> str:
        return f"{item}:{interrupt(f'approve {item}?')}:{interrupt('sure?')}"

    saver = InMemorySaver()

    @entrypoint(checkpointer=saver, executor=executor)
    def flow(items: list[str]) -> list[str]:
        return [f.result() for f in [approve(i) for i in items]]

    config = cfg("legacy")
    (first,) = flow.invoke(["a"], config)["__interrupt__"]
    flow.invoke(Command(resume="yes"), config)
    saved = saver.get_tuple(config)
    assert saved is not None and saved.pending_writes is not None
    waiting = [t for t, c, _ in saved.pending_writes if c == "__interrupt__"]
    assert len(waiting) == 2  # the task, and the entrypoint waiting on its result
    for tid in waiting:  # as the old code saved them: under the first question's id
        saver.put_writes(saved.config, [("__interrupt__", [Interrupt("sure?", first.id)])], tid)
    assert [i.id for i in flow.get_state(config).interrupts] == [first.id]
    assert flow.invoke(Command(resume={first.id: "really"}), config) == ["a:yes:really"]


def test_custom_stream_runtime_and_config(executor: DaskExecutor) -> None:
    @task
    def talk(n: int) -> str:
        write = get_stream_writer()
        for i in range(n):
            write({"chunk": i})
        runtime = get_runtime()
        runtime.stream_writer({"context": runtime.context, "previous": runtime.previous})
        return str(get_config()["configurable"]["thread_id"])

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(n: int, previous: Any = None) -> str:
        return talk(n).result()

    config = cfg("talk")
    flow.invoke(0, config, context={"user": "u1"})
    chunks = list(flow.stream(3, config, stream_mode="custom", context={"user": "u2"}))
    assert chunks == [
        {"chunk": 0},
        {"chunk": 1},
        {"chunk": 2},
        {"context": {"user": "u2"}, "previous": "talk"},
    ]


def test_retries_each_attempt_on_the_cluster(executor: DaskExecutor, log: Path) -> None:
    path = str(log)

    @task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False))
    def flaky(x: int) -> int:
        note(path, "attempt")
        if len(lines(Path(path))) < 3:
            raise ConnectionError("not yet")
        return x + 1

    saver = CountingSaver()

    @entrypoint(checkpointer=saver, executor=executor)
    def flow(x: int) -> int:
        return flaky(x).result()

    assert flow.invoke(1, cfg("retry")) == 2
    assert lines(log) == ["attempt"] * 3
    assert sorted((+saver.returns).values()) == [1]


def test_failure_comes_back_with_the_remote_traceback(executor: DaskExecutor) -> None:
    @task
    def broken(x: int) -> int:
        raise ValueError(f"bad {x}")

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(x: int) -> int:
        return broken(x).result()

    with pytest.raises(ValueError, match="bad 3") as info:
        flow.invoke(3, cfg("fail"))
    assert any("raised on a remote worker" in n for n in info.value.__notes__)


def test_cache_serves_a_second_run_without_the_cluster(executor: DaskExecutor, log: Path) -> None:
    path = str(log)

    @task(cache_policy=CachePolicy())
    def slow(x: int) -> int:
        note(path, f"slow {x}")
        return x * 3

    @entrypoint(checkpointer=InMemorySaver(), cache=InMemoryCache(), executor=executor)
    def flow(x: int) -> int:
        return slow(x).result() + slow(x + 1).result()

    assert flow.invoke(1, cfg("c1")) == 9
    assert flow.invoke(1, cfg("c2")) == 9
    assert sorted(lines(log)) == ["slow 1", "slow 2"]


def test_worker_killed_mid_task_runs_again_and_is_recorded_once(
    executor: DaskExecutor, log: Path, tmp_path: Path
) -> None:
    path, marker = str(log), str(tmp_path / "died-once")

    @task
    def fragile(x: int) -> int:
        note(path, f"start {x}")
        if x == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies with the body half done
        return x * 100

    saver = CountingSaver()

    @entrypoint(checkpointer=saver, executor=executor)
    def flow(n: int) -> list[int]:
        return [f.result() for f in [fragile(i) for i in range(n)]]

    assert flow.invoke(4, cfg("kill"), durability="sync") == [0, 100, 200, 300]
    started = Counter(lines(log))
    # the lost body ran again elsewhere; so may a finished body whose result was
    # still on the dead worker (the scheduler recomputes lost results)
    assert started["start 2"] >= 2
    assert all(started[f"start {i}"] >= 1 for i in (0, 1, 3)), started
    assert sorted((+saver.returns).values()) == [1, 1, 1, 1]  # each result recorded once


def test_driver_crash_resumes_without_rerunning_saved_bodies(
    client: Any, tmp_path: Path, log: Path
) -> None:
    from dask_driver_workflow import build
    from pregelkit.checkpoint.sqlite import SqliteSaver

    db = str(tmp_path / "runs.sqlite")
    script = str(HERE / "dask_driver_workflow.py")
    args = ["--scheduler", client.scheduler.address, "--db", db, "--thread", "t", "--log", str(log)]
    crashed = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=120
    )
    assert crashed.returncode == 9, crashed.stderr
    assert sorted(lines(log)) == ["leaf 0", "leaf 1", "leaf 2"]
    with SqliteSaver.from_conn_string(db) as saver:  # a new driver takes the thread over
        flow = build(client, saver, str(log), crash=False)
        assert flow.invoke(None, cfg("t")) == 30
    assert sorted(lines(log)) == ["leaf 0", "leaf 1", "leaf 2", "total"]


def test_async_entrypoint(executor: DaskExecutor) -> None:
    @task
    async def cube(x: int) -> tuple[int, int]:
        await asyncio.sleep(0)
        return x**3, os.getpid()

    @task
    async def gate(x: int) -> int:
        return int(interrupt("go?")) + x

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    async def flow(n: int) -> list[int]:
        cubes = await asyncio.gather(*(cube(i) for i in range(n)), square(n))
        assert all(pid != os.getpid() for _, pid in cubes)
        return [v for v, _ in cubes] + [await gate(1)]

    async def run() -> list[int]:
        config = cfg("async")
        await flow.ainvoke(3, config)
        result: list[int] = await flow.ainvoke(Command(resume="41"), config)
        return result

    assert asyncio.run(run()) == [0, 1, 8, 9, 42]


def test_unpicklable_node_is_refused_when_the_graph_is_built(executor: DaskExecutor) -> None:
    lock = threading.Lock()

    def guarded(v: int) -> int:
        with lock:
            return v

    builder = NodeBuilder().subscribe_only("x").do(guarded).write_to("y")
    unsendable = "task 'guarded' cannot be sent to the remote executor"
    spec: dict[str, Any] = {
        "nodes": {"guarded": builder},
        "channels": {"x": LastValue(int), "y": LastValue(int)},
        "input_channels": "x",
        "output_channels": "y",
    }
    with pytest.raises(TypeError, match=unsendable):
        Pregel(**spec, executor=executor)
    local = Pregel(**spec)
    assert local.invoke(3) == 3
    with pytest.raises(TypeError, match=unsendable):
        local.copy(executor=executor)


def test_unpicklable_argument_is_refused_before_the_body_runs(
    executor: DaskExecutor, log: Path
) -> None:
    path = str(log)

    @task
    def uses(thing: Any) -> str:
        note(path, "ran")
        return "ran"

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(_: int) -> str:
        return uses(threading.Lock()).result()

    with pytest.raises(TypeError, match="task 'uses' cannot be sent to the remote executor"):
        flow.invoke(1, cfg("lock"))
    assert lines(log) == []


def test_what_a_remote_body_cannot_reach_is_explained(executor: DaskExecutor) -> None:
    @task
    def inner(x: int) -> int:
        return x

    @task
    def calls_a_task(x: int) -> int:
        return int(inner(x).result())

    @task
    def reads_the_store(x: int) -> Any:
        return get_store().get(("ns",), "k")

    @task
    def checks_a_patch(x: int) -> bool:
        return patched("new-way")

    @entrypoint(checkpointer=InMemorySaver(), store=InMemoryStore(), executor=executor)
    def flow(which: str) -> Any:
        body = {"call": calls_a_task, "store": reads_the_store, "patch": checks_a_patch}[which]
        return body(1).result()

    with pytest.raises(RuntimeError, match="task calls need the driver's loop"):
        flow.invoke("call", cfg("call"))
    with pytest.raises(RuntimeError, match="the store is not reachable"):
        flow.invoke("store", cfg("store"))
    with pytest.raises(RuntimeError, match=r"patched\('new-way'\) was called in a body running"):
        flow.invoke("patch", cfg("patch"))


def test_wrong_executors_are_refused(client: Any) -> None:
    with pytest.raises(TypeError, match=r"takes a distributed.Client"):
        DaskExecutor("tcp://127.0.0.1:8786")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no submit method"):
        entrypoint(executor=client.scheduler.address)(lambda x: x)

    async def with_an_async_client() -> None:
        async with distributed.Client(client.scheduler.address, asynchronous=True) as aclient:
            with pytest.raises(TypeError, match=r"needs a synchronous distributed\.Client"):
                DaskExecutor(aclient)

    asyncio.run(with_an_async_client())


def test_import_pregelkit_does_not_import_dask() -> None:
    code = (
        "import sys, pregelkit, pregelkit.func, pregelkit.pregel\n"
        "bad = [m for m in ('dask', 'distributed') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_timeout_stops_waiting_for_a_remote_body(executor: DaskExecutor) -> None:
    @task(timeout=0.5)
    def sleepy(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(seconds: float) -> float:
        return sleepy(seconds).result()

    started = time.monotonic()
    with pytest.raises(NodeTimeoutError):
        flow.invoke(2.0, cfg("slow"))
    assert time.monotonic() - started < 1.9  # the driver did not wait for the body


def test_unpicklable_result_is_explained(executor: DaskExecutor) -> None:
    @task
    def makes_a_lock(_: int) -> Any:
        return threading.Lock()

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(x: int) -> Any:
        return makes_a_lock(x).result()

    with pytest.raises(TypeError, match="'makes_a_lock' ran on a remote worker, but its result"):
        flow.invoke(1, cfg("lockout"))


def test_module_missing_on_the_workers_is_explained(
    executor: DaskExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "only_on_the_driver.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers' sys.path was set when they started
    from only_on_the_driver import double  # type: ignore[import-not-found]

    doubled = task(double)

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(x: int) -> int:
        return int(doubled(x).result())

    with pytest.raises(
        RuntimeError, match=r"could not be loaded on the worker.*only_on_the_driver"
    ):
        flow.invoke(1, cfg("missing"))


def test_one_resume_value_answers_one_interrupt(executor: DaskExecutor, tmp_path: Path) -> None:
    marker = tmp_path / "ask-b-too"

    @task
    def ask(name: str) -> str:
        return f"{name}={interrupt(f'{name}?')}"

    @entrypoint(checkpointer=InMemorySaver(), executor=executor)
    def flow(_: int) -> list[str]:
        futures = [ask("a")]
        if marker.exists():  # from the resume on, a second body asks at the same time
            futures.append(ask("b"))
        return [f.result() for f in futures]

    config = cfg("one-value")
    flow.invoke(1, config)
    marker.touch()
    flow.invoke(Command(resume="yes"), config)
    # both bodies were shipped with the value; the first back took it, the other
    # ran again without it and asks, as it would have locally
    (pending,) = flow.get_state(config).interrupts
    assert pending.value in ("a?", "b?")
    result = flow.invoke(Command(resume="no"), config)
    assert sorted(result) == sorted(
        ["a=yes", "b=no"] if pending.value == "b?" else ["a=no", "b=yes"]
    )
