"""The low-level engine: ``Pregel`` graphs built from ``NodeBuilder`` nodes and channels.

Covers what nodes read and write, Send fan-out, superstep visibility, errors,
checkpointing with ``InMemorySaver`` (sources, steps, blobs, durability,
history, update_state, forks), crash recovery, interrupts, stream modes,
subgraphs and retries.
"""

from __future__ import annotations

import itertools
import operator
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pregelkit.channels import (
    BinaryOperatorAggregate,
    EphemeralValue,
    LastValue,
    Topic,
)
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_config, get_store, get_stream_writer
from pregelkit.errors import (
    EmptyInputError,
    GraphRecursionError,
    InvalidUpdateError,
    TaskNotFound,
)
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel._exec.retry import next_retry_delay
from pregelkit.types import Command, Interrupt, RetryPolicy, Send, StateSnapshot, interrupt

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"


def cfg(thread: str = "t", **conf: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **conf}}


def recorder(calls: list[str], tag: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` that also records that it ran, under ``tag``."""

    def run(value: Any) -> Any:
        calls.append(tag)
        return fn(value)

    return run


def chain(calls: list[str] | None = None, **kwargs: Any) -> Pregel:
    """a -one-> b -two-> c -three-> d, each node appending its number."""
    log = calls if calls is not None else []
    return Pregel(
        nodes={
            "one": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(log, "one", lambda v: v + "1"))
            .write_to("b"),
            "two": NodeBuilder()
            .subscribe_only("b")
            .do(recorder(log, "two", lambda v: v + "2"))
            .write_to("c"),
            "three": NodeBuilder()
            .subscribe_only("c")
            .do(recorder(log, "three", lambda v: v + "3"))
            .write_to("d"),
        },
        channels={k: LastValue(str) for k in "abcd"},
        input_channels="a",
        output_channels=["b", "c", "d"],
        **kwargs,
    )


def meta(snapshot: StateSnapshot, key: str = "step") -> Any:
    """A metadata entry of a state snapshot (which has metadata once saved)."""
    assert snapshot.metadata is not None
    return snapshot.metadata[key]  # type: ignore[literal-required]


def steps(snapshots: Iterable[StateSnapshot]) -> list[int]:
    return [meta(s) for s in snapshots]


def keep(seen: list[Any], value: Any) -> Any:
    """Record ``value`` in ``seen`` and return it."""
    seen.append(value)
    return value


# NodeBuilder


def test_subscribe_only_passes_the_bare_value() -> None:
    seen: list[Any] = []
    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda v: keep(seen, v) * 2)},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
    )
    app.invoke(21)
    assert seen == [21]


def test_subscribe_to_passes_a_dict_of_the_available_channels() -> None:
    seen: list[Any] = []
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_to("a", "b")
            .do(lambda d: sum(keep(seen, dict(d)).values()))
            .write_to("out")
        },
        channels={"a": LastValue(int), "b": LastValue(int), "out": LastValue(int)},
        input_channels=["a", "b"],
        output_channels="out",
    )
    assert app.invoke({"a": 1, "b": 2}) == 3
    # b was never written: it is left out, not passed as None
    assert app.invoke({"a": 5}) == 5
    assert seen == [{"a": 1, "b": 2}, {"a": 5}]


def test_subscribe_to_with_read_false_triggers_without_reading() -> None:
    seen: list[Any] = []
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_to("a")
            .subscribe_to("go", read=False)
            .do(lambda d: keep(seen, dict(d)) and "ran")
            .write_to("out")
        },
        channels={"a": LastValue(int), "go": LastValue(bool), "out": LastValue(str)},
        input_channels=["a", "go"],
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    app.invoke({"a": 1}, cfg())
    # only the trigger changes: the node runs, and still reads only "a"
    assert app.invoke({"go": True}, cfg()) == "ran"
    assert seen == [{"a": 1}, {"a": 1}]


def test_read_from_reads_without_being_triggered() -> None:
    seen: list[Any] = []
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_to("a")
            .read_from("k")
            .do(lambda d: keep(seen, dict(d))["a"] * d.get("k", 1))
            .write_to("out")
        },
        channels={"a": LastValue(int), "k": LastValue(int), "out": LastValue(int)},
        input_channels=["a", "k"],
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    assert app.invoke({"a": 3}, cfg()) == 3
    # writing only k does not run the node
    assert app.invoke({"k": 10}, cfg()) is None
    assert seen == [{"a": 3}]
    # the next time a triggers it, it reads k
    assert app.invoke({"a": 4}, cfg()) == 40
    assert seen == [{"a": 3}, {"a": 4, "k": 10}]


def test_chained_do_runs_steps_in_order() -> None:
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_only("a")
            .do(lambda v: v + 1)
            .do(lambda v: v * 10)
            .do(str)
            .write_to("out")
        },
        channels={"a": LastValue(int), "out": LastValue(str)},
        input_channels="a",
        output_channels="out",
    )
    assert app.invoke(4) == "50"


def test_write_to_with_mapper_and_fixed_value() -> None:
    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_only("a")
            .do(lambda v: v * 2)
            .write_to("plain", text=lambda v: f"<{v}>", flag=True, label="fixed")
        },
        channels={
            "a": LastValue(int),
            "plain": LastValue(int),
            "text": LastValue(str),
            "flag": LastValue(bool),
            "label": LastValue(str),
        },
        input_channels="a",
        output_channels=["plain", "text", "flag", "label"],
    )
    assert app.invoke(5) == {"plain": 10, "text": "<10>", "flag": True, "label": "fixed"}


def test_node_builder_refuses_mixed_subscriptions() -> None:
    with pytest.raises(ValueError, match="single channel"):
        NodeBuilder().subscribe_only("a").subscribe_to("b")
    with pytest.raises(ValueError, match="subscribe_only"):
        NodeBuilder().subscribe_to("b").subscribe_only("a")
    with pytest.raises(ValueError, match="single channel"):
        NodeBuilder().subscribe_only("a").read_from("b")


def test_do_refuses_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match=r"callable.*42"):
        NodeBuilder().do(42)  # type: ignore[arg-type]


def test_a_built_pregel_node_can_be_passed_directly() -> None:
    node = NodeBuilder().subscribe_only("a").do(lambda v: -v).write_to("b").build()
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert app.invoke(3) == -3


# Send: PUSH tasks


def fan_out_graph(results: Any, **kwargs: Any) -> Pregel:
    return Pregel(
        nodes={
            "fan": NodeBuilder()
            .subscribe_only("n")
            .do(lambda n: [Send("worker", i) for i in range(n)]),
            # no subscription: it runs only when sent to
            "worker": NodeBuilder().do(lambda i: i * 10).write_to("results"),
        },
        channels={"n": LastValue(int), "results": results},
        input_channels="n",
        output_channels="results",
        **kwargs,
    )


def test_send_fans_out_into_a_topic_in_send_order() -> None:
    app = fan_out_graph(Topic(int, accumulate=True))
    assert app.invoke(5) == [0, 10, 20, 30, 40]


def test_send_results_reduced_with_a_binary_operator() -> None:
    app = fan_out_graph(BinaryOperatorAggregate(int, operator.add))
    assert app.invoke(5) == 100
    # no Sends, no workers: the output channel is never written
    assert app.invoke(0) is None


def test_sends_become_parallel_push_tasks_of_the_next_step() -> None:
    app = fan_out_graph(Topic(int, accumulate=True), checkpointer=InMemorySaver())
    events = [e for e in app.stream(3, cfg(), stream_mode="tasks") if "input" in e]
    assert [(e["name"], e["input"], e["triggers"]) for e in events] == [
        ("fan", 3, ("n",)),
        ("worker", 0, ("__pregel_push",)),
        ("worker", 1, ("__pregel_push",)),
        ("worker", 2, ("__pregel_push",)),
    ]
    # fan ran at step 0, the three workers together at step 1
    assert steps(app.get_state_history(cfg())) == [1, 0, -1]
    step0 = next(h for h in app.get_state_history(cfg()) if meta(h) == 0)
    assert step0.next == ("worker", "worker", "worker")
    assert [t.path for t in step0.tasks] == [("__pregel_push", i) for i in range(3)]


def test_command_with_update_and_send_gotos() -> None:
    app = Pregel(
        nodes={
            "fan": NodeBuilder()
            .subscribe_only("a")
            .do(lambda n: Command(update={"b": n * 2}, goto=[Send("w", n), Send("w", n + 1)])),
            "w": NodeBuilder().do(lambda x: x * 100).write_to("out"),
        },
        channels={"a": LastValue(int), "b": LastValue(int), "out": Topic(int, accumulate=True)},
        input_channels="a",
        output_channels=["b", "out"],
    )
    assert app.invoke(1) == {"b": 2, "out": [100, 200]}


def test_send_to_an_unknown_node_is_a_clear_error() -> None:
    app = Pregel(
        nodes={"fan": NodeBuilder().subscribe_only("a").do(lambda n: [Send("nope", n)])},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
    )
    with pytest.raises(TaskNotFound, match="nope"):
        app.invoke(1)


# supersteps


def test_a_step_sees_only_the_values_of_the_previous_step() -> None:
    """``w`` and ``r`` run in the same step: ``r`` cannot see what ``w`` writes."""
    seen: list[Any] = []
    app = Pregel(
        nodes={
            "w": NodeBuilder().subscribe_only("a").do(lambda v: v * 10).write_to("x"),
            "r": NodeBuilder()
            .subscribe_to("a")
            .read_from("x")
            .do(lambda d: keep(seen, d.get("x")))
            .write_to("y"),
            # one step later, the value w wrote is visible
            "later": NodeBuilder().subscribe_only("x").do(lambda v: v + 1).write_to("z"),
        },
        channels={k: LastValue(int) for k in "axyz"},
        input_channels="a",
        output_channels=["x", "y", "z"],
        checkpointer=InMemorySaver(),
    )
    assert app.invoke(1, cfg()) == {"x": 10, "y": None, "z": 11}
    assert seen == [None]
    # next run: r sees x from the previous run, not the 20 written beside it
    assert app.invoke(2, cfg()) == {"x": 20, "y": 10, "z": 21}
    assert seen == [None, 10]


def test_ephemeral_channels_hold_a_value_for_one_step() -> None:
    app = Pregel(
        nodes={
            "n1": NodeBuilder().subscribe_only("a").do(lambda x: x + x).write_to("b"),
            "n2": NodeBuilder().subscribe_to("b").do(lambda x: x["b"] + x["b"]).write_to("c"),
        },
        channels={"a": EphemeralValue(str), "b": LastValue(str), "c": EphemeralValue(str)},
        input_channels=["a"],
        output_channels=["a", "b", "c"],
    )
    # values come after each step (not for the input, as in LangGraph): the
    # ephemeral input is gone by then, c is there for the step that wrote it
    values = list(app.stream({"a": "x"}, stream_mode="values"))
    assert values == [{"b": "xx"}, {"b": "xx", "c": "xxxx"}]


def test_two_tasks_writing_one_last_value_fail_naming_the_channel() -> None:
    app = Pregel(
        nodes={
            "x": NodeBuilder().subscribe_only("a").write_to("shared"),
            "y": NodeBuilder().subscribe_only("a").write_to("shared"),
        },
        channels={"a": LastValue(int), "shared": LastValue(int)},
        input_channels="a",
        output_channels="shared",
    )
    with pytest.raises(InvalidUpdateError, match="'shared'"):
        app.invoke(1)


def counting_loop(stop_at: int, calls: list[int]) -> Pregel:
    """A node that rewrites its own trigger until the value reaches ``stop_at``."""

    def step(v: int) -> Any:
        calls.append(v)
        return Command(update={"a": v + 1}) if v + 1 < stop_at else None

    return Pregel(
        nodes={"loop": NodeBuilder().subscribe_only("a").do(step)},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
    )


def test_recursion_limit_stops_a_graph_that_does_not_end() -> None:
    calls: list[int] = []
    app = counting_loop(10**9, calls)
    with pytest.raises(GraphRecursionError, match="Recursion limit of 5"):
        app.invoke(0, {"recursion_limit": 5})
    assert 5 <= len(calls) <= 6
    calls.clear()
    with pytest.raises(GraphRecursionError):
        list(app.stream(0, {"recursion_limit": 2}))
    assert 2 <= len(calls) <= 3


def test_recursion_limit_is_not_hit_by_a_graph_that_ends_in_time() -> None:
    calls: list[int] = []
    assert counting_loop(4, calls).invoke(0, {"recursion_limit": 4}) == 3
    assert calls == [0, 1, 2, 3]
    calls.clear()
    with pytest.raises(GraphRecursionError):
        counting_loop(4, calls).invoke(0, {"recursion_limit": 2})


def test_a_reducer_channel_never_written_triggers_nothing() -> None:
    """A BinaryOperatorAggregate has a value (0) before any write, but a node
    subscribed to it runs only once it is written: in a run, on resume, and in
    what get_state() says runs next."""
    calls: list[str] = []
    app = Pregel(
        nodes={
            "first": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(calls, "first", str))
            .write_to("b"),
            "on_total": NodeBuilder()
            .subscribe_only("total")
            .do(recorder(calls, "on_total", str))
            .write_to("c"),
        },
        channels={
            "a": LastValue(int),
            "b": LastValue(str),
            "c": LastValue(str),
            "total": BinaryOperatorAggregate(int, operator.add),
        },
        input_channels="a",
        output_channels=["b", "c"],
        checkpointer=InMemorySaver(),
        interrupt_after_nodes=["first"],
    )
    app.invoke(1, cfg())
    assert app.get_state(cfg()).next == ()
    # resuming checks every node: on_total must still not run
    app.invoke(None, cfg())
    assert calls == ["first"]
    assert app.get_state(cfg()).values == {"a": 1, "b": "1", "total": 0}
    # once written, it triggers
    app.update_state(cfg(), {"total": 5})
    assert app.get_state(cfg()).next == ("on_total",)
    app.invoke(None, cfg())
    assert calls == ["first", "on_total"]


# clear errors


def test_unknown_channel_in_subscribe_to_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"node 'n'.*'zz'"):
        Pregel(
            nodes={"n": NodeBuilder().subscribe_to("zz").write_to("a")},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )
    with pytest.raises(ValueError, match=r"node 'n'.*'zz'"):
        Pregel(
            nodes={"n": NodeBuilder().subscribe_only("zz")},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )


def test_an_input_no_node_reads_fails_at_construction() -> None:
    # as LangGraph: for one input channel, and for a list none of which is read
    def graph(inputs: str | list[str]) -> Pregel:
        return Pregel(
            nodes={"n": NodeBuilder().subscribe_only("x").do(lambda v: v).write_to("b")},
            channels={"a": LastValue(int), "x": LastValue(int), "b": LastValue(int)},
            input_channels=inputs,
            output_channels="b",
        )

    with pytest.raises(ValueError, match="input channel 'a' is not subscribed to by any node"):
        graph("a")
    with pytest.raises(ValueError, match=r"none of the input channels \['a'\]"):
        graph(["a"])
    assert graph(["a", "x"]).invoke({"x": 1}) == 1


def test_unknown_channel_in_write_to_or_read_from_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"node 'n' writes to unknown channel 'zz'"):
        Pregel(
            nodes={"n": NodeBuilder().subscribe_to("a").write_to("zz")},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )
    with pytest.raises(ValueError, match=r"node 'n' writes to unknown channel 'zz'"):
        Pregel(
            nodes={"n": NodeBuilder().subscribe_to("a").write_to(zz=lambda v: v)},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )
    with pytest.raises(ValueError, match=r"node 'n' reads unknown channel 'qq'"):
        Pregel(
            nodes={"n": NodeBuilder().subscribe_to("a").read_from("qq")},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )


def test_unknown_input_output_or_interrupt_names_fail_at_construction() -> None:
    def build(**kw: Any) -> Pregel:
        args: dict[str, Any] = {
            "nodes": {"n": NodeBuilder().subscribe_only("a").write_to("b")},
            "channels": {"a": LastValue(int), "b": LastValue(int)},
            "input_channels": "a",
            "output_channels": "b",
        }
        return Pregel(**{**args, **kw})

    with pytest.raises(ValueError, match="input channel 'zz'"):
        build(input_channels=["zz"])
    with pytest.raises(ValueError, match="output channel 'zz'"):
        build(output_channels="zz")
    with pytest.raises(ValueError, match="interrupt_before names unknown node 'x'"):
        build(interrupt_before_nodes=["x"])
    with pytest.raises(ValueError, match="interrupt_after names unknown node 'x'"):
        build(interrupt_after_nodes=["x"])


def test_input_for_a_missing_input_channel_is_a_clear_error() -> None:
    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels=["a"],
        output_channels="b",
    )
    with pytest.raises(ValueError, match=r"not input channels: \['b'\]"):
        app.invoke({"b": 1})
    with pytest.raises(EmptyInputError):
        app.invoke({})
    with pytest.raises(TypeError, match="dict of input channels"):
        app.invoke(5)
    assert app.invoke({"a": 7}) == 7


def test_update_state_to_an_unknown_channel_is_a_clear_error() -> None:
    app = chain(checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    with pytest.raises(InvalidUpdateError, match="unknown channel 'zz'"):
        app.update_state(cfg(), {"zz": 1})
    with pytest.raises(InvalidUpdateError, match="'nope'"):
        app.update_state(cfg(), "v", as_node="nope")
    # nothing was written by the failed updates
    assert meta(next(app.get_state_history(cfg())), "source") == "loop"


def test_state_needs_a_checkpointer_and_a_thread_id() -> None:
    app = chain()
    with pytest.raises(ValueError, match="no checkpointer"):
        app.get_state(cfg())
    with pytest.raises(ValueError, match="thread id"):
        chain(checkpointer=InMemorySaver()).invoke("x")


# checkpointing


def test_one_checkpoint_for_the_input_and_one_per_step() -> None:
    saver = InMemorySaver()
    app = chain(checkpointer=saver)
    assert app.invoke("x", cfg()) == {"b": "x1", "c": "x12", "d": "x123"}
    history = list(saver.list(cfg()))
    assert [(t.metadata["source"], t.metadata["step"]) for t in history] == [
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    assert all(t.metadata["parents"] == {} for t in history)
    # each checkpoint's parent is the one before it; ids sort in creation order
    ids = [t.checkpoint["id"] for t in history]
    assert ids == sorted(ids, reverse=True)
    for child, parent in itertools.pairwise(history):
        assert child.parent_config is not None
        assert child.parent_config["configurable"]["checkpoint_id"] == parent.checkpoint["id"]
    assert history[-1].parent_config is None
    assert history[0].checkpoint["channel_values"] == {"a": "x", "b": "x1", "c": "x12", "d": "x123"}
    assert history[-1].checkpoint["channel_values"] == {"a": "x"}


def test_only_channels_changed_in_a_step_get_a_new_blob() -> None:
    saver = InMemorySaver()
    app = chain(checkpointer=saver)
    app.invoke("x", cfg())
    history = list(reversed(list(saver.list(cfg()))))
    blobs = {(k[2], k[3]) for k in saver.blobs if k[0] == "t"}
    # one blob per (channel, version), for versions that some checkpoint uses
    used = {(c, v) for t in history for c, v in t.checkpoint["channel_versions"].items()}
    assert blobs == used
    written_per_step = []
    for prev, cur in itertools.pairwise(history):
        pv, cv = prev.checkpoint["channel_versions"], cur.checkpoint["channel_versions"]
        written_per_step.append({c for c, v in cv.items() if pv.get(c) != v})
    # step 0 wrote b, step 1 c, step 2 d; a is stored once, at the input
    assert written_per_step == [{"b"}, {"c"}, {"d"}]
    assert Counter(c for c, _ in blobs) == {"a": 1, "b": 1, "c": 1, "d": 1}


def test_a_channel_written_again_gets_a_new_version_and_blob() -> None:
    saver = InMemorySaver()
    app = chain(checkpointer=saver)
    app.invoke("x", cfg())
    app.invoke("y", cfg())
    versions = [t.checkpoint["channel_versions"] for t in saver.list(cfg())]
    assert len({v["a"] for v in versions}) == 2
    assert Counter(k[2] for k in saver.blobs) == {"a": 2, "b": 2, "c": 2, "d": 2}
    assert app.get_state(cfg()).values == {"a": "y", "b": "y1", "c": "y12", "d": "y123"}


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_durability_ends_in_the_same_state(durability: str) -> None:
    saver = InMemorySaver()
    app = chain(checkpointer=saver)
    out = app.invoke("x", cfg(), durability=durability)
    assert out == {"b": "x1", "c": "x12", "d": "x123"}
    state = app.get_state(cfg())
    assert state.values == {"a": "x", "b": "x1", "c": "x12", "d": "x123"}
    assert state.next == ()
    assert meta(state) == 2
    saved_steps = [t.metadata["step"] for t in saver.list(cfg())]
    if durability == "exit":
        assert saved_steps == [2]
    else:
        assert saved_steps == [2, 1, 0, -1]
    # and the thread continues the same way from there
    assert app.invoke("y", cfg(), durability=durability)["d"] == "y123"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_durability_saves_an_interrupted_step(durability: str) -> None:
    saver = InMemorySaver()
    calls: list[str] = []
    app = Pregel(
        nodes={
            "ask": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(calls, "ask", lambda v: v + interrupt("q")))
            .write_to("b"),
            "side": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(calls, "side", str.upper))
            .write_to("s"),
        },
        channels={k: LastValue(str) for k in "abs"},
        input_channels="a",
        output_channels=["b", "s"],
        checkpointer=saver,
    )
    first = app.invoke("x", cfg(), durability=durability)
    assert [i.value for i in first["__interrupt__"]] == ["q"]
    state = app.get_state(cfg())
    assert state.next == ("ask",)
    assert state.values == {"a": "x", "s": "X"}
    assert app.invoke(Command(resume="!"), cfg(), durability=durability) == {"b": "x!", "s": "X"}
    assert sorted(calls) == ["ask", "ask", "side"]


def test_get_state_shows_values_next_tasks_and_interrupts() -> None:
    saver = InMemorySaver()
    app = Pregel(
        nodes={
            "foo": NodeBuilder()
            .subscribe_only("start")
            .do(lambda v: interrupt("q?"))
            .write_to("out"),
            "bar": NodeBuilder().subscribe_only("start").do(lambda v: v + "!").write_to("side"),
            "baz": NodeBuilder().subscribe_only("start").do(lambda v: None),
        },
        channels={"start": LastValue(str), "out": LastValue(str), "side": LastValue(str)},
        input_channels="start",
        output_channels=["out", "side"],
        checkpointer=saver,
    )
    app.invoke("go", cfg())
    state = app.get_state(cfg())
    # the finished tasks' writes show in the values; only foo is still to run
    assert state.values == {"start": "go", "side": "go!"}
    assert state.next == ("foo",)
    by_name = {t.name: t for t in state.tasks}
    assert set(by_name) == {"foo", "bar", "baz"}
    assert [i.value for i in by_name["foo"].interrupts] == ["q?"]
    assert by_name["foo"].result is None and by_name["foo"].error is None
    assert by_name["bar"].result == {"side": "go!"} and by_name["bar"].interrupts == ()
    assert [i.value for i in state.interrupts] == ["q?"]
    assert state.interrupts[0].id == by_name["foo"].interrupts[0].id
    # the interrupted step saved no checkpoint: the state is the input's plus
    # the step's pending writes
    assert state.metadata == {"source": "input", "step": -1, "parents": {}}
    latest = saver.get_tuple(cfg())
    assert latest is not None
    assert state.config["configurable"]["checkpoint_id"] == latest.checkpoint["id"]
    # named by its id, the same checkpoint shows what it saved: every task is next
    named = app.get_state(state.config)
    assert named.values == {"start": "go"}
    assert named.next == ("foo", "bar", "baz")


def test_get_state_of_an_unknown_thread_is_empty() -> None:
    app = chain(checkpointer=InMemorySaver())
    state = app.get_state(cfg("nobody"))
    assert state.values == {} and state.next == () and state.tasks == ()
    assert state.metadata is None


def test_get_state_history_with_filter_before_and_limit() -> None:
    app = chain(checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    history = list(app.get_state_history(cfg()))
    assert steps(history) == [2, 1, 0, -1]
    # every past checkpoint names the nodes that ran from it
    assert [h.next for h in history] == [(), ("three",), ("two",), ("one",)]
    assert [h.values for h in history][1] == {"a": "x", "b": "x1", "c": "x12"}
    inputs = list(app.get_state_history(cfg(), filter={"source": "input"}))
    assert [meta(h, "source") for h in inputs] == ["input"]
    assert steps(app.get_state_history(cfg(), filter={"step": 1})) == [1]
    assert steps(app.get_state_history(cfg(), limit=2)) == [2, 1]
    before = list(app.get_state_history(cfg(), before=history[1].config))
    assert steps(before) == [0, -1]
    assert steps(app.get_state_history(cfg(), before=history[1].config, limit=1)) == [0]
    assert list(app.get_state_history(cfg("nobody"))) == []


def test_update_state_as_a_node_then_continue() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    calls.clear()
    updated = app.update_state(cfg(), "Y", as_node="one")
    state = app.get_state(cfg())
    assert state.config["configurable"]["checkpoint_id"] == updated["configurable"]["checkpoint_id"]
    assert state.metadata == {"source": "update", "step": 3, "parents": {}}
    assert state.values["b"] == "Y"
    # as if "one" wrote it: its successor runs next, "one" itself does not
    assert state.next == ("two",)
    assert app.invoke(None, cfg()) == {"b": "Y", "c": "Y2", "d": "Y23"}
    assert calls == ["two", "three"]


def test_update_state_with_channel_values_then_continue() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    calls.clear()
    app.update_state(cfg(), {"c": "C"})
    assert app.get_state(cfg()).next == ("three",)
    assert app.invoke(None, cfg()) == {"b": "x1", "c": "C", "d": "C3"}
    assert calls == ["three"]


def test_update_state_on_an_empty_thread_starts_it() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    app.update_state(cfg(), {"b": "B"})
    state = app.get_state(cfg())
    assert state.values == {"b": "B"} and state.next == ("two",)
    assert app.invoke(None, cfg()) == {"b": "B", "c": "B2", "d": "B23"}
    assert calls == ["two", "three"]


def test_invoke_from_a_past_checkpoint_forks_and_reruns_what_follows() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    history = list(app.get_state_history(cfg()))
    at_step0 = next(h for h in history if meta(h) == 0)
    calls.clear()
    # replay: the steps after the checkpoint run again
    assert app.invoke(None, at_step0.config) == {"b": "x1", "c": "x12", "d": "x123"}
    assert calls == ["two", "three"]
    after = list(app.get_state_history(cfg()))
    # as LangGraph writes them: a fork checkpoint (a copy of the one named),
    # then one per step that ran again
    assert len(after) == len(history) + 3
    # the new branch hangs off the named checkpoint; the old one is intact
    fork = next(
        h
        for h in after
        if h.parent_config
        and h.parent_config["configurable"]["checkpoint_id"]
        == at_step0.config["configurable"]["checkpoint_id"]
        and h.config != history[1].config
    )
    assert fork.metadata is not None and fork.metadata["source"] == "fork"
    assert meta(fork) == 1 and fork.values == at_step0.values and fork.next == ("two",)
    assert [meta(h) for h in after[:2]] == [3, 2]
    assert {h.config["configurable"]["checkpoint_id"] for h in history} <= {
        h.config["configurable"]["checkpoint_id"] for h in after
    }


def test_fork_with_update_state_at_a_past_checkpoint() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    app.invoke("x", cfg())
    at_input = list(app.get_state_history(cfg()))[-1]
    calls.clear()
    fork = app.update_state(at_input.config, {"a": "z"})
    assert app.invoke(None, fork) == {"b": "z1", "c": "z12", "d": "z123"}
    assert calls == ["one", "two", "three"]
    # the latest state is the fork's end
    assert app.get_state(cfg()).values["d"] == "z123"


def test_resume_with_the_latest_checkpoint_id_is_a_resume_not_a_replay() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver(), interrupt_after_nodes=["two"])
    app.invoke("x", cfg())
    assert calls == ["one", "two"]
    state = app.get_state(cfg())
    assert app.invoke(None, state.config) == {"b": "x1", "c": "x12", "d": "x123"}
    assert calls == ["one", "two", "three"]


def test_command_resume_with_the_latest_checkpoint_config() -> None:
    calls: list[str] = []
    app = Pregel(
        nodes={
            "ask": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(calls, "ask", lambda v: v + str(interrupt("?"))))
            .write_to("b"),
            "side": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(calls, "side", str.upper))
            .write_to("s"),
        },
        channels={k: LastValue(str) for k in "abs"},
        input_channels="a",
        output_channels=["b", "s"],
        checkpointer=InMemorySaver(),
    )
    app.invoke("x", cfg())
    state = app.get_state(cfg())
    assert app.invoke(Command(resume="!"), state.config) == {"b": "x!", "s": "X"}
    # side finished before the interrupt and is not run again
    assert sorted(calls) == ["ask", "ask", "side"]


# crash recovery (seed 000, section 2.4)


def crashing_graph(counts: Counter[str], fail: dict[str, bool]) -> Pregel:
    """first -> (ok, bad in parallel) -> join; bad fails while fail["on"]."""
    ok_done = threading.Event()

    def ok(v: str) -> str:
        counts["ok"] += 1
        ok_done.set()
        return v + "-ok"

    def bad(v: str) -> str:
        counts["bad"] += 1
        # fail only once ok has finished, so its writes are surely saved
        assert ok_done.wait(5)
        if fail["on"]:
            raise RuntimeError("disk on fire")
        return v + "-bad"

    def first(v: str) -> str:
        counts["first"] += 1
        return v + "-1"

    def join(d: dict[str, str]) -> str:
        counts["join"] += 1
        return f"{d['c']}+{d['d']}"

    return Pregel(
        nodes={
            "first": NodeBuilder().subscribe_only("a").do(first).write_to("b"),
            "ok": NodeBuilder().subscribe_only("b").do(ok).write_to("c"),
            "bad": NodeBuilder().subscribe_only("b").do(bad).write_to("d"),
            "join": NodeBuilder().subscribe_to("c", "d").do(join).write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "b", "c", "d", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_crash_recovery_keeps_the_writes_of_the_tasks_that_succeeded(durability: str) -> None:
    counts: Counter[str] = Counter()
    fail = {"on": True}
    app = crashing_graph(counts, fail)
    with pytest.raises(RuntimeError, match="disk on fire"):
        app.invoke("x", cfg(), durability=durability)
    assert counts == {"first": 1, "ok": 1, "bad": 1}
    assert isinstance(app.checkpointer, InMemorySaver)
    saved = app.checkpointer.get_tuple(cfg())
    assert saved is not None
    # the last checkpoint is step 0's (after "first"); step 1 left pending writes
    assert saved.metadata["step"] == 0
    by_chan = {chan: (tid, value) for tid, chan, value in saved.pending_writes or []}
    assert by_chan["c"][1] == "x-1-ok"
    assert "RuntimeError" in str(by_chan["__error__"][1])
    assert by_chan["c"][0] != by_chan["__error__"][0]
    state = app.get_state(cfg())
    tasks = {t.name: t for t in state.tasks}
    assert tasks["ok"].result == {"c": "x-1-ok"} and tasks["ok"].error is None
    assert tasks["bad"].error is not None and "disk on fire" in str(tasks["bad"].error)
    assert state.next == ("bad",)

    fail["on"] = False
    assert app.invoke(None, cfg(), durability=durability) == "x-1-ok+x-1-bad"
    # ok did not run again: its saved writes were used
    assert counts == {"first": 1, "ok": 1, "bad": 2, "join": 1}
    assert steps(app.get_state_history(cfg()))[0] == 2


def test_crash_recovery_task_ids_are_stable_across_the_restart() -> None:
    counts: Counter[str] = Counter()
    fail = {"on": True}
    app = crashing_graph(counts, fail)
    with pytest.raises(RuntimeError):
        app.invoke("x", cfg())
    before = {t.name: t.id for t in app.get_state(cfg()).tasks}
    ids: dict[str, str] = {}
    fail["on"] = False
    for event in app.stream(None, cfg(), stream_mode="tasks"):
        if "input" in event:
            ids[event["name"]] = event["id"]
    # the step's tasks are shown again, as LangGraph shows them, under the ids
    # they had before the crash; only bad runs again (ok's saved writes stand)
    assert set(ids) == {"ok", "bad", "join"}
    assert ids["bad"] == before["bad"] and ids["ok"] == before["ok"]
    assert counts["ok"] == 1 and counts["bad"] == 2


def test_a_failed_task_stops_the_step_and_raises_with_a_note() -> None:
    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda v: 1 / 0)},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
    )
    with pytest.raises(ZeroDivisionError) as info:
        app.invoke(1)
    notes = getattr(info.value, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("During task with name 'n' and id '")


# interrupts


def test_interrupt_and_resume_with_a_value() -> None:
    calls: list[str] = []

    def ask(v: str) -> str:
        calls.append(v)
        answer = interrupt({"question": f"why {v}?"})
        return f"{v}:{answer}"

    app = Pregel(
        nodes={"ask": NodeBuilder().subscribe_only("a").do(ask).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
    )
    first = app.invoke("x", cfg())
    assert list(first) == ["__interrupt__"]
    (intr,) = first["__interrupt__"]
    assert isinstance(intr, Interrupt) and intr.value == {"question": "why x?"}
    assert len(intr.id) == 32
    assert app.get_state(cfg()).next == ("ask",)
    assert app.invoke(Command(resume="because"), cfg()) == "x:because"
    # the node runs again from the top on resume
    assert calls == ["x", "x"]
    assert app.get_state(cfg()).next == ()


def test_several_interrupts_in_one_node_are_answered_in_order() -> None:
    runs: list[list[Any]] = []

    def survey(v: str) -> list[Any]:
        got = []
        for q in ("name", "age", "city"):
            got.append(interrupt(q))
            runs.append(list(got))
        return got

    app = Pregel(
        nodes={"survey": NodeBuilder().subscribe_only("a").do(survey).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(list)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
    )
    asked = [app.invoke("go", cfg())["__interrupt__"][0]]
    for answer in ("ann", 33):
        asked.append(app.invoke(Command(resume=answer), cfg())["__interrupt__"][0])
    assert [i.value for i in asked] == ["name", "age", "city"]
    # one task, three questions: each its own id, so an answer cannot be
    # taken for another's
    assert len({i.id for i in asked}) == 3
    # the answers so far are saved: the last one globally (NULL task id), all of
    # them, in order, under the task that consumed them
    assert isinstance(app.checkpointer, InMemorySaver)
    saved = app.checkpointer.get_tuple(cfg())
    assert saved is not None and saved.pending_writes is not None
    resumes = [(tid, v) for tid, chan, v in saved.pending_writes if chan == "__resume__"]
    assert resumes[0] == (NULL_TASK_ID, 33)
    assert resumes[1][0] != NULL_TASK_ID and resumes[1][1] == ["ann", 33]
    assert app.invoke(Command(resume="rome"), cfg()) == ["ann", 33, "rome"]
    # earlier answers were replayed in order, never asked again
    assert runs == [["ann"], ["ann"], ["ann", 33], ["ann"], ["ann", 33], ["ann", 33, "rome"]]


def two_askers() -> Pregel:
    return Pregel(
        nodes={
            "a": NodeBuilder()
            .subscribe_only("s")
            .do(lambda v: "A:" + interrupt("qa"))
            .write_to("out"),
            "b": NodeBuilder()
            .subscribe_only("s")
            .do(lambda v: "B:" + interrupt("qb"))
            .write_to("out"),
        },
        channels={"s": LastValue(str), "out": Topic(str, accumulate=True)},
        input_channels="s",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )


def test_parallel_interrupts_are_all_surfaced_and_resumed_by_id() -> None:
    app = two_askers()
    first = app.invoke("go", cfg())["__interrupt__"]
    assert sorted(i.value for i in first) == ["qa", "qb"]
    ids = {i.value: i.id for i in first}
    assert len(set(ids.values())) == 2
    state = app.get_state(cfg())
    assert sorted(state.next) == ["a", "b"]
    assert {i.id for i in state.interrupts} == set(ids.values())
    out = app.invoke(Command(resume={ids["qa"]: "ra", ids["qb"]: "rb"}), cfg())
    assert out == ["A:ra", "B:rb"]


def test_parallel_interrupts_resumed_one_at_a_time() -> None:
    app = two_askers()
    first = app.invoke("go", cfg())["__interrupt__"]
    ids = {i.value: i.id for i in first}
    second = app.invoke(Command(resume={ids["qa"]: "ra"}), cfg())
    assert [i.value for i in second["__interrupt__"]] == ["qb"]
    assert app.get_state(cfg()).next == ("b",)
    # with one interrupt left, a bare value is unambiguous
    assert app.invoke(Command(resume="rb"), cfg()) == ["A:ra", "B:rb"]


def test_a_single_resume_value_for_two_interrupts_is_a_clear_error() -> None:
    app = two_askers()
    first = app.invoke("go", cfg())["__interrupt__"]
    with pytest.raises(ValueError, match="2 interrupts are pending") as info:
        app.invoke(Command(resume="which one?"), cfg())
    for i in first:
        assert i.id in str(info.value)
    # the thread is untouched and can still be resumed properly
    ids = {i.value: i.id for i in first}
    assert app.invoke(Command(resume={ids["qa"]: "1", ids["qb"]: "2"}), cfg()) == ["A:1", "B:2"]


def test_resume_on_a_thread_without_state_is_a_clear_error() -> None:
    app = two_askers()
    with pytest.raises(EmptyInputError):
        app.invoke(Command(resume="x"), cfg("empty"))
    with pytest.raises(EmptyInputError):
        app.invoke(None, cfg("empty"))


@pytest.mark.parametrize(
    ("kwargs", "stops"),
    [
        ({"interrupt_before_nodes": ["two"]}, [["one"], ["one", "two", "three"]]),
        ({"interrupt_after_nodes": ["two"]}, [["one", "two"], ["one", "two", "three"]]),
        (
            {"interrupt_before_nodes": "*"},
            [[], ["one"], ["one", "two"], ["one", "two", "three"]],
        ),
        (
            {"interrupt_after_nodes": "*"},
            [["one"], ["one", "two"], ["one", "two", "three"]],
        ),
    ],
)
def test_static_interrupts_stop_and_resume_with_none(
    kwargs: dict[str, Any], stops: list[list[str]]
) -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver(), **kwargs)
    seen = []
    app.invoke("x", cfg())
    seen.append(list(calls))
    while app.get_state(cfg()).next:
        app.invoke(None, cfg())
        seen.append(list(calls))
    assert seen == stops
    assert app.get_state(cfg()).values["d"] == "x123"


def test_static_interrupts_given_at_invoke_time() -> None:
    calls: list[str] = []
    app = chain(calls, checkpointer=InMemorySaver())
    assert app.invoke("x", cfg(), interrupt_before=["three"]) == {"b": "x1", "c": "x12"}
    assert app.get_state(cfg()).next == ("three",)
    assert app.invoke(None, cfg()) == {"b": "x1", "c": "x12", "d": "x123"}
    app.invoke("y", cfg("2"), interrupt_after=["one"])
    assert app.get_state(cfg("2")).next == ("two",)
    assert calls == ["one", "two", "three", "one"]


def test_interrupt_before_emits_an_empty_interrupt_update() -> None:
    app = chain(checkpointer=InMemorySaver(), interrupt_before_nodes=["two"])
    chunks = list(app.stream("x", cfg(), stream_mode="updates"))
    assert chunks == [{"one": {"b": "x1"}}, {"__interrupt__": ()}]


# stream modes


def test_stream_values_and_updates() -> None:
    app = chain(checkpointer=InMemorySaver())
    # stream's values are the stream channels (all, by default), after each
    # step; as in LangGraph, not for the input a new run writes
    assert list(app.stream("x", cfg("v"), stream_mode="values")) == [
        {"a": "x", "b": "x1"},
        {"a": "x", "b": "x1", "c": "x12"},
        {"a": "x", "b": "x1", "c": "x12", "d": "x123"},
    ]
    # invoke returns the output channels
    assert app.invoke("x", cfg("w")) == {"b": "x1", "c": "x12", "d": "x123"}
    assert list(app.stream("x", cfg("u"), stream_mode="updates")) == [
        {"one": {"b": "x1"}},
        {"two": {"c": "x12"}},
        {"three": {"d": "x123"}},
    ]
    # invoke with another stream mode returns the chunks
    assert app.invoke("x", cfg("i"), stream_mode="updates") == [
        {"one": {"b": "x1"}},
        {"two": {"c": "x12"}},
        {"three": {"d": "x123"}},
    ]


def test_output_keys_select_what_invoke_and_stream_return() -> None:
    app = chain(checkpointer=InMemorySaver())
    assert app.invoke("x", cfg("1"), output_keys="d") == "x123"
    assert app.invoke("x", cfg("2"), output_keys=["a", "c"]) == {"a": "x", "c": "x12"}
    assert list(app.stream("x", cfg("3"), output_keys="c")) == ["x12"]
    with pytest.raises(ValueError, match="'zz'"):
        app.invoke("x", cfg("4"), output_keys="zz")


def test_stream_values_of_a_single_stream_channel_are_bare() -> None:
    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda v: v * 2).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        stream_channels="b",
    )
    assert list(app.stream(4)) == [8]
    assert app.invoke(4) == 8
    assert list(app.stream(4, output_keys=["a", "b"])) == [{"a": 4, "b": 8}]


def test_stream_tasks_start_and_result_events() -> None:
    app = chain(checkpointer=InMemorySaver())
    events = list(app.stream("x", cfg(), stream_mode="tasks"))
    assert len(events) == 6
    starts, results = events[0::2], events[1::2]
    assert [(e["name"], e["input"]) for e in starts] == [
        ("one", "x"),
        ("two", "x1"),
        ("three", "x12"),
    ]
    assert [e["triggers"] for e in starts] == [("a",), ("b",), ("c",)]
    assert [(e["name"], e["result"], e["error"], e["interrupts"]) for e in results] == [
        ("one", {"b": "x1"}, None, []),
        ("two", {"c": "x12"}, None, []),
        ("three", {"d": "x123"}, None, []),
    ]
    assert [s["id"] for s in starts] == [r["id"] for r in results]


def test_stream_tasks_reports_interrupts_and_errors() -> None:
    app = Pregel(
        nodes={
            "ask": NodeBuilder().subscribe_only("a").do(lambda v: interrupt("q")).write_to("b"),
        },
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
    )
    events = list(app.stream("x", cfg(), stream_mode="tasks"))
    assert [e["name"] for e in events] == ["ask", "ask"]
    # as LangGraph 1.2 shapes them: interrupts as dicts, the result as a dict
    assert [i["value"] for i in events[1]["interrupts"]] == ["q"] and events[1]["result"] == {}

    failing = Pregel(
        nodes={"boom": NodeBuilder().subscribe_only("a").do(lambda v: 1 / 0)},
        channels={"a": LastValue(int)},
        input_channels="a",
        output_channels="a",
    )
    got: list[Any] = []
    with pytest.raises(ZeroDivisionError):
        for e in failing.stream(1, stream_mode="tasks"):
            got.append(e)
    assert len(got) == 2 and isinstance(got[1]["error"], ZeroDivisionError)


def test_stream_checkpoints_in_the_get_state_format() -> None:
    saver = InMemorySaver()
    app = chain(checkpointer=saver)
    events = list(app.stream("x", cfg(), stream_mode="checkpoints"))
    assert [(e["metadata"]["source"], e["metadata"]["step"]) for e in events] == [
        ("input", -1),
        ("loop", 0),
        ("loop", 1),
        ("loop", 2),
    ]
    assert [e["next"] for e in events] == [["one"], ["two"], ["three"], []]
    assert events[1]["values"] == {"a": "x", "b": "x1"}
    assert events[0]["parent_config"] is None
    for prev, cur in itertools.pairwise(events):
        assert cur["parent_config"] == prev["config"]
    for e, h in zip(events, reversed(list(app.get_state_history(cfg())))):
        assert (
            e["config"]["configurable"]["checkpoint_id"]
            == h.config["configurable"]["checkpoint_id"]
        )
        assert e["values"] == h.values and e["next"] == list(h.next)
    # the tasks of an event are those that then ran, under the same ids
    pairs = list(app.stream("y", cfg("2"), stream_mode=["checkpoints", "tasks"]))
    planned = [t["id"] for m, e in pairs if m == "checkpoints" for t in e["tasks"]]
    started = [e["id"] for m, e in pairs if m == "tasks" and "input" in e]
    assert planned == started and len(started) == 3


def test_stream_debug_wraps_checkpoints_and_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    app = chain(checkpointer=InMemorySaver())
    events = list(app.stream("x", cfg(), stream_mode="debug"))
    kinds = [(e["type"], e["step"]) for e in events]
    assert kinds == [
        ("checkpoint", -1),
        ("task", 0),
        ("task_result", 0),
        ("checkpoint", 0),
        ("task", 1),
        ("task_result", 1),
        ("checkpoint", 1),
        ("task", 2),
        ("task_result", 2),
        ("checkpoint", 2),
    ]
    assert all(isinstance(e["timestamp"], str) for e in events)
    assert events[2]["payload"]["result"] == {"b": "x1"}
    # debug=True prints the debug events; the requested stream stays as it is
    both = list(app.stream("x", cfg("2"), stream_mode="updates", debug=True))
    assert both == [
        {"one": {"b": "x1"}},
        {"two": {"c": "x12"}},
        {"three": {"d": "x123"}},
    ]
    assert len(capsys.readouterr().out.splitlines()) == 10


def test_stream_custom_from_get_stream_writer() -> None:
    def talk(v: str) -> str:
        write = get_stream_writer()
        write({"progress": 0.5})
        write("done")
        return v + "!"

    app = Pregel(
        nodes={"talk": NodeBuilder().subscribe_only("a").do(talk).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
    )
    assert list(app.stream("x", stream_mode="custom")) == [{"progress": 0.5}, "done"]
    # not streamed: the writer is a no-op and the run is unaffected
    assert app.invoke("x") == "x!"
    assert list(app.stream("x", stream_mode="updates")) == [{"talk": {"b": "x!"}}]


def test_a_node_can_ask_for_its_writer_and_config_by_parameter() -> None:
    def node(v: str, writer: Any, config: dict[str, Any]) -> str:
        writer(config["metadata"]["langgraph_node"])
        return v

    app = Pregel(
        nodes={"named": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
    )
    assert list(app.stream("x", stream_mode="custom")) == ["named"]


def test_get_stream_writer_and_get_config_outside_a_run() -> None:
    assert get_stream_writer()("ignored") is None
    with pytest.raises(RuntimeError, match=r"get_config\(\)"):
        get_config()
    with pytest.raises(RuntimeError, match=r"get_store\(\)"):
        get_store()


def test_get_config_inside_a_node() -> None:
    from pregelkit.store.memory import InMemoryStore

    seen: list[dict[str, Any]] = []
    store = InMemoryStore()

    def node(v: str) -> str:
        seen.append(get_config())
        assert get_store() is store
        return v

    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
        store=store,
    )
    app.invoke("x", cfg("th", user="u1"))
    (config,) = seen
    conf = config["configurable"]
    assert conf["thread_id"] == "th" and conf["user"] == "u1"
    # the task's namespace is "<node>:<task id>", the id of the task planned
    # from the input checkpoint
    at_input = next(h for h in app.get_state_history(cfg("th")) if meta(h) == -1)
    assert conf["checkpoint_ns"] == f"n:{at_input.tasks[0].id}"
    assert config["metadata"]["langgraph_node"] == "n"
    assert config["metadata"]["langgraph_triggers"] == ("a",)


def test_several_modes_at_once_come_as_pairs() -> None:
    def talk(v: str) -> str:
        get_stream_writer()("hi")
        return v + "!"

    app = Pregel(
        nodes={"talk": NodeBuilder().subscribe_only("a").do(talk).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels=["a", "b"],
    )
    chunks = list(app.stream("x", stream_mode=["values", "updates", "custom"]))
    assert chunks == [
        ("custom", "hi"),
        ("updates", {"talk": {"b": "x!"}}),
        ("values", {"a": "x", "b": "x!"}),
    ]
    # a list with one mode still gives pairs
    assert list(app.stream("x", stream_mode=["updates"])) == [("updates", {"talk": {"b": "x!"}})]


# subgraphs


def inner_graph() -> Pregel:
    def ask(v: str) -> str:
        get_stream_writer()(("inner", v))
        return v + str(interrupt("inner question"))

    return Pregel(
        nodes={
            "i1": NodeBuilder().subscribe_only("x").do(lambda v: v + "-i1").write_to("y"),
            "i2": NodeBuilder().subscribe_only("y").do(ask).write_to("z"),
        },
        channels={"x": LastValue(str), "y": LastValue(str), "z": LastValue(str)},
        input_channels="x",
        output_channels="z",
        name="inner",
    )


def outer_graph(inner: Pregel, calls: list[str] | None = None) -> Pregel:
    log = calls if calls is not None else []
    return Pregel(
        nodes={
            "pre": NodeBuilder()
            .subscribe_only("a")
            .do(recorder(log, "pre", lambda v: v + "-pre"))
            .write_to("x"),
            "sub": NodeBuilder().subscribe_only("x").do(inner).write_to("y"),
            "post": NodeBuilder()
            .subscribe_only("y")
            .do(recorder(log, "post", lambda v: v + "-post"))
            .write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "x", "y", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )


def plain_inner() -> Pregel:
    return Pregel(
        nodes={
            "i1": NodeBuilder().subscribe_only("x").do(lambda v: v + "-i1").write_to("y"),
            "i2": NodeBuilder().subscribe_only("y").do(lambda v: v + "-i2").write_to("z"),
        },
        channels={"x": LastValue(str), "y": LastValue(str), "z": LastValue(str)},
        input_channels="x",
        output_channels="z",
    )


def test_a_pregel_as_a_node_runs_nested_in_its_own_namespace() -> None:
    app = outer_graph(plain_inner())
    assert app.invoke("go", cfg()) == "go-pre-i1-i2-post"
    saver = app.checkpointer
    assert isinstance(saver, InMemorySaver)
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(None)}
    (child,) = namespaces - {""}
    assert child.startswith("sub:")
    inner_steps = [
        t.metadata["step"]
        for t in saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": child}})
    ]
    assert inner_steps == [1, 0, -1]
    # the child's checkpoints name the parent checkpoint they ran under
    parent_ids = {t.checkpoint["id"] for t in saver.list(cfg(checkpoint_ns=""))}
    for t in saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": child}}):
        assert t.metadata["parents"][""] in parent_ids
    # the parent's own history is not mixed with the child's
    assert steps(app.get_state_history(cfg())) == [2, 1, 0, -1]


def test_subgraph_chunks_come_with_their_namespace() -> None:
    app = outer_graph(plain_inner())
    chunks = list(app.stream("go", cfg(), stream_mode="updates", subgraphs=True))
    outer = [c for ns, c in chunks if ns == ()]
    inner = [(ns, c) for ns, c in chunks if ns != ()]
    assert outer == [
        {"pre": {"x": "go-pre"}},
        {"sub": {"y": "go-pre-i1-i2"}},
        {"post": {"out": "go-pre-i1-i2-post"}},
    ]
    # a child runs as its node's invoke, so its updates hold its output channel
    # (z) alone, as in LangGraph: i1 wrote none of it
    assert [c for _, c in inner] == [{"i1": None}, {"i2": "go-pre-i1-i2"}]
    (ns,) = {ns for ns, _ in inner}
    assert len(ns) == 1 and ns[0].startswith("sub:")
    # without subgraphs=True, nothing of the child is streamed
    flat = list(app.stream("go", cfg("2"), stream_mode="updates"))
    assert flat == outer
    # several modes: (namespace, mode, chunk) triples
    triples = list(app.stream("go", cfg("3"), stream_mode=["updates", "values"], subgraphs=True))
    assert {len(t) for t in triples} == {3}
    nested = [(m, c) for n, m, c in triples if n != ()]
    assert ("values", "go-pre-i1-i2") in nested and ("updates", {"i1": None}) in nested
    assert ((), "values", {"a": "go", "x": "go-pre", "y": "go-pre-i1-i2"}) in triples


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_interrupt_inside_a_subgraph_surfaces_and_resumes_from_the_parent(
    durability: str,
) -> None:
    calls: list[str] = []
    app = outer_graph(inner_graph(), calls)
    first = app.invoke("go", cfg(), durability=durability)
    assert [i.value for i in first["__interrupt__"]] == ["inner question"]
    state = app.get_state(cfg())
    assert state.next == ("sub",)
    assert [i.value for i in state.interrupts] == ["inner question"]
    chunks = list(
        app.stream(
            Command(resume="!"),
            cfg(),
            stream_mode=["updates", "custom"],
            subgraphs=True,
            durability=durability,
        )
    )
    top = [c for ns, m, c in chunks if ns == () and m == "updates"]
    assert top == [{"sub": {"y": "go-pre-i1!"}}, {"post": {"out": "go-pre-i1!-post"}}]
    nested = [(m, c) for ns, m, c in chunks if ns != ()]
    # the child resumed where it stopped: i1 did not run again, i2 did
    assert nested == [("custom", ("inner", "go-pre-i1")), ("updates", {"i2": "go-pre-i1!"})]
    assert app.get_state(cfg()).values["out"] == "go-pre-i1!-post"
    assert calls == ["pre", "post"]


def test_interrupt_inside_a_subgraph_streams_its_namespace() -> None:
    app = outer_graph(inner_graph())
    chunks = list(app.stream("go", cfg(), stream_mode=["updates", "custom"], subgraphs=True))
    intr = [(ns, c) for ns, m, c in chunks if m == "updates" and "__interrupt__" in c]
    assert [ns for ns, _ in intr][-1] == ()
    assert any(ns and ns[0].startswith("sub:") for ns, _ in intr)
    assert [c["__interrupt__"][0].value for _, c in intr] == ["inner question"] * len(intr)


# retry


def flaky_graph(
    failures: int, exc: type[Exception], **node_policy: Any
) -> tuple[Pregel, list[str]]:
    attempts: list[str] = []

    def flaky(v: str) -> str:
        attempts.append(v)
        if len(attempts) <= failures:
            raise exc(f"attempt {len(attempts)}")
        return v + "!"

    node = NodeBuilder().subscribe_only("a").do(flaky).write_to("b")
    if node_policy:
        node = node.add_retry_policies(*node_policy.get("policies", ()))
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
        retry_policy=node_policy.get("graph", ()),
    )
    return app, attempts


FAST: dict[str, Any] = {"initial_interval": 0.0001, "jitter": False}


def test_retry_on_a_matching_exception() -> None:
    app, attempts = flaky_graph(
        2, ConnectionError, policies=[RetryPolicy(**FAST, retry_on=ConnectionError)]
    )
    assert app.invoke("x") == "x!"
    assert attempts == ["x", "x", "x"]


def test_retry_gives_up_after_max_attempts_with_a_note() -> None:
    app, attempts = flaky_graph(5, ConnectionError, policies=[RetryPolicy(**FAST, max_attempts=3)])
    with pytest.raises(ConnectionError, match="attempt 3") as info:
        app.invoke("x")
    assert attempts == ["x", "x", "x"]
    notes = info.value.__notes__
    assert len(notes) == 1
    assert notes[0].startswith("During task with name 'n' and id '")


def test_no_retry_on_a_non_matching_exception() -> None:
    app, attempts = flaky_graph(
        1, ValueError, policies=[RetryPolicy(**FAST, retry_on=ConnectionError)]
    )
    with pytest.raises(ValueError, match="attempt 1"):
        app.invoke("x")
    assert attempts == ["x"]
    # the default predicate does not retry programming errors either
    app, attempts = flaky_graph(1, ValueError, policies=[RetryPolicy(**FAST)])
    with pytest.raises(ValueError):
        app.invoke("x")
    assert attempts == ["x"]


def test_graph_level_retry_policy() -> None:
    app, attempts = flaky_graph(2, TimeoutError, graph=RetryPolicy(**FAST, retry_on=TimeoutError))
    assert app.invoke("x") == "x!"
    assert len(attempts) == 3


def test_node_policy_wins_over_graph_policy() -> None:
    app, attempts = flaky_graph(
        2,
        TimeoutError,
        policies=[RetryPolicy(**FAST, retry_on=KeyError)],
        graph=RetryPolicy(**FAST, retry_on=TimeoutError),
    )
    with pytest.raises(TimeoutError):
        app.invoke("x")
    assert len(attempts) == 1


@pytest.mark.parametrize(
    "retry_on",
    [
        (KeyError, ConnectionError),
        [ConnectionError],
        lambda e: "attempt" in str(e),
    ],
    ids=["tuple", "list", "predicate"],
)
def test_retry_on_matches_types_sequences_and_predicates(retry_on: Any) -> None:
    app, attempts = flaky_graph(
        2, ConnectionError, policies=[RetryPolicy(**FAST, retry_on=retry_on)]
    )
    assert app.invoke("x") == "x!"
    assert len(attempts) == 3


def test_the_first_matching_policy_decides() -> None:
    policies = [
        RetryPolicy(**FAST, max_attempts=1, retry_on=ValueError),
        RetryPolicy(**FAST, max_attempts=4, retry_on=Exception),
    ]
    app, attempts = flaky_graph(10, ValueError, policies=policies)
    with pytest.raises(ValueError):
        app.invoke("x")
    assert len(attempts) == 1
    app, attempts = flaky_graph(10, ConnectionError, policies=policies)
    with pytest.raises(ConnectionError):
        app.invoke("x")
    assert len(attempts) == 4


def test_writes_of_a_failed_attempt_are_cleared_before_the_next() -> None:
    from pregelkit._internal._current import CURRENT

    attempts: list[int] = []

    def half_writes(v: int) -> int:
        attempts.append(v)
        if len(attempts) == 1:
            scope = CURRENT.get()
            assert scope is not None
            # a write that lands before the failure must not survive it
            scope.task.writes.append(("b", -1))
            raise ConnectionError("after a write")
        return v + 1

    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_only("a")
            .do(half_writes)
            .write_to("b")
            .add_retry_policies(RetryPolicy(**FAST, retry_on=ConnectionError))
        },
        channels={"a": LastValue(int), "b": Topic(int, accumulate=True)},
        input_channels="a",
        output_channels="b",
    )
    assert app.invoke(1) == [2]
    assert attempts == [1, 1]


def test_next_retry_delay_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(
        initial_interval=0.5, backoff_factor=2.0, max_interval=3.0, max_attempts=10, jitter=False
    )
    delays = [next_retry_delay([policy], ConnectionError(), n) for n in range(1, 7)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert next_retry_delay([policy], ConnectionError(), 10) is None
    other = RetryPolicy(initial_interval=1.0, backoff_factor=3.0, max_interval=100.0, jitter=False)
    assert [next_retry_delay([other], ConnectionError(), n) for n in (1, 2, 3)] == [1.0, 3.0, None]


def test_next_retry_delay_jitter_stays_within_one_second() -> None:
    random.seed(1234)
    policy = RetryPolicy(
        initial_interval=0.5, backoff_factor=2.0, max_interval=2.0, max_attempts=10, jitter=True
    )
    for attempt, base in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 2.0)]:
        samples = [next_retry_delay([policy], ConnectionError(), attempt) for _ in range(200)]
        assert all(s is not None and base <= s <= base + 1 for s in samples)
        assert len(set(samples)) > 100


def test_next_retry_delay_without_a_matching_policy_is_none() -> None:
    policy = RetryPolicy(retry_on=KeyError)
    assert next_retry_delay([policy], ValueError(), 1) is None
    assert next_retry_delay([], ValueError(), 1) is None
    # default_retry_on: transient errors yes, programming errors no
    assert next_retry_delay([RetryPolicy(jitter=False)], ConnectionError(), 1) == 0.5
    assert next_retry_delay([RetryPolicy(jitter=False)], TypeError(), 1) is None


def test_resume_map_naming_no_pending_interrupt_is_refused_and_maps_are_saved() -> None:
    def ask(x: int) -> int:
        return int(interrupt("how many?"))

    saver = InMemorySaver()
    app = Pregel(
        nodes={"ask": NodeBuilder().subscribe_only("a").do(ask).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        checkpointer=saver,
    )
    config = {"configurable": {"thread_id": "t"}}
    pending = app.invoke(1, config)["__interrupt__"]
    typo = "0" * 32
    with pytest.raises(ValueError, match=f"not pending: \\['{typo}'\\]"):
        app.invoke(Command(resume={typo: 5}), config)
    assert app.get_state(config).next == ("ask",)  # nothing was lost or run

    answers = {pending[0].id: 7}
    interrupted = saver.get_tuple(config)
    assert interrupted is not None
    assert app.invoke(Command(resume=answers), config) == 7
    # the answers were saved beside the interrupted checkpoint, as a single value is
    saved = saver.get_tuple(interrupted.config)
    assert saved is not None and saved.pending_writes is not None
    assert ("00000000-0000-0000-0000-000000000000", "__resume__", answers) in saved.pending_writes


def test_a_resume_can_also_update_channels_and_bad_names_are_refused() -> None:
    def ask(x: int) -> int:
        return x + int(interrupt("how much?"))

    app = Pregel(
        nodes={"ask": NodeBuilder().subscribe_only("a").do(ask).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int), "note": LastValue(str)},
        input_channels="a",
        output_channels=["b", "note"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    app.invoke(1, config)
    with pytest.raises(
        InvalidUpdateError, match=r"unknown channel 'nope'; channels: \['a', 'b', 'note'\]"
    ):
        app.invoke(Command(resume=2, update={"nope": 1}), config)
    assert app.invoke(Command(resume=2, update={"note": "hi"}), config) == {"b": 3, "note": "hi"}
    assert app.get_state(config).values == {"a": 1, "b": 3, "note": "hi"}
