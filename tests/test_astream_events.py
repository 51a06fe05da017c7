"""``astream_events(version="v2")``: LangChain's event dicts for a run, as
LangGraph 1.2.22 yields them (the sequences asserted here were recorded by
running LangGraph on the same graphs)."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from pregelkit.channels import EphemeralValue, LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.runtime import Runtime
from pregelkit.store.base import BaseStore
from pregelkit.store.memory import InMemoryStore
from pregelkit.types import Command, StreamWriter, interrupt

T = TypeVar("T")
Run = Callable[[Awaitable[T]], T]


async def collect(stream: Any) -> list[dict[str, Any]]:
    return [event async for event in stream]


def shape(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["event"], e["name"]) for e in events]


@task
async def double(x: int) -> int:
    return x * 2


@task
def add_one(x: int) -> int:
    return x + 1


def test_entrypoint_with_tasks(arun: Run[Any]) -> None:
    @entrypoint(checkpointer=InMemorySaver())
    async def wf(n: int) -> dict[str, int]:
        a = await double(n)
        b = await add_one(a)
        return {"a": a, "b": b}

    events = arun(collect(wf.astream_events(3, {"configurable": {"thread_id": "t1"}})))
    assert shape(events) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_start", "double"),
        ("on_chain_stream", "double"),
        ("on_chain_end", "double"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_start", "add_one"),
        ("on_chain_stream", "add_one"),
        ("on_chain_end", "add_one"),
        ("on_chain_stream", "wf"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "wf"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph"),
    ]
    assert [e["data"] for e in events] == [
        {"input": 3},
        {"input": 3},
        {"input": {"x": 3}},
        {"chunk": 6},
        {"output": 6, "input": {"x": 3}},
        {"chunk": {"double": 6}},
        {"input": {"x": 6}},
        {"chunk": 7},
        {"output": 7, "input": {"x": 6}},
        {"chunk": {"a": 6, "b": 7}},
        {"chunk": {"add_one": 7}},
        {"output": {"a": 6, "b": 7}, "input": 3},
        {"chunk": {"wf": {"a": 6, "b": 7}}},
        {"output": {"a": 6, "b": 7}},
    ]
    root, node, first = events[0], events[1], events[2]
    for e in events:
        uuid.UUID(e["run_id"])
    assert root["parent_ids"] == [] and root["tags"] == []
    assert root["metadata"] == {"thread_id": "t1", "ls_integration": "langgraph"}
    assert node["parent_ids"] == [root["run_id"]]
    assert node["tags"] == ["graph:step:0"]
    ns = node["metadata"]["langgraph_checkpoint_ns"]
    assert ns.startswith("wf:")
    assert node["metadata"] == {
        "thread_id": "t1",
        "ls_integration": "langgraph",
        "langgraph_step": 0,
        "langgraph_node": "wf",
        "langgraph_triggers": ("__start__",),
        "langgraph_path": ("__pregel_pull", "wf"),
        "langgraph_checkpoint_ns": ns,
    }
    assert first["parent_ids"] == [root["run_id"], node["run_id"]]
    assert first["tags"] == ["seq:step:1"]
    assert first["metadata"]["langgraph_triggers"] == ("__pregel_push",)
    assert first["metadata"]["langgraph_path"] == (
        "__pregel_push",
        ("__pregel_pull", "wf"),
        0,
        True,
    )
    assert first["metadata"]["langgraph_checkpoint_ns"].startswith(ns + "|double:")
    assert events[6]["metadata"]["langgraph_path"][2] == 1  # the second call
    # one run id per run, shared by its events
    assert {e["run_id"] for e in events if e["name"] == "double"} == {first["run_id"]}


def test_task_error_is_caught_by_the_workflow_and_reruns_count_steps(arun: Run[Any]) -> None:
    """LangGraph's test_imp_exception: a failed task has a start and no end;
    a later run on the thread has later steps."""

    @task
    async def fails(number: int) -> int:
        raise ValueError("task failed")

    @entrypoint(checkpointer=InMemorySaver())
    async def wf(number: int) -> str:
        await double(number)
        try:
            await fails(number)
        except ValueError:
            pass
        await double(number)
        return "done"

    config = {"configurable": {"thread_id": "1"}}
    assert arun(wf.ainvoke(1, config)) == "done"
    events = arun(collect(wf.astream_events(1, config)))
    assert shape(events) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_start", "double"),
        ("on_chain_stream", "double"),
        ("on_chain_end", "double"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_start", "fails"),
        ("on_chain_start", "double"),
        ("on_chain_stream", "double"),
        ("on_chain_end", "double"),
        ("on_chain_stream", "wf"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "wf"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph"),
    ]
    failed = events[6]
    assert failed["data"] == {"input": {"number": 1}}
    assert failed["metadata"]["langgraph_step"] == 2  # the second run's step
    assert events[1]["tags"] == ["graph:step:2"]


def test_unhandled_task_error_propagates_after_the_starts(arun: Run[Any]) -> None:
    @task
    async def boom(x: int) -> int:
        raise ValueError("boom!")

    @entrypoint()
    async def wf(n: int) -> int:
        return await boom(n)

    seen: list[dict[str, Any]] = []

    async def main() -> None:
        async for event in wf.astream_events(3):
            seen.append(event)

    with pytest.raises(ValueError, match="boom!"):
        arun(main())
    assert shape(seen) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_start", "boom"),
    ]
    assert seen[2]["data"] == {"input": {"x": 3}}


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
def test_graph_chunks_after_a_task_are_not_held_while_the_caller_goes_on(
    is_async: bool, arun: Run[Any]
) -> None:
    # LangGraph yields each chunk as it comes: the task's update at once, each
    # progress write when it is made, not all of them when the run ends
    def progress(i: int) -> None:
        get_stream_writer()({"progress": i, "at": time.monotonic()})

    if is_async:

        @entrypoint()
        async def wf(n: int) -> int:
            a = await double(n)
            for i in range(3):
                progress(i)
                await asyncio.sleep(0.2)
            return a

    else:

        @entrypoint()
        def wf(n: int) -> int:
            a = add_one(n).result()
            for i in range(3):
                progress(i)
                time.sleep(0.2)
            return a

    async def main() -> list[tuple[float, Any]]:
        return [
            (time.monotonic(), e["data"]["chunk"])
            async for e in wf.astream_events(1, stream_mode=["updates", "custom"])
            if e["name"] == "LangGraph" and e["event"] == "on_chain_stream"
        ]

    got = arun(main())
    assert [c for _, c in got][:1] == [("updates", {"double" if is_async else "add_one": 2})]
    writes = [(seen, c[1]) for seen, c in got if c[0] == "custom"]
    assert [c["progress"] for _, c in writes] == [0, 1, 2]
    # the update came before the second write was made, each write soon after it was made
    assert got[0][0] < writes[1][1]["at"]
    assert all(seen - c["at"] < 0.15 for seen, c in writes), writes


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
def test_a_held_graph_chunk_comes_before_the_error(is_async: bool, arun: Run[Any]) -> None:
    if is_async:

        @entrypoint()
        async def wf(n: int) -> int:
            a = await double(n)
            raise ValueError(f"after task {a}")

    else:

        @entrypoint()
        def wf(n: int) -> int:
            a = add_one(n).result()
            raise ValueError(f"after task {a}")

    seen: list[dict[str, Any]] = []

    async def main() -> None:
        async for event in wf.astream_events(1):
            seen.append(event)

    with pytest.raises(ValueError, match="after task 2"):
        arun(main())
    name = "double" if is_async else "add_one"
    assert shape(seen) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_start", name),
        ("on_chain_stream", name),
        ("on_chain_end", name),
        ("on_chain_stream", "LangGraph"),
    ]
    assert seen[-1]["data"] == {"chunk": {name: 2}}


def test_interrupt_and_resume(arun: Run[Any]) -> None:
    @entrypoint(checkpointer=InMemorySaver())
    async def wf(n: int) -> int:
        a = await double(n)
        answer: int = interrupt("what?")
        return a + answer

    config = {"configurable": {"thread_id": "x"}}
    events = arun(collect(wf.astream_events(3, config)))
    assert shape(events) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_start", "double"),
        ("on_chain_stream", "double"),
        ("on_chain_end", "double"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph"),
    ]
    (pending,) = events[6]["data"]["chunk"]["__interrupt__"]
    assert pending.value == "what?"
    assert events[-1]["data"] == {"output": None}
    # resuming: the task's result is replayed (no events), the body ends
    events = arun(collect(wf.astream_events(Command(resume=10), config)))
    assert shape(events) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "wf"),
        ("on_chain_stream", "wf"),
        ("on_chain_end", "wf"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph"),
    ]
    assert events[1]["data"] == {"input": 3}
    assert events[3]["data"] == {"output": 16, "input": 3}


def test_task_arguments_by_parameter_name(arun: Run[Any]) -> None:
    @task
    async def two(a: int, b: int = 5, *rest: int, **kw: int) -> int:
        return a + b

    @entrypoint()
    async def wf(n: int) -> int:
        return await two(n, 2, 9, z=1) + await two(n)

    events = arun(collect(wf.astream_events(3)))
    starts = [e["data"] for e in events if e["event"] == "on_chain_start" and e["name"] == "two"]
    assert starts == [
        {"input": {"a": 3, "b": 2, "rest": (9,), "z": 1}},
        {"input": {"a": 3, "b": 5, "rest": ()}},
    ]


def test_task_arguments_leave_out_injected_parameters(arun: Run[Any]) -> None:
    # as LangGraph shows them: an injected parameter not passed is left out,
    # unless it has a default (then shown with it)
    @task
    async def with_writer(x: int, writer: StreamWriter) -> int:
        return x

    @task
    async def with_config(x: int, config: Any) -> int:
        return x

    @task
    async def with_store(x: int, *, store: BaseStore) -> int:
        return x

    @task
    async def with_runtime(x: int, runtime: Runtime[Any]) -> int:
        return x

    @task
    def with_defaults(x: int, y: int = 3, writer: StreamWriter | None = None) -> int:
        return x

    @task
    async def with_kwargs(x: int, writer: StreamWriter, **kw: int) -> int:
        return x

    @entrypoint(store=InMemoryStore())
    async def wf(n: int) -> list[int]:
        return [
            await with_writer(n),
            await with_config(n),
            await with_store(n),
            await with_runtime(n),
            await with_defaults(n),
            await with_kwargs(n, z=4),
        ]

    events = arun(collect(wf.astream_events(1)))
    starts = [
        (e["name"], e["data"])
        for e in events
        if e["event"] == "on_chain_start" and e["name"].startswith("with_")
    ]
    assert starts == [
        ("with_writer", {"input": {"x": 1}}),
        ("with_config", {"input": {"x": 1}}),
        ("with_store", {"input": {"x": 1}}),
        ("with_runtime", {"input": {"x": 1}}),
        ("with_defaults", {"input": {"x": 1, "y": 3, "writer": None}}),
        ("with_kwargs", {"input": {"x": 1, "z": 4}}),
    ]


def _pregel() -> Pregel:
    def plus(x: int) -> int:
        return x + 1

    inc = NodeBuilder().subscribe_only("a").do(plus).write_to("b").meta("mine", k=2)
    mul = NodeBuilder().subscribe_only("b").do(lambda x: x * 10).write_to("c")
    return Pregel(
        nodes={"inc": inc, "mul": mul},
        channels={"a": EphemeralValue(int), "b": EphemeralValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels="c",
    )


def test_pregel_graph_nodes_and_steps(arun: Run[Any]) -> None:
    app = _pregel()
    events = arun(collect(app.astream_events(1, stream_mode="updates")))
    assert shape(events) == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "inc"),
        ("on_chain_start", "plus"),
        ("on_chain_end", "plus"),
        ("on_chain_stream", "inc"),
        ("on_chain_end", "inc"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_start", "mul"),
        ("on_chain_start", "Unnamed"),
        ("on_chain_end", "Unnamed"),
        ("on_chain_stream", "mul"),
        ("on_chain_end", "mul"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph"),
    ]
    root, inc, plus = events[0], events[1], events[2]
    assert inc["tags"] == ["graph:step:0", "mine"]
    assert inc["metadata"]["k"] == 2 and inc["metadata"]["langgraph_triggers"] == ("a",)
    assert plus["tags"] == ["seq:step:1", "mine"]
    assert plus["parent_ids"] == [root["run_id"], inc["run_id"]]
    assert events[3]["data"] == {"output": 2, "input": 1}
    assert events[5]["data"] == {"output": 2, "input": 1}
    assert events[6]["data"] == {"chunk": {"inc": {"b": 2}}}
    assert events[7]["tags"] == ["graph:step:1"]
    assert events[7]["metadata"]["langgraph_step"] == 1
    assert events[11]["data"] == {"output": 20, "input": 2}
    # the root's output: what its stream channels hold at the end
    assert events[-1]["data"] == {"output": {"c": 20}}


def test_step_names(arun: Run[Any]) -> None:
    # as LangGraph 1.2.22 names them: a step's __name__, "Unnamed" for a
    # lambda, a functools.partial or a callable object
    class Mul:
        def __call__(self, x: int) -> int:
            return x * 2

        def method(self, x: int) -> int:
            return x + 1

    def add(x: int, k: int) -> int:
        return x + k

    node = (
        NodeBuilder()
        .subscribe_only("a")
        .do(functools.partial(add, k=5))
        .do(Mul())
        .do(Mul().method)
        .do(abs)
        .do(lambda x: x)
        .write_to("b")
    )
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    events = arun(collect(app.astream_events(1)))
    assert [e["name"] for e in events if e["event"] == "on_chain_start"][2:] == [
        "Unnamed",
        "Unnamed",
        "method",
        "abs",
        "Unnamed",
    ]


def test_config_names_tags_metadata_and_run_id(arun: Run[Any]) -> None:
    app = _pregel().with_config(run_name="Renamed", tags=["wc"], metadata={"x": 2, "m": 0})
    config = {"tags": ["t1"], "metadata": {"m": 1}, "run_id": uuid.UUID(int=5)}
    config["configurable"] = {"user_id": "u", "graph_id": "g"}
    events = arun(collect(app.astream_events(1, config, stream_mode="updates")))
    root = events[0]
    assert root["name"] == "Renamed" and root["run_id"] == str(uuid.UUID(int=5))
    # with_config's tags and metadata merged with the call's, as LangGraph does
    assert root["tags"] == ["wc", "t1"]
    # only some configurable keys are copied, as LangGraph does
    assert root["metadata"] == {"x": 2, "m": 1, "graph_id": "g", "ls_integration": "langgraph"}
    assert events[1]["tags"] == ["graph:step:0", "wc", "t1", "mine"]
    assert events[-1]["run_id"] == str(uuid.UUID(int=5))


def test_filters(arun: Run[Any]) -> None:
    app = _pregel()
    only_mul = arun(collect(app.astream_events(1, include_names=["mul"])))
    assert shape(only_mul) == [
        ("on_chain_start", "mul"),
        ("on_chain_stream", "mul"),
        ("on_chain_end", "mul"),
    ]
    # as langchain-core: the first event shown carries the run's input, and
    # its run's end does not repeat it
    assert only_mul[0]["data"] == {"input": 1}
    assert only_mul[2]["data"] == {"output": 20}
    assert arun(collect(app.astream_events(1, exclude_types=["chain"]))) == []
    assert arun(collect(app.astream_events(1, include_tags=["graph:step:2"]))) == []
    by_tag = arun(collect(app.astream_events(1, include_tags=["mine"], exclude_names=["plus"])))
    assert shape(by_tag) == [
        ("on_chain_start", "inc"),
        ("on_chain_stream", "inc"),
        ("on_chain_end", "inc"),
    ]


@pytest.mark.parametrize("empty", ["include_names", "include_types", "include_tags"])
def test_an_empty_include_filter_matches_nothing(empty: str, arun: Run[Any]) -> None:
    # langchain-core tests the filters against None: [] is a filter
    app = _pregel()
    assert arun(collect(app.astream_events(1, **{empty: []}))) == []
    if empty != "include_tags":
        tagged = arun(collect(app.astream_events(1, include_tags=["mine"], **{empty: []})))
        assert {e["name"] for e in tagged} == {"inc", "plus"}  # a step has its node's tags
    everything = arun(collect(app.astream_events(1)))
    no_exclusion = arun(
        collect(app.astream_events(1, exclude_names=[], exclude_types=[], exclude_tags=[]))
    )
    assert shape(no_exclusion) == shape(everything)


def test_stream_mode_and_other_keywords_pass_through(arun: Run[Any]) -> None:
    app = _pregel()
    events = arun(
        collect(app.astream_events(1, stream_mode=["updates", "values"], durability="exit"))
    )
    chunks = [e["data"]["chunk"] for e in events if e["event"] == "on_chain_stream"]
    chunks = [c for c in chunks if isinstance(c, tuple) and c[0] == "updates"]
    assert chunks == [("updates", {"inc": {"b": 2}}), ("updates", {"mul": {"c": 20}})]
    with pytest.raises(TypeError, match="durabilty"):
        arun(collect(app.astream_events(1, durabilty="exit")))


@pytest.mark.parametrize("version", ["v1", "v3", None])
def test_only_version_v2(version: Any, arun: Run[Any]) -> None:
    with pytest.raises(NotImplementedError, match="only version='v2'"):
        arun(collect(_pregel().astream_events(1, version=version)))


def test_aclose_stops_the_run(_loop_runner: asyncio.Runner) -> None:
    ran: list[int] = []

    @task
    async def step(i: int) -> int:
        await asyncio.sleep(0.05)
        ran.append(i)
        return i

    @entrypoint(checkpointer=InMemorySaver())
    async def wf(n: int) -> int:
        total = 0
        for i in range(n):
            total += await step(i)
        return total

    before: set[asyncio.Task[Any]] = set()

    async def main() -> None:
        before.update(asyncio.all_tasks())
        stream = wf.astream_events(10, {"configurable": {"thread_id": "a"}})
        async for event in stream:
            if event["event"] == "on_chain_end" and event["name"] == "step":
                break
        await stream.aclose()
        count = len(ran)
        await asyncio.sleep(0.3)
        assert len(ran) == count == 1

    _loop_runner.run(main())
    left = [t for t in asyncio.all_tasks(_loop_runner.get_loop()) - before if not t.done()]
    assert left == []
