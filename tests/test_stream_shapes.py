"""Stream and invoke outputs of a raw ``Pregel`` around inputs, interrupts and
resumes, chunk for chunk as LangGraph 1.2.22 gives them (each expected value
below was printed by LangGraph running the same graph)."""

from __future__ import annotations

from typing import Any

import pytest

from pregelkit.channels import EphemeralValue, LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import Command, Interrupt, interrupt


def plus(x: int) -> int:
    return x + 1


def asks(x: int) -> int:
    return x + int(interrupt("q"))


def graph(
    outputs: str | list[str], node: Any = plus, input_channel: Any = LastValue, **kw: Any
) -> Pregel:
    return Pregel(
        nodes={"inc": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": input_channel(int), "b": LastValue(int)},
        input_channels="a",
        output_channels=outputs,
        checkpointer=InMemorySaver(),
        **kw,
    )


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def values_of(chunks: list[Any]) -> list[Any]:
    """Interrupts as their values, so chunks compare without their ids."""

    def plain(c: Any) -> Any:
        if isinstance(c, dict) and "__interrupt__" in c:
            return {**c, "__interrupt__": [i.value for i in c["__interrupt__"]]}
        if isinstance(c, tuple) and len(c) == 2:
            return (c[0], plain(c[1]))
        return c

    return [plain(c) for c in chunks]


@pytest.mark.parametrize("channel", [LastValue, EphemeralValue])
def test_a_new_input_gets_no_values_chunk_of_its_own(channel: Any) -> None:
    app = graph(["b"], input_channel=channel)
    expected = {"a": 1, "b": 2} if channel is LastValue else {"b": 2}
    assert list(app.stream(1, cfg("1"), stream_mode="values")) == [expected]
    assert list(app.stream(1, cfg("2"), stream_mode=["values", "updates"])) == [
        ("updates", {"inc": {"b": 2}}),
        ("values", expected),
    ]


def test_a_dynamic_interrupt_shows_in_values_beside_the_values() -> None:
    app = graph(["a", "b"], node=asks)
    chunks = list(app.stream(1, cfg("1"), stream_mode="values"))
    assert values_of(chunks) == [{"a": 1, "__interrupt__": ["q"]}]
    assert isinstance(chunks[0]["__interrupt__"], tuple)
    # one output channel: the interrupts alone
    single = graph("b", node=asks)
    assert values_of(list(single.stream(1, cfg("2"), stream_mode="values"))) == [
        {"a": 1, "__interrupt__": ["q"]}  # stream: the stream channels, a dict
    ]
    result = single.invoke(1, cfg("3"))
    assert values_of([result]) == [{"__interrupt__": ["q"]}]
    assert isinstance(result["__interrupt__"], list)


def test_a_static_interrupt_shows_in_updates_only() -> None:
    before = graph(["a", "b"], interrupt_before_nodes=["inc"])
    assert list(before.stream(1, cfg("1"), stream_mode="values")) == []
    assert before.invoke(1, cfg("2")) is None
    assert list(before.stream(1, cfg("3"), stream_mode=["values", "updates"])) == [
        ("updates", {"__interrupt__": ()})
    ]
    after = graph(["a", "b"], interrupt_after_nodes=["inc"])
    assert list(after.stream(1, cfg("4"), stream_mode="values")) == [{"a": 1, "b": 2}]
    assert list(after.stream(1, cfg("5"), stream_mode=["values", "updates"])) == [
        ("updates", {"inc": {"b": 2}}),
        ("values", {"a": 1, "b": 2}),
        ("updates", {"__interrupt__": ()}),
    ]


def test_invoke_with_a_list_of_modes_returns_mode_chunk_pairs() -> None:
    app = graph("b", interrupt_after_nodes=["inc"])
    assert app.invoke(1, cfg("1"), stream_mode=["values", "updates"]) == [
        ("updates", {"inc": 2}),
        ("values", 2),
        ("updates", {"__interrupt__": ()}),
    ]
    # one mode: the chunks alone; updates hold invoke's output channels
    assert app.invoke(1, cfg("2"), stream_mode="updates") == [
        {"inc": 2},
        {"__interrupt__": ()},
    ]


def test_a_resume_first_shows_where_the_run_stands_even_when_empty() -> None:
    from pregelkit.func import entrypoint, task

    @task
    def t1(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=InMemorySaver())
    def wf(x: int) -> dict[str, int]:
        a = t1(x).result()
        return {"a": a, "c": interrupt("wq")}

    assert values_of(list(wf.stream(1, cfg("1"), stream_mode="values"))) == [
        {"__interrupt__": ["wq"]}
    ]
    assert list(wf.stream(Command(resume=20), cfg("1"), stream_mode="values")) == [
        None,
        {"a": 2, "c": 20},
    ]


def parallel() -> Pregel:
    n1 = NodeBuilder().subscribe_only("a").do(asks).write_to("b")
    n2 = NodeBuilder().subscribe_only("a").do(plus).write_to("c")
    return Pregel(
        nodes={"n1": n1, "n2": n2},
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels=["a", "b", "c"],
        checkpointer=InMemorySaver(),
    )


def test_an_interrupted_step_shows_the_writes_of_its_finished_tasks() -> None:
    app = parallel()
    chunks = list(app.stream(1, cfg("1"), stream_mode="values"))
    assert values_of(chunks) == [{"a": 1, "__interrupt__": ["q"]}, {"a": 1, "c": 2}]
    result = parallel().invoke(1, cfg("2"))
    assert values_of([result]) == [{"a": 1, "c": 2, "__interrupt__": ["q"]}]


def test_a_resume_shows_the_saved_writes_it_reuses_as_cached_updates() -> None:
    app = parallel()
    list(app.stream(1, cfg("1")))
    assert list(app.stream(Command(resume=5), cfg("1"), stream_mode="updates")) == [
        {"n2": {"c": 2}, "__metadata__": {"cached": True}},
        {"n1": {"b": 6}},
    ]
    # the tasks stream shows every task of the step, n2 too, without a result
    app = parallel()
    list(app.stream(1, cfg("2")))
    events = list(app.stream(Command(resume=5), cfg("2"), stream_mode="tasks"))
    starts = sorted(e["name"] for e in events if "input" in e)
    results = sorted(e["name"] for e in events if "result" in e)
    assert (starts, results) == (["n1", "n2"], ["n1"])


def test_an_interrupt_prints_as_langgraph_prints_it() -> None:
    assert repr(Interrupt("ask", id="i1")) == (
        "Interrupt(value='ask', id='i1', response_schema=None)"
    )
