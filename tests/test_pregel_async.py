"""The engine driven by ``ainvoke``/``astream``: async node functions, sync ones
(run in worker threads), and the async state API (``aget_state``,
``aget_state_history``, ``aupdate_state``)."""

from __future__ import annotations

import asyncio
import operator
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from pregelkit.channels import BinaryOperatorAggregate, LastValue, Topic
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_config, get_stream_writer
from pregelkit.errors import GraphRecursionError, InvalidUpdateError
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import Command, RetryPolicy, Send, StateSnapshot, interrupt

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def meta(snapshot: StateSnapshot) -> Any:
    assert snapshot.metadata is not None
    return snapshot.metadata["step"]


async def collect(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


def mixed_graph(calls: list[str], **kwargs: Any) -> Pregel:
    """a -> one (async) and two (sync) in parallel -> three (async) joins them."""

    async def one(v: str) -> str:
        calls.append("one")
        await asyncio.sleep(0.001)
        return v + "1"

    def two(v: str) -> str:
        calls.append("two")
        return v + "2"

    async def three(d: dict[str, str]) -> str:
        calls.append("three")
        get_stream_writer()(("three sees", sorted(d)))
        return d["b"] + d["c"]

    return Pregel(
        nodes={
            "one": NodeBuilder().subscribe_only("a").do(one).write_to("b"),
            "two": NodeBuilder().subscribe_only("a").do(two).write_to("c"),
            "three": NodeBuilder().subscribe_to("b", "c").do(three).write_to("d"),
        },
        channels={k: LastValue(str) for k in "abcd"},
        input_channels="a",
        output_channels=["b", "c", "d"],
        **kwargs,
    )


def test_ainvoke_runs_async_and_sync_nodes() -> None:
    calls: list[str] = []
    app = mixed_graph(calls)
    assert run(app.ainvoke("x")) == {"b": "x1", "c": "x2", "d": "x1x2"}
    assert sorted(calls[:2]) == ["one", "two"] and calls[2:] == ["three"]


def test_async_nodes_of_a_step_run_concurrently() -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    def waiter(name: str) -> Callable[[int], Awaitable[int]]:
        async def node(v: int) -> int:
            started.append(name)
            if len(started) == 2:
                both_started.set()
            # neither finishes before the other has started
            await asyncio.wait_for(both_started.wait(), 5)
            return v

        return node

    app = Pregel(
        nodes={
            "x": NodeBuilder().subscribe_only("a").do(waiter("x")).write_to("out"),
            "y": NodeBuilder().subscribe_only("a").do(waiter("y")).write_to("out"),
        },
        channels={"a": LastValue(int), "out": BinaryOperatorAggregate(int, operator.add)},
        input_channels="a",
        output_channels="out",
    )
    assert run(app.ainvoke(21)) == 42
    assert sorted(started) == ["x", "y"]


def test_astream_modes() -> None:
    app = mixed_graph([], checkpointer=InMemorySaver())
    chunks = run(collect(app.astream("y", cfg(), stream_mode=["updates", "custom", "values"])))
    updates = [c for m, c in chunks if m == "updates"]
    assert sorted(map(str, updates[:2])) == ["{'one': {'b': 'y1'}}", "{'two': {'c': 'y2'}}"]
    assert updates[2] == {"three": {"d": "y1y2"}}
    assert [c for m, c in chunks if m == "custom"] == [("three sees", ["b", "c"])]
    assert [c for m, c in chunks if m == "values"] == [
        {"a": "y", "b": "y1", "c": "y2"},
        {"a": "y", "b": "y1", "c": "y2", "d": "y1y2"},
    ]
    events = run(collect(app.astream("z", cfg("2"), stream_mode="checkpoints")))
    assert [e["next"] for e in events] == [["one", "two"], ["three"], []]


def test_sync_invoke_refuses_an_async_node() -> None:
    app = mixed_graph([])
    with pytest.raises(TypeError, match="'one' is an async function"):
        app.invoke("x")


def test_async_state_api() -> None:
    calls: list[str] = []
    app = mixed_graph(calls, checkpointer=InMemorySaver())

    async def scenario() -> None:
        assert await app.ainvoke("x", cfg()) == {"b": "x1", "c": "x2", "d": "x1x2"}
        state = await app.aget_state(cfg())
        assert state.values == {"a": "x", "b": "x1", "c": "x2", "d": "x1x2"}
        assert state.next == ()
        history = [h async for h in app.aget_state_history(cfg())]
        assert [meta(h) for h in history] == [1, 0, -1]
        assert [h.next for h in history] == [(), ("three",), ("one", "two")]
        limited = [h async for h in app.aget_state_history(cfg(), limit=1)]
        assert limited[0].config == history[0].config
        filtered = [h async for h in app.aget_state_history(cfg(), filter={"source": "input"})]
        assert [meta(h) for h in filtered] == [-1]
        before = [h async for h in app.aget_state_history(cfg(), before=history[0].config)]
        assert [meta(h) for h in before] == [0, -1]

        calls.clear()
        await app.aupdate_state(cfg(), "Z", as_node="two")
        assert (await app.aget_state(cfg())).next == ("three",)
        assert await app.ainvoke(None, cfg()) == {"b": "x1", "c": "Z", "d": "x1Z"}
        assert calls == ["three"]
        with pytest.raises(InvalidUpdateError, match="'zz'"):
            await app.aupdate_state(cfg(), {"zz": 1})

    run(scenario())


def test_async_fork_from_a_past_checkpoint_reruns_what_follows() -> None:
    calls: list[str] = []
    app = mixed_graph(calls, checkpointer=InMemorySaver())

    async def scenario() -> None:
        await app.ainvoke("x", cfg())
        history = [h async for h in app.aget_state_history(cfg())]
        step0 = next(h for h in history if meta(h) == 0)
        calls.clear()
        assert (await app.ainvoke(None, step0.config))["d"] == "x1x2"
        assert calls == ["three"]

    run(scenario())


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_async_durability_modes_end_in_the_same_state(durability: str) -> None:
    saver = InMemorySaver()
    app = mixed_graph([], checkpointer=saver)
    out = run(app.ainvoke("x", cfg(), durability=durability))
    assert out == {"b": "x1", "c": "x2", "d": "x1x2"}
    assert app.get_state(cfg()).values == {"a": "x", "b": "x1", "c": "x2", "d": "x1x2"}
    steps = [t.metadata["step"] for t in saver.list(cfg())]
    assert steps == ([1] if durability == "exit" else [1, 0, -1])


def test_async_interrupts_and_resume() -> None:
    async def ask(v: str) -> str:
        first = interrupt("first?")
        await asyncio.sleep(0)
        second = interrupt("second?")
        return f"{v}:{first}:{second}"

    def other(v: str) -> str:
        return "B:" + str(interrupt("other?"))

    app = Pregel(
        nodes={
            "ask": NodeBuilder().subscribe_only("a").do(ask).write_to("out"),
            "other": NodeBuilder().subscribe_only("a").do(other).write_to("out"),
        },
        channels={"a": LastValue(str), "out": Topic(str, accumulate=True)},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )

    async def scenario() -> None:
        first = (await app.ainvoke("x", cfg()))["__interrupt__"]
        ids = {i.value: i.id for i in first}
        assert set(ids) == {"first?", "other?"}
        with pytest.raises(ValueError, match="2 interrupts are pending"):
            await app.ainvoke(Command(resume="?"), cfg())
        second = await app.ainvoke(Command(resume={ids["first?"]: 1, ids["other?"]: "o"}), cfg())
        assert [i.value for i in second["__interrupt__"]] == ["second?"]
        assert (await app.aget_state(cfg())).next == ("ask",)
        assert await app.ainvoke(Command(resume=2), cfg()) == ["x:1:2", "B:o"]

    run(scenario())


def test_async_crash_recovery_does_not_rerun_finished_tasks() -> None:
    counts: Counter[str] = Counter()
    fail = {"on": True}
    ok_done = asyncio.Event()

    async def ok(v: str) -> str:
        counts["ok"] += 1
        ok_done.set()
        return v + "-ok"

    async def bad(v: str) -> str:
        counts["bad"] += 1
        await asyncio.wait_for(ok_done.wait(), 5)
        if fail["on"]:
            raise RuntimeError("crash")
        return v + "-bad"

    app = Pregel(
        nodes={
            "ok": NodeBuilder().subscribe_only("a").do(ok).write_to("c"),
            "bad": NodeBuilder().subscribe_only("a").do(bad).write_to("d"),
            "join": NodeBuilder()
            .subscribe_to("c", "d")
            .do(lambda d: d["c"] + d["d"])
            .write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "c", "d", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match="crash"):
            await app.ainvoke("x", cfg())
        state = await app.aget_state(cfg())
        assert state.next == ("bad",)
        fail["on"] = False
        assert await app.ainvoke(None, cfg()) == "x-okx-bad"

    run(scenario())
    assert counts == {"ok": 1, "bad": 2}


def test_async_send_fan_out() -> None:
    async def worker(i: int) -> int:
        await asyncio.sleep(0.001 * (5 - i))
        return i * i

    app = Pregel(
        nodes={
            "fan": NodeBuilder()
            .subscribe_only("n")
            .do(lambda n: [Send("worker", i) for i in range(n)]),
            "worker": NodeBuilder().do(worker).write_to("squares", total=lambda v: v),
        },
        channels={
            "n": LastValue(int),
            "squares": Topic(int, accumulate=True),
            "total": BinaryOperatorAggregate(int, operator.add),
        },
        input_channels="n",
        output_channels=["squares", "total"],
    )
    # workers finish in reverse order; the topic still follows the Send order
    assert run(app.ainvoke(5)) == {"squares": [0, 1, 4, 9, 16], "total": 30}


def test_async_subgraph_interrupt_and_resume() -> None:
    async def inner_ask(v: str) -> str:
        return v + str(interrupt("inner?"))

    inner = Pregel(
        nodes={
            "i1": NodeBuilder().subscribe_only("x").do(lambda v: v + "-i1").write_to("y"),
            "i2": NodeBuilder().subscribe_only("y").do(inner_ask).write_to("z"),
        },
        channels={"x": LastValue(str), "y": LastValue(str), "z": LastValue(str)},
        input_channels="x",
        output_channels="z",
    )
    app = Pregel(
        nodes={
            "sub": NodeBuilder().subscribe_only("a").do(inner).write_to("b"),
            "post": NodeBuilder().subscribe_only("b").do(lambda v: v + "-post").write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "b", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )

    async def scenario() -> None:
        chunks = await collect(app.astream("go", cfg(), stream_mode="updates", subgraphs=True))
        assert chunks[0][0][0].startswith("sub:")
        assert chunks[0][1] == {"i1": None}  # the child's output channel, z, as LangGraph
        assert chunks[-1][0] == () and "__interrupt__" in chunks[-1][1]
        assert (await app.aget_state(cfg())).next == ("sub",)
        assert await app.ainvoke(Command(resume="!"), cfg()) == "go-i1!-post"

    run(scenario())


def test_async_retry() -> None:
    attempts: list[int] = []

    async def flaky(v: int) -> int:
        attempts.append(v)
        if len(attempts) < 3:
            raise ConnectionError("flaky")
        return v + 1

    policy = RetryPolicy(initial_interval=0.0001, jitter=False, retry_on=ConnectionError)
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_only("a")
            .do(flaky)
            .write_to("b")
            .add_retry_policies(policy)
        },
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert run(app.ainvoke(1)) == 2
    assert attempts == [1, 1, 1]
    # without a policy the first failure is final, with the task named in a note
    attempts.clear()
    bare = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(flaky).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    with pytest.raises(ConnectionError) as info:
        run(bare.ainvoke(1))
    assert attempts == [1]
    assert info.value.__notes__[0].startswith("During task with name 'n'")


def test_async_recursion_limit_and_config() -> None:
    seen: list[str] = []

    async def loop(v: int) -> int:
        seen.append(get_config()["configurable"]["thread_id"])
        return v + 1

    app = Pregel(
        nodes={"loop": NodeBuilder().subscribe_only("a").do(loop).write_to("a")},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(GraphRecursionError):
        run(app.ainvoke(0, {**cfg("rl"), "recursion_limit": 3}))
    assert 3 <= len(seen) <= 4 and set(seen) == {"rl"}


def test_abatch_and_batch() -> None:
    app = mixed_graph([])
    assert run(app.abatch(["a", "b"])) == [
        {"b": "a1", "c": "a2", "d": "a1a2"},
        {"b": "b1", "c": "b2", "d": "b1b2"},
    ]
    sync_app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda v: v * 2).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert sync_app.batch([1, 2, 3]) == [2, 4, 6]
