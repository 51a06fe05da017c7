"""Names users import from LangGraph, under the same paths in pregelkit, with
the same signatures and behaviour (issue 13, section 2)."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import uuid
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pregelkit._internal._jsonschema import json_schema
from pregelkit._internal._typing import MISSING as MISSING_VALUE
from pregelkit.channels import LastValue, Topic
from pregelkit.checkpoint.base import (
    copy_checkpoint,
    create_checkpoint,
    empty_checkpoint,
    get_checkpoint_id,
    get_checkpoint_metadata,
    get_serializable_checkpoint_metadata,
)
from pregelkit.checkpoint.base.id import uuid6
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer
from pregelkit.config import RunnableConfig
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel.debug import (
    map_debug_task_results,
    map_task_result_writes,
    rm_pregel_keys,
)
from pregelkit.runtime import DEFAULT_RUNTIME, Runtime, get_runtime
from pregelkit.types import Command, Interrupt, Send, StateUpdate, interrupt


class State(TypedDict):
    a: int
    b: list[str]


class Loose(TypedDict):
    a: int
    b: NotRequired[list[str]]


class Decision(TypedDict):
    approved: bool


# checkpoint.base


def test_uuid6_is_time_ordered_and_takes_node_and_clock_seq() -> None:
    ids = [uuid6(clock_seq=i) for i in range(50)]
    assert all(isinstance(i, uuid.UUID) and i.version == 6 for i in ids)
    assert [str(i) for i in ids] == sorted(str(i) for i in ids)
    assert uuid6(node=0xABC).node == 0xABC
    assert uuid6(clock_seq=5).clock_seq & 0x3FFF == 5


def test_create_checkpoint_keeps_versioned_nonempty_channels() -> None:
    base = empty_checkpoint()
    base["channel_versions"].update(a=1, empty=1)
    a = LastValue(int)
    a.update([7])
    new = create_checkpoint(base, {"a": a, "empty": LastValue(int), "unversioned": a}, 3)
    assert new["channel_values"] == {"a": 7}
    assert new["id"] > base["id"]
    assert create_checkpoint(base, None, 1, id="fixed")["id"] == "fixed"
    copied = copy_checkpoint(new)
    copied["channel_values"]["a"] = 0
    assert new["channel_values"] == {"a": 7}


def test_checkpoint_metadata_helpers() -> None:
    config: RunnableConfig = {
        "configurable": {"thread_id": "t", "checkpoint_id": "c"},
        "metadata": {"user": "ann", "__hidden": 1, "obj": object()},
    }
    assert get_checkpoint_id(config) == "c"
    meta = get_checkpoint_metadata(config, {"source": "loop", "step": 1, "writes": {"x": 1}})
    assert meta["user"] == "ann" and "__hidden" not in meta and "obj" not in meta  # type: ignore[typeddict-item]
    serializable = get_serializable_checkpoint_metadata(config, {"source": "loop", "writes": {}})
    assert "writes" not in serializable and serializable["source"] == "loop"


def test_serde_types_name_the_channels_the_engine_writes() -> None:
    """A saver written for LangGraph finds pending Sends under ``TASKS``."""
    from pregelkit.checkpoint.serde.types import TASKS

    app = Pregel(
        nodes={
            "fan": NodeBuilder().subscribe_only("n").do(lambda n: [Send("w", i) for i in range(n)]),
            "w": NodeBuilder().do(lambda i: i * 10).write_to("out"),
        },
        channels={"n": LastValue(int), "out": Topic(int, accumulate=True)},
        input_channels="n",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "sends"}}
    assert app.invoke(2, config) == [0, 10]
    first = list(app.checkpointer.list(config))[-1]  # type: ignore[union-attr]
    assert [(c, v) for _, c, v in first.pending_writes or ()] == [
        (TASKS, Send("w", 0)),
        (TASKS, Send("w", 1)),
    ]


# errors


def test_error_classes_have_langgraphs_bases() -> None:
    import pregelkit.errors as errors

    bases = {
        "GraphRecursionError": RecursionError,
        "InvalidUpdateError": Exception,
        "EmptyInputError": Exception,
        "TaskNotFound": Exception,
        "GraphBubbleUp": Exception,
        "GraphInterrupt": errors.GraphBubbleUp,
        "NodeInterrupt": errors.GraphInterrupt,
        "ParentCommand": errors.GraphBubbleUp,
        "GraphDrained": errors.GraphBubbleUp,
        "UnknownInterruptError": Exception,
        "NodeCancelledError": Exception,
        "EmptyChannelError": Exception,
    }
    for name, base in bases.items():
        cls = getattr(errors, name)
        assert name in errors.__all__
        assert cls.__bases__ == (base,), name
    err = errors.UnknownInterruptError(
        "no", reason="not_pending", interrupt_ids=["a"], pending_ids=["b"]
    )
    assert (err.reason, err.interrupt_ids, err.pending_ids) == ("not_pending", ("a",), ("b",))
    assert errors.GraphDrained().reason == "shutdown"
    assert str(errors.NodeCancelledError("n")) == "Node 'n' raised asyncio.CancelledError"
    assert errors.NodeError("n", ValueError()).node == "n"
    assert "errors/GRAPH_RECURSION_LIMIT" in errors.create_error_message(
        message="m", error_code=errors.ErrorCode.GRAPH_RECURSION_LIMIT
    )
    assert errors.is_invalid_resume(ValueError()) is False


def test_node_interrupt_stops_a_workflow_and_warns() -> None:
    from pregelkit.errors import NodeInterrupt

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> int:
        if x < 0:
            raise NodeInterrupt("negative input")
        return x

    config = {"configurable": {"thread_id": "1"}}
    with pytest.warns(DeprecationWarning, match="NodeInterrupt is deprecated"):
        out = flow.invoke(-1, config)
    assert [i.value for i in out["__interrupt__"]] == ["negative input"]


# types


def test_state_update_fields() -> None:
    update = StateUpdate({"a": 1})
    assert update == ({"a": 1}, None, None)
    assert StateUpdate._fields == ("values", "as_node", "task_id")


def test_command_prints_as_langgraph_prints_it() -> None:
    # the fields that are set, in field order (LangGraph 1.2.22's text)
    assert repr(Command(resume=1)) == "Command(resume=1)"
    assert repr(Command(goto="x", update={"a": 1})) == "Command(update={'a': 1}, goto='x')"
    assert repr(Command(graph=Command.PARENT, goto="n")) == "Command(graph='__parent__', goto='n')"
    assert repr(Command()) == "Command()"


def test_interrupt_fields_repr_and_deprecated_interrupt_id() -> None:
    plain = Interrupt("ask", id="i1")
    assert repr(plain) == "Interrupt(value='ask', id='i1', response_schema=None)"
    schema = {"type": "string"}
    assert repr(Interrupt("ask", id="i1", response_schema=schema)) == (
        "Interrupt(value='ask', id='i1', response_schema={'type': 'string'})"
    )
    with pytest.warns(DeprecationWarning, match="Use `id` instead"):
        assert plain.interrupt_id == "i1"
    with pytest.raises(TypeError):
        Interrupt("ask", "i1", schema)  # type: ignore[misc]  # keyword-only, as in LangGraph


def test_interrupt_pickles_old_and_new_shapes() -> None:
    new = Interrupt("v", id="x", response_schema={"type": "integer"})
    assert pickle.loads(pickle.dumps(new)) == new
    old = Interrupt.__new__(Interrupt)
    old.__setstate__(("v", "x"))  # what interrupts saved before response_schema hold
    assert old == Interrupt("v", id="x")


def test_interrupt_response_schema_rides_on_the_interrupt() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> Any:
        return interrupt("approve?", response_schema=Decision)

    config = {"configurable": {"thread_id": "1"}}
    (surfaced,) = flow.invoke(1, config)["__interrupt__"]
    assert surfaced.response_schema == {
        "$defs": {
            "Decision": {
                "properties": {"approved": {"title": "Approved", "type": "boolean"}},
                "required": ["approved"],
                "title": "Decision",
                "type": "object",
            }
        },
        "$ref": "#/$defs/Decision",
    }
    assert flow.invoke(Command(resume={"approved": True}), config) == {"approved": True}
    sig = inspect.signature(interrupt)
    assert sig.parameters["response_schema"].kind is inspect.Parameter.KEYWORD_ONLY


# runtime and config


def test_runtime_merge_override_default_and_get_runtime() -> None:
    def writer(_: Any) -> None:
        return None

    base = Runtime(context={"user": "a"}, store="s1")
    merged = base.merge(Runtime(store="s2", stream_writer=writer))
    assert (merged.context, merged.store, merged.stream_writer) == ({"user": "a"}, "s2", writer)
    assert base.merge(DEFAULT_RUNTIME) == base
    assert base.override(previous=3).previous == 3
    with pytest.raises(TypeError):
        base.override(nope=1)
    assert DEFAULT_RUNTIME.context is None and DEFAULT_RUNTIME.store is None

    @task
    def inside() -> Any:
        return get_runtime().previous

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int, previous: Any = None) -> Any:
        return inside().result()

    config = {"configurable": {"thread_id": "1"}}
    assert flow.invoke(1, config) is None
    assert flow.invoke(2, config) is None  # the previous return value was None
    with pytest.raises(RuntimeError, match="get_runtime"):
        get_runtime()


# pregel.debug


def test_debug_payload_helpers() -> None:
    assert map_task_result_writes([("a", 1), ("b", 2), ("a", 3), ("a", 4)]) == {
        "a": {"$writes": [1, 3, 4]},
        "b": 2,
    }

    class FakeTask:
        id, name = "t1", "node"

    writes = [("out", 1), ("other", 2), ("__interrupt__", [Interrupt("q", id="i")])]
    (payload,) = map_debug_task_results((FakeTask, writes), "out")  # type: ignore[arg-type]
    assert payload == {
        "id": "t1",
        "name": "node",
        "error": None,
        "result": {"out": 1},
        "interrupts": [{"value": "q", "id": "i", "response_schema": None}],
    }
    assert rm_pregel_keys({"configurable": {"thread_id": "t", "__pregel_x": 1}, "tags": []}) == {
        "configurable": {"thread_id": "t"}
    }


# constructors and methods


class _ClosingDict(defaultdict):  # type: ignore[type-arg]
    """A table that knows whether the saver entered and left it."""

    entered = 0
    exited = 0

    def __enter__(self) -> _ClosingDict:
        type(self).entered += 1
        return self

    def __exit__(self, *exc: object) -> None:
        type(self).exited += 1


def test_inmemory_saver_serde_and_factory() -> None:
    serde = JsonPlusSerializer()
    saver = InMemorySaver(serde=serde, factory=_ClosingDict)
    assert saver.serde is serde and isinstance(saver.storage, _ClosingDict)
    assert _ClosingDict.entered == 3

    @entrypoint(checkpointer=saver)
    def flow(x: int) -> int:
        return x + 1

    with saver:
        assert flow.invoke(1, {"configurable": {"thread_id": "1"}}) == 2
        assert flow.get_state({"configurable": {"thread_id": "1"}}).values == 2
    assert _ClosingDict.exited == 3


def test_schemas_from_type_hints_match_langgraphs() -> None:
    @entrypoint()
    def flow(x: State) -> dict[str, int]:
        return {}

    assert flow.input_schema is State and flow.output_schema == dict[str, int]
    assert flow.get_input_jsonschema() == {
        "$defs": {
            "State": {
                "properties": {
                    "a": {"title": "A", "type": "integer"},
                    "b": {"items": {"type": "string"}, "title": "B", "type": "array"},
                },
                "required": ["a", "b"],
                "title": "State",
                "type": "object",
            }
        },
        "$ref": "#/$defs/State",
        "title": "LangGraphInput",
    }
    assert flow.get_output_jsonschema() == {
        "additionalProperties": {"type": "integer"},
        "title": "LangGraphOutput",
        "type": "object",
    }

    # NotRequired (under this module's `from __future__ import annotations`
    # too): the key's own type, and not required, as pydantic writes it
    assert json_schema(Loose)["$defs"]["Loose"] == {
        "properties": {
            "a": {"title": "A", "type": "integer"},
            "b": {"items": {"type": "string"}, "title": "B", "type": "array"},
        },
        "required": ["a"],
        "title": "Loose",
        "type": "object",
    }

    @entrypoint()
    def final(x: int | None) -> entrypoint.final[str, int]:
        return entrypoint.final("a", 1)

    assert final.get_input_jsonschema() == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "title": "LangGraphInput",
    }
    assert final.get_output_jsonschema() == {"title": "LangGraphOutput", "type": "string"}

    node = NodeBuilder().subscribe_only("a").do(lambda x: str(x)).write_to("b")
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(str), "t": Topic(str)},
        input_channels=["a", "t"],
        output_channels=["b"],
    )
    assert app.get_input_jsonschema() == {
        "properties": {
            "a": {"default": None, "title": "A", "type": "integer"},
            "t": {
                "anyOf": [{"type": "string"}, {"items": {"type": "string"}, "type": "array"}],
                "default": None,
                "title": "T",
            },
        },
        "title": "LangGraphInput",
        "type": "object",
    }
    assert app.get_output_jsonschema() == {
        "properties": {"b": {"default": None, "title": "B", "type": "string"}},
        "title": "LangGraphOutput",
        "type": "object",
    }
    assert app.input_schema.__annotations__.keys() == {"a", "t"}


def test_map_runs_the_graph_on_each_item() -> None:
    @entrypoint()
    def double(x: int) -> int:
        return 2 * x

    assert double.map().invoke([1, 2, 3]) == [2, 4, 6]
    outer = Pregel(
        nodes={"each": NodeBuilder().subscribe_only("xs").do(double.map()).write_to("ys")},
        channels={"xs": LastValue(list), "ys": LastValue(list)},
        input_channels="xs",
        output_channels="ys",
    )
    assert outer.invoke([5, 6]) == [10, 12]

    import asyncio

    assert asyncio.run(double.map().ainvoke([4])) == [8]


def test_postgres_saver_through_a_pipeline(postgres_database: Callable[[str], str]) -> None:
    postgres_dsn = postgres_database("pregelkit_compat_pipe")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        PostgresSaver(conn).setup()
        with conn.pipeline() as pipe:
            saver = PostgresSaver(conn, pipe, JsonPlusSerializer())
            assert saver.pipe is pipe

            @task
            def inc(x: int) -> int:
                return x + 1

            @entrypoint(checkpointer=saver)
            def flow(x: int) -> int:
                return inc(x).result() + inc(x + 10).result()

            config = {"configurable": {"thread_id": f"pipe-{uuid.uuid4()}"}}
            assert flow.invoke(1, config) == 14
            assert flow.get_state(config).values == 14
    with (
        ConnectionPool(postgres_dsn, open=True) as pool,
        psycopg.connect(postgres_dsn, autocommit=True) as other,
        other.pipeline() as pipe,
        pytest.raises(ValueError, match="not a ConnectionPool"),
    ):
        PostgresSaver(pool, pipe)


def test_new_modules_load_lazily() -> None:
    code = (
        "import sys, pregelkit.func; "
        "print([m for m in ('pregelkit.pregel.debug', 'pregelkit._internal._jsonschema', "
        "'pregelkit.checkpoint.base.id') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_runnable_config_is_a_plain_dict() -> None:
    assert RunnableConfig == dict[str, Any]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Interrupt("x").id == ""


# channels.DeltaChannel and the saver's history helper


def _extend(state: list[int], writes: list[int]) -> list[int]:
    return [*state, *writes]


def test_delta_channel_folds_batches_and_overwrites() -> None:
    from pregelkit.channels import DeltaChannel
    from pregelkit.errors import InvalidUpdateError
    from pregelkit.types import Overwrite

    with pytest.raises(ValueError, match="snapshot_frequency"):
        DeltaChannel(_extend, snapshot_frequency=0)
    channel = DeltaChannel(_extend).from_checkpoint(MISSING_VALUE)
    assert channel.get() == [] and channel.ValueType is list
    assert channel.update([1, 2]) and channel.update([3])
    assert channel.get() == [1, 2, 3]
    channel.update([Overwrite([9])])
    assert channel.get() == [9]
    with pytest.raises(InvalidUpdateError, match="one Overwrite"):
        channel.update([Overwrite([]), Overwrite([1])])
    replayed = DeltaChannel(_extend).from_checkpoint([0])
    replayed.replay_writes([("t", "k", 1), ("t", "k", Overwrite([5])), ("t", "k", 6)])
    assert replayed.get() == [5, 6]
    assert DeltaChannel(_extend) == DeltaChannel(_extend)
    assert DeltaChannel(_extend) != DeltaChannel(_extend, snapshot_frequency=3)


def test_delta_channel_in_a_graph_and_its_history(saver: Any) -> None:
    from pregelkit.channels import DeltaChannel

    node = NodeBuilder().subscribe_only("inbox").do(lambda x: [x * 10]).write_to("log")
    app = Pregel(
        nodes={"n": node},
        channels={"inbox": LastValue(int), "log": DeltaChannel(_extend)},
        input_channels="inbox",
        output_channels="log",
        checkpointer=saver,
    )
    config = {"configurable": {"thread_id": "delta"}}
    assert app.invoke(1, config) == [[10]]
    assert app.invoke(2, config) == [[10], [20]]
    latest = saver.get_tuple(config)
    history = saver.get_delta_channel_history(config=latest.config, channels=["log", "nope"])
    assert history["log"]["seed"] == [[10], [20]] and history["log"]["writes"] == []
    assert history["nope"] == {"writes": []}
    parent = saver.get_tuple(latest.parent_config)
    back = saver.get_delta_channel_history(config=parent.config, channels=["log"])
    assert back["log"]["seed"] == [[10]]
    assert saver.get_delta_channel_history(config=config, channels=[]) == {}

    import asyncio

    assert (
        asyncio.run(saver.aget_delta_channel_history(config=parent.config, channels=["log"]))
        == back
    )


def test_delta_history_walks_parents_collecting_writes_oldest_first() -> None:
    from pregelkit.checkpoint.base import CheckpointTuple, writes_sort_key

    def tup(cid: str, values: dict[str, Any], writes: list[Any], parent: str | None) -> Any:
        cp = empty_checkpoint()
        cp["id"], cp["channel_values"] = cid, values
        conf = {"configurable": {"thread_id": "t", "checkpoint_id": cid}}
        parent_conf = {"configurable": {"thread_id": "t", "checkpoint_id": parent}}
        return CheckpointTuple(conf, cp, {}, parent_conf if parent else None, writes)

    chain = {
        "3": tup("3", {}, [("t3", "log", "pending")], "2"),
        "2": tup("2", {}, [("t2", "log", "b"), ("t2", "other", 0)], "1"),
        "1": tup("1", {"log": ["seed"]}, [("t1", "log", "a")], None),
    }

    class Chain(InMemorySaver):
        def get_tuple(self, config: Any) -> Any:
            return chain[config["configurable"]["checkpoint_id"]]

    history = Chain().get_delta_channel_history(
        config=chain["3"].config, channels=["log", "other", "never"]
    )
    assert history["log"] == {"writes": [("t1", "log", "a"), ("t2", "log", "b")], "seed": ["seed"]}
    assert history["other"] == {"writes": [("t2", "other", 0)]}  # root reached: no seed
    assert history["never"] == {"writes": []}
    assert writes_sort_key("~a", "id", 2) < writes_sort_key("~b")


def test_async_postgres_saver_through_a_pipeline(
    postgres_database: Callable[[str], str],
) -> None:
    postgres_dsn = postgres_database("pregelkit_compat_apipe")
    import asyncio

    from psycopg_pool import AsyncConnectionPool

    from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver

    @entrypoint()
    def echo(x: int) -> int:
        return x

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await AsyncPostgresSaver(conn).setup()
            async with conn.pipeline() as pipe:
                saver = AsyncPostgresSaver(conn, pipe, JsonPlusSerializer())
                flow = entrypoint(checkpointer=saver)(echo.__wrapped__)  # type: ignore[attr-defined]
                config = {"configurable": {"thread_id": f"apipe-{uuid.uuid4()}"}}
                assert await flow.ainvoke(5, config) == 5
                assert (await flow.aget_state(config)).values == 5
            pool = AsyncConnectionPool(postgres_dsn, open=False)
            with pytest.raises(ValueError, match="not an AsyncConnectionPool"):
                AsyncPostgresSaver(pool, pipe)

    asyncio.run(main())


def test_persistent_dict_tables_survive_the_saver(tmp_path: Any) -> None:
    import functools

    from pregelkit.checkpoint.memory import PersistentDict

    path = str(tmp_path / "storage.pkl")
    saver = InMemorySaver(factory=functools.partial(PersistentDict, filename=path))

    @entrypoint(checkpointer=saver)
    def flow(x: int) -> int:
        return x * 3

    config = {"configurable": {"thread_id": "p"}}
    with saver:
        assert flow.invoke(2, config) == 6
    assert saver.storage == {}  # written out and emptied on close
    # the three tables share the file here: the checkpoints table, closed
    # last, is what it holds
    table = PersistentDict(filename=path)
    table.load()
    assert list(table) == ["p"] and len(table["p"][""]) == 2

    with open(path, "wb") as out:
        pickle.dump({"x": uuid.UUID(int=1)}, out)
    hostile = PersistentDict(filename=path)
    with pytest.raises(pickle.UnpicklingError, match=r"uuid.UUID is not part of a saver table"):
        hostile.load()


def test_context_jsonschema_from_a_dataclass_or_typeddict() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Context:
        x: int
        y: str = "foo"

    @entrypoint(context_schema=Context)
    def flow(x: int) -> int:
        return x

    assert flow.get_context_jsonschema() == {
        "properties": {
            "x": {"title": "X", "type": "integer"},
            "y": {"default": "foo", "title": "Y", "type": "string"},
        },
        "required": ["x"],
        "title": "Context",
        "type": "object",
    }
    assert entrypoint()(flow.__wrapped__).get_context_jsonschema() is None  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="TypedDict or a dataclass"):
        entrypoint(context_schema=int)(flow.__wrapped__).get_context_jsonschema()  # type: ignore[attr-defined]


def test_checkpoint_metadata_drops_nul_characters(saver: Any) -> None:
    @entrypoint(checkpointer=saver)
    def flow(x: int) -> int:
        return x

    config = {"configurable": {"thread_id": "nul"}, "metadata": {"who": "\x00abc"}}
    assert flow.invoke(1, config) == 1
    assert flow.get_state({"configurable": {"thread_id": "nul"}}).metadata["who"] == "abc"
    assert get_checkpoint_metadata({}, {"source": "lo\x00op"})["source"] == "loop"  # type: ignore[typeddict-item]
