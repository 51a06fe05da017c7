"""Drop-in details that a program printing what LangGraph gives it would
notice (issue 25, section 5). Each test uses only names LangGraph has, under
the same module paths, and passes unchanged with ``langgraph`` in place of
``pregelkit`` (checked against langgraph 1.2.22)."""

from __future__ import annotations

import asyncio
from typing import Any

from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel

STREAMED_ORDER = ["checkpoint_ns", "thread_id", "checkpoint_id"]
"""How LangGraph lists a checkpoint's config in stream events."""
SNAPSHOT_ORDER = ["thread_id", "checkpoint_ns", "checkpoint_id"]
"""How it lists it in a state snapshot (from the saver)."""


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@task
def double(x: int) -> int:
    return 2 * x


@entrypoint(checkpointer=InMemorySaver())
def doubled(x: int) -> int:
    return double(x).result()


def test_configs_in_checkpoints_parts_and_debug_events_list_their_keys_as_langgraph() -> None:
    seen = 0
    for mode, part in doubled.stream(1, cfg(), stream_mode=["checkpoints", "debug"]):
        if mode == "debug":
            if part["type"] != "checkpoint":
                continue
            part = part["payload"]
        assert list(part["config"]["configurable"]) == STREAMED_ORDER
        if part["parent_config"] is not None:
            assert list(part["parent_config"]["configurable"]) == STREAMED_ORDER
        seen += 1
    assert seen == 4  # two checkpoints, each as a part and as a debug event
    state = doubled.get_state(cfg())
    assert list(state.config["configurable"]) == SNAPSHOT_ORDER
    assert state.parent_config is not None
    assert list(state.parent_config["configurable"]) == SNAPSHOT_ORDER


@task
def inner(x: int) -> int:
    get_stream_writer()({"inner": x})
    return x


@task
def chat(x: int) -> int:
    get_stream_writer()({"chat": x})
    return inner(x).result() + 1


@entrypoint(checkpointer=InMemorySaver())
def talk(x: int) -> int:
    get_stream_writer()({"talk": x})
    return chat(x).result()


def _namespaces(parts: list[tuple[tuple[str, ...], str, Any]]) -> dict[str, tuple[str, ...]]:
    ids = {data["name"]: data["id"] for _, mode, data in parts if mode == "tasks"}
    by_writer = {next(iter(data)): ns for ns, mode, data in parts if mode == "custom"}
    talk_ns, chat_ns = f"talk:{ids['talk']}", f"chat:{ids['chat']}"
    assert by_writer == {"talk": (), "chat": (talk_ns,), "inner": (talk_ns, chat_ns)}
    return by_writer


def test_custom_chunks_of_a_task_call_carry_its_callers_namespace() -> None:
    parts = list(talk.stream(1, cfg(), stream_mode=["custom", "tasks"], subgraphs=True))
    _namespaces(parts)
    # without subgraphs=True the chunks are the same, without namespaces
    plain = list(talk.stream(1, cfg("u"), stream_mode="custom"))
    assert plain == [{"talk": 1}, {"chat": 1}, {"inner": 1}]


@task
async def achat(x: int) -> int:
    get_stream_writer()({"chat": x})
    return await ainner(x) + 1


@task
async def ainner(x: int) -> int:
    get_stream_writer()({"inner": x})
    return x


@entrypoint(checkpointer=InMemorySaver())
async def atalk(x: int) -> int:
    get_stream_writer()({"talk": x})
    return await achat(x)


def test_custom_chunks_of_an_async_task_call_carry_its_callers_namespace() -> None:
    async def collect() -> list[Any]:
        stream = atalk.astream(1, cfg(), stream_mode=["custom", "tasks"], subgraphs=True)
        return [part async for part in stream]

    parts = asyncio.run(collect())
    ids = {data["name"]: data["id"] for _, mode, data in parts if mode == "tasks"}
    by_writer = {next(iter(data)): ns for ns, mode, data in parts if mode == "custom"}
    talk_ns, chat_ns = f"atalk:{ids['atalk']}", f"achat:{ids['achat']}"
    assert by_writer == {"talk": (), "chat": (talk_ns,), "inner": (talk_ns, chat_ns)}


@entrypoint(checkpointer=InMemorySaver())
def final(x: int, *, previous: Any = None) -> Any:
    return entrypoint.final(value={"a": x}, save=[previous, x])


@entrypoint(checkpointer=InMemorySaver())
def plain(x: int) -> dict[str, int]:
    return {"a": x}


@entrypoint(checkpointer=InMemorySaver())
def nothing(x: int) -> Any:
    return entrypoint.final(value=None, save=x)


def _history_results(workflow: Any) -> list[list[tuple[str, Any]]]:
    workflow.invoke(1, cfg())
    workflow.invoke(2, cfg())
    return [[(t.name, t.result) for t in s.tasks] for s in workflow.get_state_history(cfg())]


def test_state_history_task_results_of_entrypoints_are_their_return_values() -> None:
    assert _history_results(final) == [[], [("final", {"a": 2})], [], [("final", {"a": 1})]]
    assert _history_results(plain) == [[], [("plain", {"a": 2})], [], [("plain", {"a": 1})]]
    assert _history_results(nothing) == [[], [("nothing", None)], [], [("nothing", None)]]


def test_state_history_task_results_of_graph_nodes_are_the_channels_they_wrote() -> None:
    app = Pregel(
        nodes={
            "first": NodeBuilder().subscribe_only("a").do(lambda v: v + "-1").write_to("b"),
            "last": NodeBuilder().subscribe_only("b").do(lambda v: v + "-2").write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "b", "out")},
        input_channels="a",
        output_channels="out",  # one output channel, as an entrypoint has
        checkpointer=InMemorySaver(),
    )
    app.invoke("x", cfg())
    results = [[(t.name, t.result) for t in s.tasks] for s in app.get_state_history(cfg())]
    assert results[:3] == [[], [("last", {"out": "x-1-2"})], [("first", {"b": "x-1"})]]
