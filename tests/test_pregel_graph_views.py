"""Views of a graph: its drawing, and the state of its subgraphs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import Command, interrupt


def _inner() -> Pregel:
    def ask(x: int) -> int:
        return x + int(interrupt(f"add to {x}?"))

    return Pregel(
        nodes={"ask": NodeBuilder().subscribe_only("n").do(ask).write_to("m")},
        channels={"n": LastValue(int), "m": LastValue(int)},
        input_channels="n",
        output_channels="m",
    )


def _outer() -> Pregel:
    return Pregel(
        nodes={"sub": NodeBuilder().subscribe_only("x").do(_inner()).write_to("y")},
        channels={"x": LastValue(int), "y": LastValue(int)},
        input_channels="x",
        output_channels="y",
        checkpointer=InMemorySaver(),
    )


def test_draw_mermaid_shows_nodes_channels_and_edges() -> None:
    app = Pregel(
        nodes={"double": NodeBuilder().subscribe_only("a").do(lambda x: x * 2).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    text = app.get_graph().draw_mermaid()
    assert text.startswith("graph TD\n")
    assert "ch_a([a])" in text and "ch_b([b])" in text and "n_double[double]" in text
    assert "ch_a -.-> n_double" in text and "n_double --> ch_b" in text


def test_get_state_with_subgraphs_shows_the_interrupted_subgraph() -> None:
    app = _outer()
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    app.invoke(1, config)

    plain = app.get_state(config)
    assert plain.next == ("sub",)
    assert plain.tasks[0].state is None

    nested = app.get_state(config, subgraphs=True)
    child = nested.tasks[0].state
    assert child is not None and not isinstance(child, dict)
    assert child.next == ("ask",)
    assert [i.value for i in child.interrupts] == ["add to 1?"]
    assert child.config["configurable"]["checkpoint_ns"].startswith("sub:")

    assert app.invoke(Command(resume=41), config) == 42
    assert app.get_state(config, subgraphs=True).tasks == ()


def test_aget_state_with_subgraphs_matches_the_sync_view() -> None:
    app = _outer()
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    app.invoke(1, config)
    sync_child = app.get_state(config, subgraphs=True).tasks[0].state
    async_child = asyncio.run(app.aget_state(config, subgraphs=True)).tasks[0].state
    assert sync_child == async_child


def test_debug_prints_tasks_and_checkpoints_without_changing_the_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = Pregel(
        nodes={"double": NodeBuilder().subscribe_only("a").do(lambda x: x * 2).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        debug=True,
    )
    assert app.invoke(3) == 6
    lines = capsys.readouterr().out.splitlines()
    assert "[pregelkit step 0] task double starts with 3" in lines
    assert "[pregelkit step 0] task double wrote {'b': 6}" in lines
    assert sum("checkpoint" in line for line in lines) == 2
    # a single stream mode still yields bare chunks; debug goes to stdout only
    assert list(app.stream(3, stream_mode="updates")) == [{"double": {"b": 6}}]
    assert "task double" in capsys.readouterr().out
    assert list(app.stream(3, stream_mode="updates", debug=False)) == [{"double": {"b": 6}}]
    assert capsys.readouterr().out == ""


def test_get_graph_shows_start_and_end_as_langgraph_does() -> None:
    from pregelkit.func import entrypoint

    chain = Pregel(
        nodes={
            "n": NodeBuilder().subscribe_only("a").do(lambda x: x).write_to("b"),
            "m": NodeBuilder().subscribe_only("b").do(lambda x: x).write_to("c"),
        },
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels="c",
    )
    graph = chain.get_graph()
    assert list(graph.nodes) == ["n", "m", "__start__", "__end__"]
    assert graph.nodes["__start__"].data is None and graph.nodes["n"].name == "n"
    assert [(e.source, e.target, e.conditional) for e in graph.edges] == [
        ("__start__", "n", False),
        ("n", "m", False),
        ("m", "__end__", False),
    ]

    @entrypoint()
    def flow(x: int) -> int:
        return x

    assert [tuple(e) for e in flow.get_graph().edges] == [
        ("__start__", "flow", None, False),
        ("flow", "__end__", None, True),  # the return value is mapped to the output
    ]
    assert "n_flow[flow]" in flow.get_graph().draw_mermaid()
