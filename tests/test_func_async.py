"""The functional API, async: ``async def`` entrypoints and tasks with
``ainvoke``/``astream``, sync tasks called from async entrypoints, against
every async saver (the ``async_saver`` fixture: memory, AsyncSqliteSaver,
AsyncPostgresSaver). Coroutines run on the session loop through ``arun``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pregelkit.cache.memory import InMemoryCache
from pregelkit.cache.sqlite import SqliteCache
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.config import get_config, get_store, get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.runtime import Runtime
from pregelkit.store.memory import InMemoryStore
from pregelkit.types import CachePolicy, Command, RetryPolicy, interrupt

Saver = BaseCheckpointSaver[Any]
Run = Callable[[Awaitable[Any]], Any]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def fast_retry(attempts: int, on: type[BaseException] = ValueError) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=0.001, backoff_factor=1.0, max_attempts=attempts, jitter=False, retry_on=on
    )


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [chunk async for chunk in stream]


def count_aput_writes(saver: Saver, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Task ids of every ``aput_writes`` call the engine makes on ``saver``."""
    calls: list[str] = []
    original = saver.aput_writes

    async def aput_writes(
        config: Any, writes: Any, task_id: str, task_path: str = "", **kwargs: Any
    ) -> None:
        calls.append(task_id)
        await original(config, writes, task_id, task_path, **kwargs)

    monkeypatch.setattr(saver, "aput_writes", aput_writes)
    return calls


# decoration


def test_async_task_keeps_name_doc_signature_and_coroutine_nature() -> None:
    async def fetch(url: str, *, retries: int = 2) -> bytes:
        """Fetches a URL."""
        return url.encode()

    wrapped = task(fetch)
    assert wrapped.__name__ == "fetch"
    assert wrapped.__doc__ == "Fetches a URL."
    assert inspect.signature(wrapped) == inspect.signature(fetch)
    assert inspect.iscoroutinefunction(wrapped)

    graph = entrypoint()(fetch)
    assert graph.name == "fetch" and graph.__doc__ == "Fetches a URL."


class AsyncScaler:
    def __init__(self, factor: int) -> None:
        self.factor = factor

    @task
    async def scale(self, x: int) -> int:
        await asyncio.sleep(0)
        return self.factor * x


def test_async_task_as_instance_method(async_saver: Saver, arun: Run) -> None:
    two = AsyncScaler(2)

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int) -> list[int]:
        return [await two.scale(x), await AsyncScaler(7).scale(x=x)]

    assert arun(workflow.ainvoke(3, cfg())) == [6, 21]
    assert list(inspect.signature(two.scale).parameters) == ["x"]


def test_async_task_called_outside_a_run_raises_clearly(arun: Run) -> None:
    @task
    async def lonely(x: int) -> int:
        return x

    async def main() -> None:
        with pytest.raises(RuntimeError, match="task 'lonely' was called outside"):
            lonely(1)

    arun(main())


def test_unserializable_return_names_task_and_type(async_saver: Saver, arun: Run) -> None:
    @task
    async def make_lock() -> Any:
        return threading.Lock()

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int) -> Any:
        return await make_lock()

    with pytest.raises(SerdeError) as caught:
        arun(workflow.ainvoke(1, cfg()))
    assert "task 'make_lock'" in str(caught.value)
    assert "_thread.lock" in str(caught.value)


# futures and composition


def test_task_calls_are_awaitable_and_gatherable(async_saver: Saver, arun: Run) -> None:
    kinds: list[bool] = []

    @task
    async def square(x: int) -> int:
        await asyncio.sleep(0)
        return x * x

    @task
    def cube(x: int) -> int:  # a sync task in an async entrypoint
        return x**3

    @entrypoint(checkpointer=async_saver)
    async def workflow(n: int) -> list[int]:
        squares = [square(i) for i in range(n)]
        cubed = cube(n)
        kinds.extend(inspect.isawaitable(f) for f in [*squares, cubed])
        return [*await asyncio.gather(*squares), await cubed]

    assert arun(workflow.ainvoke(4, cfg())) == [0, 1, 4, 9, 64]
    assert kinds == [True] * 5


def test_tasks_calling_tasks(async_saver: Saver, arun: Run) -> None:
    calls: Counter[str] = Counter()

    @task
    async def leaf(x: int) -> int:
        calls["leaf"] += 1
        return x + 1

    @task
    async def middle(x: int) -> int:
        calls["middle"] += 1
        a, b = await asyncio.gather(leaf(x), leaf(x + 10))
        return a * b

    @task
    def sync_middle(x: int) -> int:  # runs in a worker thread; its calls give it futures
        calls["sync_middle"] += 1
        return leaf(x).result() + 1000

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int) -> list[int]:
        return [await middle(x), await sync_middle(x)]

    assert arun(workflow.ainvoke(1, cfg())) == [2 * 12, 1002]
    assert calls == {"leaf": 3, "middle": 1, "sync_middle": 1}


def test_sync_entrypoint_runs_under_ainvoke(async_saver: Saver, arun: Run) -> None:
    @task
    def inc(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=async_saver)
    def workflow(x: int) -> int:
        return inc(x).result() * 3

    assert arun(workflow.ainvoke(1, cfg())) == 6
    assert arun(collect(workflow.astream(2, cfg("s")))) == [{"inc": 3}, {"workflow": 9}]


def test_async_entrypoint_inside_async_entrypoint(async_saver: Saver, arun: Run) -> None:
    @task
    async def double(x: int) -> int:
        return x * 2

    @entrypoint()
    async def child(x: int) -> int:
        return await double(x) + 1

    @entrypoint(checkpointer=async_saver)
    async def parent(x: int) -> int:
        return await child.ainvoke(x) * 10

    assert arun(parent.ainvoke(3, cfg("plain"))) == 70
    chunks = arun(collect(parent.astream(3, cfg("ns"), stream_mode="updates", subgraphs=True)))
    assert chunks[-1] == ((), {"parent": 70})
    assert [c[1] for c in chunks[:-1]] == [{"double": 6}, {"child": 7}]
    (ns,) = {c[0] for c in chunks[:-1]}
    assert len(ns) == 1 and ns[0].startswith("parent:")
    saved = arun(
        async_saver.aget_tuple({"configurable": {"thread_id": "ns", "checkpoint_ns": ns[0]}})
    )
    assert saved is not None and saved.checkpoint["channel_values"]["__end__"] == 7


def test_thousand_tasks_in_flight(async_saver: Saver, arun: Run) -> None:
    @task
    async def ident(i: int) -> int:
        return i

    @entrypoint(checkpointer=async_saver)
    async def fan_out(n: int) -> int:
        return sum(await asyncio.gather(*(ident(i) for i in range(n))))

    assert arun(fan_out.ainvoke(1000, cfg())) == sum(range(1000))


# the entrypoint is a Pregel


def test_ainvoke_astream_abatch_and_state(async_saver: Saver, arun: Run) -> None:
    @task
    async def inc(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int, *, previous: Any) -> int:
        return await inc(x) + (previous or 0)

    assert arun(workflow.ainvoke(1, cfg())) == 2
    assert arun(collect(workflow.astream(1, cfg()))) == [{"inc": 2}, {"workflow": 4}]
    assert arun(collect(workflow.astream(1, cfg("v"), stream_mode="values"))) == [2]
    assert arun(workflow.abatch([1, 2], [cfg("b1"), cfg("b2")])) == [2, 3]

    state = arun(workflow.aget_state(cfg()))
    assert state.values == 4 and state.next == ()

    async def history() -> list[Any]:
        return [s async for s in workflow.aget_state_history(cfg())]

    snapshots = arun(history())
    assert [s.values for s in snapshots] == [4, 2, 2, None]
    arun(workflow.aupdate_state(cfg(), 50))
    assert arun(workflow.aget_state(cfg())).values == 50
    assert arun(workflow.ainvoke(0, cfg())) == 51


def test_astream_updates_as_each_task_finishes(async_saver: Saver, arun: Run) -> None:
    async def main() -> list[Any]:
        consumer_saw_first = asyncio.Event()

        @task
        async def first(x: int) -> int:
            return x + 1

        @task
        def second(x: int) -> int:
            return x * 10

        @entrypoint(checkpointer=async_saver)
        async def workflow(x: int) -> int:
            a = await first(x)
            await asyncio.wait_for(consumer_saw_first.wait(), 10)
            return await second(a)

        received = []
        async for chunk in workflow.astream(1, cfg(), stream_mode="updates"):
            received.append(chunk)
            if chunk == {"first": 2}:
                consumer_saw_first.set()
        return received

    assert arun(asyncio.wait_for(main(), 15)) == [{"first": 2}, {"second": 20}, {"workflow": 20}]


def test_custom_stream(async_saver: Saver, arun: Run) -> None:
    @task
    async def step(x: int, writer: Any) -> int:
        writer({"task": x})
        return x + 1

    @task
    def sync_step(x: int) -> int:
        get_stream_writer()({"sync task": x})
        return x

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int, *, writer: Any) -> int:
        writer("start")
        y = await step(x)
        await sync_step(y)
        get_stream_writer()(f"end {y}")
        return y

    assert arun(collect(workflow.astream(1, cfg(), stream_mode="custom"))) == [
        "start",
        {"task": 1},
        {"sync task": 2},
        "end 2",
    ]


# injection


def test_previous_final_config_runtime_store(async_saver: Saver, arun: Run) -> None:
    store = InMemoryStore()
    got: dict[str, Any] = {}

    @task
    async def in_task(x: int, config: Any, runtime: Runtime[Any]) -> int:
        got["task_config"] = config
        got["task_runtime"] = runtime
        got["task_store"] = get_store()
        return x

    @entrypoint(checkpointer=async_saver, store=store)
    async def counter(x: int, *, previous: Any, config: Any, runtime: Runtime[Any]) -> Any:
        got["config"] = config
        got["runtime"] = runtime
        got["get_config"] = get_config()
        total = (previous or 0) + await in_task(x)
        await runtime.store.aput(("totals",), "last", {"total": total})
        return entrypoint.final(value=f"total {total}", save=total)

    assert arun(counter.ainvoke(1, cfg(), context={"k": "v"})) == "total 1"
    assert arun(counter.ainvoke(2, cfg())) == "total 3"
    assert got["runtime"].previous == 1
    assert got["runtime"].store is store and got["task_runtime"].store is store
    assert got["task_store"] is store
    assert got["config"]["configurable"]["thread_id"] == "t"
    assert got["get_config"]["configurable"]["thread_id"] == "t"
    assert got["task_config"]["configurable"]["checkpoint_ns"].startswith("in_task:")
    item = store.get(("totals",), "last")
    assert item is not None and item.value == {"total": 3}
    assert arun(counter.ainvoke(1, cfg(), context={"k": "w"})) == "total 4"
    assert got["runtime"].context == {"k": "w"}


def test_with_config_merges_with_the_call_config(arun: Run) -> None:
    # as LangGraph 1.2.22: tags concatenated (with_config's first, duplicates
    # kept), metadata and configurable merged (the later config wins), empty
    # or None tags/metadata add nothing, with_config calls chained merge too
    @entrypoint()
    async def wf(n: int) -> Any:
        c = get_config()
        md = {k: v for k, v in c["metadata"].items() if not k.startswith("langgraph_")}
        conf = {k: v for k, v in c["configurable"].items() if k in ("a", "b", "c")}
        return c.get("tags"), md, conf, c.get("recursion_limit")

    g = wf.with_config(tags=["wc"], metadata={"x": 2, "y": 1})
    call = {"tags": ["call"], "metadata": {"m": 1, "y": 3}}
    assert arun(g.ainvoke(1, call)) == (["wc", "call"], {"x": 2, "y": 3, "m": 1}, {}, None)
    assert arun(g.ainvoke(1, {"tags": ["wc", "b"]}))[0] == ["wc", "wc", "b"]
    assert arun(g.ainvoke(1, {"tags": [], "metadata": {}}))[:2] == (["wc"], {"x": 2, "y": 1})
    assert arun(g.ainvoke(1, {"tags": None, "metadata": None}))[:2] == (
        ["wc"],
        {"x": 2, "y": 1},
    )
    chained = wf.with_config(
        {"tags": ["a"], "configurable": {"a": 1, "c": 0}}, tags=["b"], recursion_limit=5
    ).with_config(tags=["c"], metadata={"m": 2}, configurable={"b": 2})
    assert arun(chained.ainvoke(1)) == (["a", "b", "c"], {"m": 2}, {"a": 1, "c": 0, "b": 2}, 5)
    assert arun(chained.ainvoke(1, {"configurable": {"c": 3}, "recursion_limit": 9})) == (
        ["a", "b", "c"],
        {"m": 2},
        {"a": 1, "c": 3, "b": 2},
        9,
    )


def test_explicit_argument_beats_injection(async_saver: Saver, arun: Run) -> None:
    @task
    async def echo(config: Any = None, *, previous: Any = "unset") -> Any:
        return [config if isinstance(config, str) else "injected", previous]

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int) -> Any:
        return [await echo("mine", previous="given"), await echo()]

    assert arun(workflow.ainvoke(0, cfg())) == [["mine", "given"], ["injected", None]]


# durable replay


def test_resume_replays_saved_tasks_without_running_or_saving_them(
    async_saver: Saver, arun: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: Counter[str] = Counter()
    task_ids: dict[str, str] = {}

    @task
    async def step(name: str) -> str:
        runs[name] += 1
        task_ids[name] = get_config()["configurable"]["__pregel_task_id"]
        return name.upper()

    @task
    def sync_step(name: str) -> str:
        runs[name] += 1
        task_ids[name] = get_config()["configurable"]["__pregel_task_id"]
        return name

    @entrypoint(checkpointer=async_saver)
    async def workflow(x: int) -> list[str]:
        a = await step("a")
        b, c = await asyncio.gather(step("b"), sync_step("c"))
        answer = interrupt("continue?")
        return [a, b, c, answer, await step("d")]

    puts = count_aput_writes(async_saver, monkeypatch)
    first = arun(workflow.ainvoke(1, cfg()))
    assert [i.value for i in first["__interrupt__"]] == ["continue?"]
    saved = {task_ids[n] for n in "abc"}
    assert saved <= set(puts) and len(puts) == 4

    puts.clear()
    assert arun(workflow.ainvoke(Command(resume="go"), cfg())) == ["A", "B", "c", "go", "D"]
    assert runs == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert not saved & set(puts), "a replayed task was written to the saver again"
    assert len(puts) == 3 and task_ids["d"] in puts


# interrupts


def test_interrupts_in_sequence(async_saver: Saver, arun: Run) -> None:
    @task
    async def upper(s: str) -> str:
        return s.upper()

    @entrypoint(checkpointer=async_saver)
    async def form(x: int) -> list[str]:
        first = await upper(interrupt("first?"))
        second = await upper(interrupt("second?"))
        return [first, second]

    result = arun(form.ainvoke(1, cfg()))
    asked = []
    for answer in ["a", "b"]:
        (pending,) = result["__interrupt__"]
        asked.append(pending.value)
        result = arun(form.ainvoke(Command(resume=answer), cfg()))
    assert asked == ["first?", "second?"]
    assert result == ["A", "B"]


def test_parallel_interrupts_in_async_and_sync_tasks(async_saver: Saver, arun: Run) -> None:
    runs: Counter[str] = Counter()

    @task
    async def ask(i: int) -> Any:
        runs[f"a{i}"] += 1
        return (i, interrupt(f"q{i}"))

    @task
    def sync_ask(i: int) -> Any:
        runs[f"s{i}"] += 1
        return (i, interrupt(f"s{i}"))

    @entrypoint(checkpointer=async_saver)
    async def survey(n: int) -> list[Any]:
        return list(await asyncio.gather(ask(0), sync_ask(1), ask(2)))

    result = arun(survey.ainvoke(3, cfg()))
    pending = result["__interrupt__"]
    assert sorted(i.value for i in pending) == ["q0", "q2", "s1"]
    ids = {i.value: i.id for i in pending}
    partial = arun(survey.ainvoke(Command(resume={ids["q0"]: "a", ids["s1"]: "b"}), cfg()))
    assert [i.value for i in partial["__interrupt__"]] == ["q2"]
    assert arun(survey.ainvoke(Command(resume="c"), cfg())) == [(0, "a"), (1, "b"), (2, "c")]
    assert runs == {"a0": 2, "s1": 2, "a2": 3}


# failures and retries


def test_failing_task_raises_at_await_and_the_caller_may_go_on(
    async_saver: Saver, arun: Run
) -> None:
    attempts: Counter[str] = Counter()

    @task(retry_policy=fast_retry(3))
    async def boom(x: int) -> int:
        attempts["boom"] += 1
        raise ValueError(f"bad {x}")

    @task(retry_policy=fast_retry(2))
    def sync_boom(x: int) -> int:
        attempts["sync_boom"] += 1
        raise ValueError(f"sync bad {x}")

    @entrypoint(checkpointer=async_saver)
    async def tolerant(x: int) -> list[str]:
        out = []
        for call in (boom, sync_boom):
            try:
                await call(x)
            except ValueError as exc:
                out.append(str(exc))
        return out

    assert arun(tolerant.ainvoke(1, cfg("t"))) == ["bad 1", "sync bad 1"]
    assert attempts == {"boom": 3, "sync_boom": 2}

    @entrypoint(checkpointer=async_saver)
    async def strict(x: int) -> int:
        return await boom(x)

    with pytest.raises(ValueError, match="bad 2"):
        arun(strict.ainvoke(2, cfg("s")))


def test_entrypoint_retry_policy(async_saver: Saver, arun: Run) -> None:
    attempts: list[int] = []

    @entrypoint(checkpointer=async_saver, retry_policy=fast_retry(3, OSError))
    async def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) < 3:
            raise OSError("transient")
        return x

    assert arun(flaky.ainvoke(4, cfg())) == 4
    assert attempts == [4, 4, 4]


# cache


def test_cached_tasks(async_saver: Saver, arun: Run, tmp_path: Path) -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy(ttl=120))
    async def slow_square(x: int) -> int:
        runs.append(x)
        return x * x

    for cache in (InMemoryCache(), SqliteCache(path=str(tmp_path / "cache.db"))):
        runs.clear()

        @entrypoint(checkpointer=async_saver, cache=cache)
        async def workflow(x: int) -> int:
            return await slow_square(x)

        assert arun(collect(workflow.astream(3, cfg("a")))) == [
            {"slow_square": 9},
            {"workflow": 9},
        ]
        assert arun(collect(workflow.astream(3, cfg("b")))) == [
            {"slow_square": 9, "__metadata__": {"cached": True}},
            {"workflow": 9},
        ]
        assert runs == [3]
        arun(slow_square.aclear_cache(cache))
        assert arun(workflow.ainvoke(3, cfg("c"))) == 9
        assert runs == [3, 3]
