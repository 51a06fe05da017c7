"""Behaviours that match LangGraph's (issue 13, section 3): stream shapes,
update_state as the input, deprecation warnings, what tasks may be."""

from __future__ import annotations

import functools
import importlib
import sys
import uuid
import warnings
from typing import Any, TypedDict

import pytest

from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import GraphDrained
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel.debug import map_debug_tasks
from pregelkit.runtime import ExecutionInfo, RunControl, Runtime, ServerInfo
from pregelkit.types import Command, GraphOutput, Interrupt, RetryPolicy, interrupt
from pregelkit.warnings import (
    LangGraphDeprecatedSinceV05,
    LangGraphDeprecatedSinceV10,
    LangGraphDeprecatedSinceV11,
    LangGraphDeprecationWarning,
)


class Context(TypedDict):
    user: str


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def writer_reader(reads: list[Any]) -> Pregel:
    """``writer`` reads ``a`` and writes ``b``; ``reader`` reads ``b``."""
    return Pregel(
        nodes={
            "writer": NodeBuilder().subscribe_only("a").do(lambda v: v + "!").write_to("b"),
            "reader": NodeBuilder().subscribe_only("b").do(reads.append),
        },
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels=["b"],
        checkpointer=InMemorySaver(),
    )


# update_state as the input


def test_update_state_as_input_writes_an_input_checkpoint_that_runs_its_readers() -> None:
    reads: list[Any] = []
    app = writer_reader(reads)
    app.invoke("x", cfg())
    first = next(s for s in app.get_state_history(cfg()) if s.metadata["step"] == -1)
    fork = app.update_state(first.config, "y", as_node="__input__")
    state = app.get_state(fork)
    assert state.metadata is not None and state.metadata["source"] == "input"
    assert state.next == ("writer",)
    assert app.invoke(None, fork) == {"b": "y!"}
    assert reads == ["x!", "y!"]


def test_update_state_as_input_without_input_names_the_input_channels() -> None:
    app = writer_reader([])
    app.invoke("x", cfg())
    with pytest.raises(Exception, match="no input for the input channels"):
        app.update_state(cfg(), None, as_node="__input__")


def test_a_run_from_an_update_checkpoint_does_not_fork_it_again() -> None:
    reads: list[Any] = []
    app = writer_reader(reads)
    app.invoke("x", cfg())
    edited = app.update_state(cfg(), "z!", as_node="writer")
    app.invoke(None, edited)
    sources = [s.metadata["source"] for s in app.get_state_history(cfg()) if s.metadata]
    # an update already starts a branch: LangGraph forks only other checkpoints
    assert sources == ["loop", "update", "loop", "loop", "input"]
    assert reads == ["x!", "z!"]


def test_update_state_without_as_node_infers_the_last_node_to_run() -> None:
    reads: list[Any] = []
    app = writer_reader(reads)
    app.invoke("x", cfg())
    # "reader" read the newest version: the update is made as it, so nothing
    # runs next; a dict keeps naming channels
    app.update_state(cfg(), "ignored by reader")
    assert app.get_state(cfg()).next == ()
    app.update_state(cfg(), {"b": "y"})
    assert app.get_state(cfg()).next == ("reader",)


# stream shapes


def test_stream_version_v2_yields_typed_parts_with_interrupts_apart() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> dict[str, Any]:
        return {"answer": interrupt("ask")}

    parts = list(flow.stream(1, cfg(), stream_mode=["values", "updates"], version="v2"))
    assert [p["type"] for p in parts] == ["updates", "values"]
    assert all(p["ns"] == () for p in parts)
    values = parts[-1]
    assert values["data"] == {} and [i.value for i in values["interrupts"]] == ["ask"]
    # the raw payload of other consumers is not changed
    assert "__interrupt__" in parts[0]["data"]
    done = flow.invoke(Command(resume="yes"), cfg(), version="v2")
    assert done == GraphOutput(value={"answer": "yes"}, interrupts=())


def test_invoke_version_v2_returns_graph_output_with_the_interrupts() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> int:
        return interrupt("ask")

    out = flow.invoke(1, cfg(), version="v2")
    assert isinstance(out, GraphOutput) and [i.value for i in out.interrupts] == ["ask"]
    with pytest.warns(LangGraphDeprecatedSinceV11, match="result\\[key\\]"):
        assert out["__interrupt__"] == out.interrupts
    with pytest.warns(LangGraphDeprecatedSinceV11, match="key in result"):
        assert "__interrupt__" in out
    with pytest.raises(ValueError, match="version must be"):
        flow.invoke(1, cfg("2"), version="v3")


def test_print_mode_prints_modes_it_does_not_stream(capsys: pytest.CaptureFixture[str]) -> None:
    @entrypoint()
    def flow(x: int) -> int:
        return x + 1

    assert list(flow.stream(1, stream_mode="updates", print_mode="values")) == [{"flow": 2}]
    printed = capsys.readouterr().out
    assert "[values]" in printed and "2" in printed and "[updates]" not in printed
    assert flow.invoke(1, print_mode=["updates"]) == 2
    assert "[updates]" in capsys.readouterr().out


def test_task_results_are_dicts_of_their_streamed_writes() -> None:
    @task
    def falsy() -> bool:
        return False

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> None:
        falsy().result()
        interrupt("stop")

    events = list(flow.stream(1, cfg(), stream_mode="tasks"))
    results = [e for e in events if "result" in e]
    assert results[0]["result"] == {"__return__": False}
    assert results[1]["result"] == {}
    (asked,) = results[1]["interrupts"]
    assert asked["value"] == "stop" and set(asked) == {"value", "id", "response_schema"}
    checkpoint = next(
        e for e in flow.stream(1, cfg("u"), stream_mode="debug") if e["type"] == "checkpoint"
    )
    assert checkpoint["payload"]["config"]["configurable"]["thread_id"] == "u"


def test_task_payload_carries_the_callers_metadata_and_tags_only() -> None:
    class FakeTask:
        id, name, input, triggers = "t1", "tools", None, ("x",)
        config = {
            "metadata": {"agent": "w", "langgraph_step": 1, "thread_id": "t"},
            "tags": ["seq:step:1", "mine"],
        }

    (payload,) = map_debug_tasks([FakeTask()])  # type: ignore[list-item]
    assert payload["metadata"] == {"agent": "w", "tags": ["mine"]}
    FakeTask.config = {"metadata": {"langgraph_node": "n"}, "tags": ["seq:step:2"]}
    (payload,) = map_debug_tasks([FakeTask()])  # type: ignore[list-item]
    assert "metadata" not in payload


# deprecations, under LangGraph's warning classes


def test_deprecated_names_warn_with_langgraphs_classes() -> None:
    with pytest.warns(LangGraphDeprecatedSinceV10, match="pregelkit.types import Send"):
        from pregelkit.constants import Send  # noqa: F401
    with pytest.warns(LangGraphDeprecatedSinceV10, match="now private"):
        from pregelkit.constants import PREVIOUS  # noqa: F401
    with pytest.raises(ImportError):
        from pregelkit.constants import NoSuchName  # type: ignore[attr-defined]  # noqa: F401
    sys.modules.pop("pregelkit.pregel.types", None)
    with pytest.warns(LangGraphDeprecatedSinceV10, match="pregelkit.pregel.types"):
        importlib.import_module("pregelkit.pregel.types")
    with pytest.warns(LangGraphDeprecatedSinceV10, match="`interrupt_id` is deprecated"):
        assert Interrupt(value=1, id="i").interrupt_id == "i"
    warning = LangGraphDeprecatedSinceV10("gone soon.")
    assert isinstance(warning, LangGraphDeprecationWarning | DeprecationWarning)
    assert str(warning) == "gone soon. Deprecated in LangGraph V1.0 to be removed in V2.0."


def test_retry_and_config_schema_keywords_still_work_with_a_warning() -> None:
    policy = RetryPolicy(max_attempts=2)
    with pytest.warns(LangGraphDeprecatedSinceV05, match="retry_policy"):

        @task(retry=policy)  # type: ignore[call-overload]
        def t(x: int) -> int:
            return x

    with (
        pytest.warns(LangGraphDeprecatedSinceV10, match="context_schema"),
        pytest.warns(LangGraphDeprecatedSinceV05, match="retry_policy"),
    ):

        @entrypoint(config_schema=dict, retry=policy)  # type: ignore[call-arg]
        def flow(x: int) -> int:
            return t(x).result()

    assert flow.context_schema is dict and flow.invoke(3) == 3
    with pytest.raises(TypeError, match="retyr"):
        entrypoint(retyr=policy)  # type: ignore[call-arg]
    with pytest.warns(LangGraphDeprecatedSinceV10, match="config_type"):
        app = Pregel(
            nodes={"n": NodeBuilder().subscribe_only("a").write_to("b")},
            channels={"a": LastValue(int), "b": LastValue(int)},
            input_channels="a",
            output_channels="b",
            config_type=Context,
        )
    assert app.context_schema is Context
    with pytest.warns(LangGraphDeprecatedSinceV10, match="get_context_jsonschema"):
        assert app.config_schema() is not None


def test_no_deprecation_warning_on_the_current_names() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from pregelkit.constants import END, START  # noqa: F401

        @task(retry_policy=RetryPolicy())
        def t(x: int) -> int:
            return x


# what a task may be


def test_bound_methods_and_partials_are_tasks_named_after_their_function() -> None:
    class Greeter:
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        def greet(self, name: str) -> str:
            return f"{self.greeting} {name}"

    def join(sep: str, a: str, b: str) -> str:
        return f"{a}{sep}{b}"

    greet = task(Greeter("hi").greet)
    joined = task(functools.partial(join, "-"))

    @entrypoint()
    def flow(name: str) -> str:
        return joined(greet(name).result(), "x").result()

    assert list(flow.stream("bo", stream_mode="updates")) == [
        {"greet": "hi bo"},
        {"join": "hi bo-x"},
        {"flow": "hi bo-x"},
    ]


def test_batch_passes_invoke_keywords_on_and_still_refuses_typos() -> None:
    @entrypoint()
    def double(x: int) -> int:
        return 2 * x

    assert double.batch([1, 2], output_keys="__end__") == [2, 4]
    with pytest.raises(TypeError, match="did you mean 'durability'"):
        double.batch([1], durabilty="sync")


# Runtime.control


def test_runtime_control_drains_the_run_it_belongs_to() -> None:
    @task
    def step(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int, runtime: Runtime) -> int:
        assert runtime.control is not None
        runtime.control.request_drain("deploy")
        return step(x).result()

    with pytest.raises(GraphDrained, match="deploy"):
        flow.invoke(1, cfg())
    mine = RunControl()

    @entrypoint()
    def sees(x: int, runtime: Runtime) -> bool:
        return runtime.control is mine

    assert sees.invoke(1, control=mine) is True
    assert Runtime(control=mine).merge(Runtime()).control is mine


def test_runtime_execution_info_says_where_and_which_attempt() -> None:
    seen: list[ExecutionInfo] = []

    @task(retry_policy=RetryPolicy(max_attempts=2, initial_interval=0, jitter=False))
    def flaky(x: int, runtime: Runtime) -> int:
        assert runtime.execution_info is not None
        seen.append(runtime.execution_info)
        if runtime.execution_info.node_attempt == 1:
            raise ConnectionError("first attempt fails")
        return x

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int, runtime: Runtime) -> int:
        assert runtime.server_info is None
        return flaky(x).result()

    assert flow.invoke(5, cfg("e")) == 5
    first, second = seen
    assert (first.node_attempt, second.node_attempt) == (1, 2)
    assert first.node_first_attempt_time == second.node_first_attempt_time is not None
    assert first.thread_id == "e" and first.task_id == second.task_id and first.checkpoint_id
    assert first.patch(node_attempt=3).node_attempt == 3 and first.node_attempt == 1
    server = ServerInfo(assistant_id="a", graph_id="g")
    assert Runtime(server_info=server).merge(Runtime()).server_info is server


def test_interrupts_made_before_langgraph_1_keep_the_id_their_namespace_gives() -> None:
    legacy = Interrupt(value="abc", resumable=True, when="during", ns=["a:b", "c:d"])
    assert legacy == Interrupt.from_ns(value="abc", ns="a:b|c:d")
    assert Interrupt("v", "given", ns=["x"]).id == "given"
    with pytest.raises(TypeError, match="nss"):
        Interrupt("v", nss=["x"])


def test_debug_stream_of_a_resume_shows_where_it_starts_and_the_replayed_calls() -> None:
    @task
    def falsy() -> bool:
        return False

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> int:
        falsy().result()
        return interrupt("stop")

    config = {"configurable": {"thread_id": uuid.uuid4()}}
    list(flow.stream(1, config, stream_mode="debug"))
    resumed = list(flow.stream(Command(resume=2), config, stream_mode="debug"))
    kinds = [(e["type"], e["step"], e["payload"].get("name")) for e in resumed]
    # the checkpoint resumed from (with its interrupt), the entrypoint, the
    # recorded call starting again (its result is the record: no task_result)
    assert kinds == [
        ("checkpoint", -1, None),
        ("task", 0, "flow"),
        ("task", 0, "falsy"),
        ("task_result", 0, "flow"),
        ("checkpoint", 0, None),
    ]
    (waiting,) = resumed[0]["payload"]["tasks"]
    assert [i["value"] for i in waiting["interrupts"]] == ["stop"]
    assert resumed[0]["payload"]["config"]["configurable"]["thread_id"] == str(
        config["configurable"]["thread_id"]
    )
    assert flow.get_state(config).values == 2


def test_a_task_sees_its_thread_and_step_in_its_config_metadata() -> None:
    from pregelkit.config import get_config

    seen: dict[str, dict[str, Any]] = {}

    @task
    def t(x: int) -> int:
        seen["task"] = dict(get_config()["metadata"])
        return x

    @entrypoint(checkpointer=InMemorySaver())
    def wf(x: int) -> int:
        seen["entry"] = dict(get_config()["metadata"])
        return t(x).result()

    wf.invoke(1, {"configurable": {"thread_id": "th"}, "metadata": {"m": 1}})
    # LangGraph 1.2.22's keys, in its order
    assert list(seen["entry"]) == [
        "m",
        "thread_id",
        "langgraph_step",
        "langgraph_node",
        "langgraph_triggers",
        "langgraph_path",
        "langgraph_checkpoint_ns",
    ]
    assert (seen["entry"]["thread_id"], seen["entry"]["langgraph_step"]) == ("th", 0)
    assert (seen["task"]["thread_id"], seen["task"]["langgraph_node"]) == ("th", "t")

    def node(v: int) -> int:
        seen["node"] = dict(get_config()["metadata"])
        return v + 1

    def again(v: int) -> int:
        seen["again"] = dict(get_config()["metadata"])
        return v

    app = Pregel(
        nodes={
            "n": NodeBuilder().subscribe_only("a").do(node).write_to("b"),
            "m": NodeBuilder().subscribe_only("b").do(again).write_to("c"),
        },
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels="c",
    )
    assert app.invoke(1) == 2
    # no thread, no thread_id; the step is the superstep the node ran in
    assert "thread_id" not in seen["node"]
    assert (seen["node"]["langgraph_step"], seen["again"]["langgraph_step"]) == (0, 1)
