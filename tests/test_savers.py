"""One conformance suite for every checkpoint saver (memory, SQLite, PostgreSQL),
sync and async, plus the safety of loading rows written behind a saver's back."""

from __future__ import annotations

import asyncio
import datetime
import os
import pickle
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

from conftest import truncate_saver_tables
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    RunnableConfig,
    empty_checkpoint,
)
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres._sql import MIGRATIONS as PG_MIGRATIONS
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite._sql import MIGRATIONS
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.errors import CheckpointCorruptError, ThreadBusyError

Saver = BaseCheckpointSaver[Any]
Run = Callable[[Awaitable[Any]], Any]


# helpers


def conf(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(values: dict[str, Any], versions: dict[str, str]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    cp["versions_seen"] = {"node": dict(versions)}
    return cp


def meta(step: int, **extra: Any) -> CheckpointMetadata:
    return {"source": "loop", "step": step, "parents": {}, **extra}


def put_chain(saver: Saver, thread_id: str, n: int, ns: str = "") -> list[RunnableConfig]:
    """n checkpoints, each the child of the previous, channel "x" = step."""
    configs: list[RunnableConfig] = []
    parent = conf(thread_id, ns)
    version = None
    for step in range(n):
        version = saver.get_next_version(version)
        cp = checkpoint({"x": step}, {"x": version})
        parent = saver.put(parent, cp, meta(step), {"x": version})
        configs.append(parent)
    return configs


def ids(tuples: Iterator[CheckpointTuple] | list[CheckpointTuple]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex}"


# values


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(max_size=64)
    | st.uuids()
    | st.datetimes(timezones=st.none() | st.just(datetime.UTC))
    | st.dates(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
        | st.sets(st.integers() | st.text(max_size=8), max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=json_like, write=json_like)
def test_values_and_writes_round_trip(saver: Saver, value: Any, write: Any) -> None:
    thread_id = new_thread()
    version = saver.get_next_version(None)
    config = saver.put(
        conf(thread_id), checkpoint({"v": value}, {"v": version}), meta(0), {"v": version}
    )
    saver.put_writes(config, [("v", write)], "task")
    loaded = saver.get_tuple(conf(thread_id))
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"v": value}
    assert type(loaded.checkpoint["channel_values"]["v"]) is type(value)
    assert loaded.pending_writes == [("task", "v", write)]


def test_get_tuple_of_unknown_thread_or_checkpoint_is_none(saver: Saver) -> None:
    assert saver.get_tuple(conf(new_thread())) is None
    [config] = put_chain(saver, thread_id := new_thread(), 1)
    assert saver.get_tuple(conf(thread_id, "other-ns")) is None
    assert saver.get_tuple(conf(thread_id, "", "1" * 36)) is None
    assert saver.get_tuple(config) is not None


def test_get_tuple_returns_checkpoint_config_parent_and_metadata(saver: Saver) -> None:
    thread_id = new_thread()
    first, second = put_chain(saver, thread_id, 2)
    latest = saver.get_tuple(conf(thread_id))
    assert latest is not None
    assert latest.config == second
    assert latest.parent_config == first
    assert latest.metadata == meta(1)
    assert latest.checkpoint["channel_values"] == {"x": 1}
    assert latest.checkpoint["versions_seen"] == {"node": latest.checkpoint["channel_versions"]}
    assert latest.pending_writes == []
    older = saver.get_tuple(first)
    assert older is not None
    assert older.checkpoint["channel_values"] == {"x": 0}
    assert older.parent_config is None


def test_metadata_round_trip_and_filters(saver: Saver) -> None:
    thread_id = new_thread()
    when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)
    rich = meta(
        1,
        score=1.5,
        flag=True,
        tags=["a", "b"],
        obj={"k": "v", "n": 1},
        nothing=None,
        when=when,
        text="ünïcode",
    )
    config = conf(thread_id)
    config["metadata"] = {"user": "bob", "__hidden": "x", "count": 3}
    version = saver.get_next_version(None)
    saver.put(config, checkpoint({"x": 1}, {"x": version}), rich, {"x": version})
    saver.put(conf(thread_id), checkpoint({}, {}), meta(2, tags=["a"]), {})

    stored = saver.get_tuple(conf(thread_id, "", ids(saver.list(conf(thread_id)))[-1]))
    assert stored is not None
    assert stored.metadata == {**rich, "user": "bob", "count": 3}

    def matching(filter: dict[str, Any]) -> list[int]:
        return [t.metadata["step"] for t in saver.list(conf(thread_id), filter=filter)]

    assert matching({}) == [2, 1]
    assert matching({"source": "loop"}) == [2, 1]
    assert matching({"step": 1}) == [1]
    assert matching({"step": 1, "source": "loop"}) == [1]
    assert matching({"step": 1, "source": "input"}) == []
    assert matching({"step": "1"}) == []
    assert matching({"score": 1.5, "flag": True}) == [1]
    assert matching({"tags": ["a", "b"]}) == [1]
    assert matching({"tags": ["a"]}) == [2]
    assert matching({"obj": {"n": 1, "k": "v"}}) == [1]
    assert matching({"obj": {"k": "v"}}) == []
    assert matching({"parents": {}}) == [2, 1]
    assert matching({"nothing": None}) == [1]
    assert matching({"missing": None}) == []
    assert matching({"user": "bob", "count": 3}) == [1]
    assert matching({"text": "ünïcode"}) == [1]
    assert matching({"__hidden": "x"}) == []
    assert len(list(saver.list(None, filter={"user": "bob"}))) == 1


def test_metadata_json_copy_keeps_exactly_the_json_values() -> None:
    """The metadata's JSON copy (what filters compare) decides plain scalars
    inline; it must keep exactly what ``is_json_value`` accepts."""
    from pregelkit.checkpoint._rows import is_json_value, json_subset

    metadata: dict[Any, Any] = {
        "source": "loop",
        "step": 3,
        "flag": False,
        "none": None,
        "parents": {"": "1f1e"},
        "nul": "a\x00b",
        "nul\x00key": 1,
        "nan": float("nan"),
        "score": 1.5,
        "tags": ["a", 1],
        "bad_list": [float("inf")],
        "obj": object(),
        7: "int key",
        "big": 2**70,
    }
    expected = {
        k: v
        for k, v in metadata.items()
        if isinstance(k, str) and is_json_value(k) and is_json_value(v)
    }
    assert json_subset(metadata) == expected
    assert set(expected) == {"source", "step", "flag", "none", "parents", "score", "tags", "big"}


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON_VALUES)
def test_metadata_json_text_is_json_dumps_with_sorted_keys(value: Any) -> None:
    """Filters match the stored JSON copy by its text: the encoder built once
    must write exactly what ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` writes, or rows saved before and after would stop
    matching the same filter."""
    import json

    from pregelkit.checkpoint._rows import filter_json

    assert filter_json(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def test_pending_writes_keep_first_regular_and_replace_special_in_place(saver: Saver) -> None:
    [config] = put_chain(saver, thread_id := new_thread(), 1)
    saver.put_writes(config, [("a", 1), ("__error__", "first error")], "task-a", "path-a")
    saver.put_writes(config, [("b", 2), ("__no_writes__", None)], "task-b")
    saver.put_writes(config, [("__interrupt__", ["i1"])], "task-c")
    # a retry of task-a: regular write kept, special write replaced where it was
    saver.put_writes(config, [("a", 99), ("__error__", "second error")], "task-a", "path-a")
    saver.put_writes(config, [("__interrupt__", ["i2"]), ("__resume__", "r1")], "task-c")
    saver.put_writes(config, [("__resume__", "r2")], "task-c")
    loaded = saver.get_tuple(conf(thread_id))
    assert loaded is not None
    assert loaded.pending_writes == [
        ("task-a", "a", 1),
        ("task-a", "__error__", "second error"),
        ("task-b", "b", 2),
        ("task-b", "__no_writes__", None),
        ("task-c", "__interrupt__", ["i2"]),
        ("task-c", "__resume__", "r2"),
    ]


def test_writes_belong_to_their_checkpoint(saver: Saver) -> None:
    first, second = put_chain(saver, thread_id := new_thread(), 2)
    saver.put_writes(first, [("x", "old")], "t1")
    saver.put_writes(second, [("x", "new")], "t1")
    saver.put_writes(second, [], "t2")
    assert saver.get_tuple(first).pending_writes == [("t1", "x", "old")]
    assert saver.get_tuple(conf(thread_id)).pending_writes == [("t1", "x", "new")]


def test_put_writes_needs_a_checkpoint_id(saver: Saver) -> None:
    with pytest.raises(ValueError, match="checkpoint_id"):
        saver.put_writes(conf(new_thread()), [("x", 1)], "task")


def test_threads_and_namespaces_are_isolated(saver: Saver) -> None:
    t1, t2 = new_thread(), new_thread()
    [root] = put_chain(saver, t1, 1)
    [child] = put_chain(saver, t1, 1, ns="child:1")
    [other] = put_chain(saver, t2, 1)
    saver.put_writes(child, [("x", "child write")], "task")
    assert ids([saver.get_tuple(conf(t1))]) == ids([saver.get_tuple(root)])
    loaded_child = saver.get_tuple(conf(t1, "child:1"))
    assert loaded_child is not None and loaded_child.config == child
    assert loaded_child.pending_writes == [("task", "x", "child write")]
    assert saver.get_tuple(conf(t1)).pending_writes == []
    assert saver.get_tuple(conf(t2)).config == other
    # no namespace in the config: every namespace of the thread
    assert sorted(ids(saver.list({"configurable": {"thread_id": t1}}))) == sorted(
        ids([saver.get_tuple(root), loaded_child])
    )
    assert ids(saver.list(conf(t1, ""))) == ids([saver.get_tuple(root)])
    assert ids(saver.list(conf(t1, "child:1"))) == [child["configurable"]["checkpoint_id"]]


def test_list_order_before_limit_and_all_threads(saver: Saver) -> None:
    t1, t2 = new_thread(), new_thread()
    configs = put_chain(saver, t1, 5)
    other = put_chain(saver, t2, 2)
    newest_first = [c["configurable"]["checkpoint_id"] for c in reversed(configs)]
    assert ids(saver.list(conf(t1))) == newest_first
    assert ids(saver.list(conf(t1), limit=2)) == newest_first[:2]
    assert ids(saver.list(conf(t1), before=configs[2])) == newest_first[3:]
    assert ids(saver.list(conf(t1), before=configs[2], limit=1)) == newest_first[3:4]
    assert ids(saver.list(configs[1])) == [configs[1]["configurable"]["checkpoint_id"]]
    listed = list(saver.list(conf(t1)))
    assert [t.checkpoint["channel_values"]["x"] for t in listed] == [4, 3, 2, 1, 0]
    assert [t.parent_config for t in listed] == [*reversed(configs[:-1]), None]
    everything = ids(saver.list(None))
    assert sorted(everything, reverse=True) == everything
    assert set(everything) == {c["configurable"]["checkpoint_id"] for c in configs + other}
    assert ids(saver.list(None, limit=3)) == everything[:3]


def test_blobs_are_written_only_for_new_versions(saver: Saver) -> None:
    thread_id = new_thread()
    va, vb = saver.get_next_version(None), saver.get_next_version(None)
    first = saver.put(
        conf(thread_id),
        checkpoint({"a": "a1", "b": "b1"}, {"a": va, "b": vb}),
        meta(0),
        {"a": va, "b": vb},
    )
    va2, vc = saver.get_next_version(va), saver.get_next_version(None)
    # "b" is unchanged; the stale value passed for it must not replace its blob.
    # "c" has a version but no value (it was cleared).
    second = saver.put(
        first,
        checkpoint({"a": "a2", "b": "not stored"}, {"a": va2, "b": vb, "c": vc}),
        meta(1),
        {"a": va2, "c": vc},
    )
    latest = saver.get_tuple(second)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"a": "a2", "b": "b1"}
    assert latest.checkpoint["channel_versions"] == {"a": va2, "b": vb, "c": vc}
    older = saver.get_tuple(first)
    assert older is not None
    assert older.checkpoint["channel_values"] == {"a": "a1", "b": "b1"}


def test_delete_thread(saver: Saver) -> None:
    t1, t2 = new_thread(), new_thread()
    [c1] = put_chain(saver, t1, 1)
    put_chain(saver, t1, 1, ns="child:1")
    [c2] = put_chain(saver, t2, 1)
    saver.put_writes(c1, [("x", 1)], "task")
    saver.put_writes(c2, [("x", 2)], "task")
    saver.delete_thread(t1)
    assert list(saver.list({"configurable": {"thread_id": t1}})) == []
    assert saver.get_tuple(c1) is None
    kept = saver.get_tuple(conf(t2))
    assert kept is not None and kept.pending_writes == [("task", "x", 2)]
    saver.delete_thread("no such thread")


def test_copy_thread(saver: Saver) -> None:
    source, target = new_thread(), new_thread()
    configs = put_chain(saver, source, 3)
    put_chain(saver, source, 1, ns="child:1")
    saver.put_writes(configs[-1], [("x", "w1"), ("__error__", "e")], "task-1")
    saver.put_writes(configs[-1], [("y", "w2")], "task-2")
    saver.copy_thread(source, target)

    def snapshot(thread_id: str) -> list[tuple[Any, ...]]:
        return [
            (
                t.config["configurable"]["checkpoint_ns"],
                t.config["configurable"]["checkpoint_id"],
                t.checkpoint,
                t.metadata,
                t.parent_config and t.parent_config["configurable"]["checkpoint_id"],
                t.pending_writes,
            )
            for t in saver.list({"configurable": {"thread_id": thread_id}})
        ]

    assert snapshot(target) == snapshot(source)
    assert len(snapshot(target)) == 4
    copied = saver.get_tuple(conf(target))
    assert copied is not None
    assert copied.config["configurable"]["thread_id"] == target
    assert copied.parent_config is not None
    assert copied.parent_config["configurable"]["thread_id"] == target
    # the copy is independent of the source
    saver.delete_thread(source)
    assert saver.get_tuple(conf(target)) == copied


def test_prune_keep_latest_keeps_each_namespace_latest_with_writes_and_values(
    saver: Saver,
) -> None:
    thread_id, other = new_thread(), new_thread()
    va, vb = saver.get_next_version(None), saver.get_next_version(None)
    first = saver.put(
        conf(thread_id),
        checkpoint({"a": 1, "b": 1}, {"a": va, "b": vb}),
        meta(0),
        {"a": va, "b": vb},
    )
    saver.put_writes(first, [("a", "old write")], "task")
    va2 = saver.get_next_version(va)
    last = saver.put(first, checkpoint({"a": 2, "b": 1}, {"a": va2, "b": vb}), meta(1), {"a": va2})
    saver.put_writes(last, [("a", "pending")], "task")
    child = put_chain(saver, thread_id, 2, ns="child:1")
    put_chain(saver, other, 2)

    saver.prune([thread_id], strategy="keep_latest")
    remaining = list(saver.list({"configurable": {"thread_id": thread_id}}))
    assert sorted(ids(remaining)) == sorted(
        [last["configurable"]["checkpoint_id"], child[-1]["configurable"]["checkpoint_id"]]
    )
    kept = saver.get_tuple(conf(thread_id))
    assert kept is not None
    assert kept.checkpoint["channel_values"] == {"a": 2, "b": 1}  # b's blob is older
    assert kept.pending_writes == [("task", "a", "pending")]
    assert saver.get_tuple(first) is None
    assert len(list(saver.list(conf(other)))) == 2

    saver.prune([thread_id, other], strategy="delete")
    assert list(saver.list(None)) == []
    with pytest.raises(ValueError, match="strategy"):
        saver.prune([thread_id], strategy="everything")


def test_concurrent_writers_lose_nothing(saver: Saver) -> None:
    [config] = put_chain(saver, thread_id := new_thread(), 1)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(15):
                saver.put_writes(config, [("x", (n, i)), ("y", n)], f"task-{n}-{i}")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    loaded = saver.get_tuple(conf(thread_id))
    assert loaded is not None and loaded.pending_writes is not None
    assert len(loaded.pending_writes) == 8 * 15 * 2
    assert {w[2] for w in loaded.pending_writes if w[1] == "x"} == {
        (n, i) for n in range(8) for i in range(15)
    }
    for n in range(8):  # each task's writes stay together and in order
        task_writes = [w for w in loaded.pending_writes if w[0] == f"task-{n}-0"]
        assert task_writes == [(f"task-{n}-0", "x", (n, 0)), (f"task-{n}-0", "y", n)]


def test_lock_thread(saver: Saver) -> None:
    thread_id = new_thread()
    with saver.lock_thread(thread_id):
        with pytest.raises(ThreadBusyError) as busy, saver.lock_thread(thread_id):
            pass
        assert busy.value.thread_id == thread_id
        with saver.lock_thread(new_thread()):
            pass
    with saver.lock_thread(thread_id):  # released
        pass


def test_lock_thread_wait_blocks_until_released(saver: Saver) -> None:
    thread_id = new_thread()
    order: list[str] = []
    holding = threading.Event()

    def holder() -> None:
        with saver.lock_thread(thread_id):
            holding.set()
            time.sleep(0.2)
            order.append("released")

    t = threading.Thread(target=holder)
    t.start()
    holding.wait()
    with saver.lock_thread(thread_id, wait=True):
        order.append("acquired")
    t.join()
    assert order == ["released", "acquired"]


# async twins


def test_async_twins(async_saver: Saver, arun: Run) -> None:
    async def main() -> None:
        saver = async_saver
        t1, t2 = new_thread(), new_thread()
        v1 = saver.get_next_version(None)
        c1 = await saver.aput(conf(t1), checkpoint({"x": 1}, {"x": v1}), meta(0), {"x": v1})
        v2 = saver.get_next_version(v1)
        c2 = await saver.aput(c1, checkpoint({"x": 2}, {"x": v2}), meta(1, user="amy"), {"x": v2})
        await saver.aput_writes(c2, [("x", 3), ("__interrupt__", "i1")], "task")
        await saver.aput_writes(c2, [("x", 4), ("__interrupt__", "i2")], "task")
        latest = await saver.aget_tuple(conf(t1))
        assert latest is not None
        assert latest.config == c2 and latest.parent_config == c1
        assert latest.checkpoint["channel_values"] == {"x": 2}
        assert latest.pending_writes == [("task", "x", 3), ("task", "__interrupt__", "i2")]
        assert (await saver.aget(c1))["channel_values"] == {"x": 1}
        assert [ids([t]) async for t in saver.alist(conf(t1))] == [
            ids([latest]),
            [c1["configurable"]["checkpoint_id"]],
        ]
        assert [t.metadata["step"] async for t in saver.alist(None, filter={"user": "amy"})] == [1]
        assert [t.config async for t in saver.alist(conf(t1), before=c2, limit=5)] == [c1]

        await saver.acopy_thread(t1, t2)
        copied = await saver.aget_tuple(conf(t2))
        assert copied is not None and copied.pending_writes == latest.pending_writes
        await saver.aprune([t2], strategy="keep_latest")
        assert len([t async for t in saver.alist(conf(t2))]) == 1
        await saver.adelete_thread(t1)
        assert await saver.aget_tuple(conf(t1)) is None
        await saver.aprune([t2], strategy="delete")
        assert [t async for t in saver.alist(None)] == []

    arun(main())


def test_async_concurrent_writers_and_lock(async_saver: Saver, arun: Run) -> None:
    async def main() -> None:
        saver = async_saver
        thread_id = new_thread()
        config = await saver.aput(conf(thread_id), checkpoint({}, {}), meta(0), {})
        await asyncio.gather(
            *(saver.aput_writes(config, [("x", n)], f"task-{n}") for n in range(40))
        )
        loaded = await saver.aget_tuple(config)
        assert loaded is not None and loaded.pending_writes is not None
        assert sorted(w[2] for w in loaded.pending_writes) == list(range(40))

        async with saver.alock_thread(thread_id):
            with pytest.raises(ThreadBusyError):
                async with saver.alock_thread(thread_id):
                    pass
            async with saver.alock_thread(new_thread()):
                pass

        events: list[str] = []

        async def holder() -> None:
            async with saver.alock_thread(thread_id):
                await asyncio.sleep(0.1)
                events.append("released")

        task = asyncio.create_task(holder())
        await asyncio.sleep(0.02)
        async with saver.alock_thread(thread_id, wait=True):
            events.append("acquired")
        await task
        assert events == ["released", "acquired"]

    arun(main())


def test_async_sqlite_saver_sync_methods_work(tmp_path: Path) -> None:
    async def main() -> RunnableConfig:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
            await saver.setup()
            config = await saver.aput(
                conf("t"), checkpoint({"x": 1}, {"x": "1"}), meta(0), {"x": "1"}
            )
            assert saver.get_tuple(config).checkpoint["channel_values"] == {"x": 1}
            saver.put_writes(config, [("x", 2)], "task")
            assert (await saver.aget_tuple(config)).pending_writes == [("task", "x", 2)]
            return config

    config = asyncio.run(main())
    with SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        assert saver.get_tuple(config).pending_writes == [("task", "x", 2)]


def test_async_postgres_saver_sync_methods(
    _async_saver_pool: Any, _saver_pool: ConnectionPool[Any], arun: Run
) -> None:
    async def make() -> AsyncPostgresSaver:
        return AsyncPostgresSaver(_async_saver_pool)

    saver = arun(make())
    thread_id = new_thread()
    result: dict[str, Any] = {}

    def from_another_thread() -> None:
        config = saver.put(conf(thread_id), checkpoint({"x": 1}, {"x": "1"}), meta(0), {"x": "1"})
        saver.put_writes(config, [("x", 2)], "task")
        result["tuple"] = saver.get_tuple(conf(thread_id))
        result["listed"] = list(saver.list(conf(thread_id)))
        with saver.lock_thread(thread_id), pytest.raises(ThreadBusyError):
            saver.lock_thread(thread_id).__enter__()
        saver.delete_thread(thread_id)

    async def main() -> None:
        await asyncio.to_thread(from_another_thread)
        with pytest.raises(RuntimeError, match="await aget_tuple"):
            saver.get_tuple(conf(thread_id))
        # LangGraph raises asyncio.InvalidStateError here; the error is both.
        with pytest.raises(asyncio.InvalidStateError, match="await aprune"):
            saver.prune([thread_id])

    arun(main())
    assert result["tuple"].pending_writes == [("task", "x", 2)]
    # the loop is idle now: sync calls from this thread drive it themselves
    config = saver.put(conf(thread_id), checkpoint({}, {}), meta(0), {})
    assert saver.get_tuple(conf(thread_id)).config == config
    saver.delete_thread(thread_id)
    assert ids(result["listed"]) == ids([result["tuple"]])
    assert PostgresSaver(_saver_pool).get_tuple(conf(thread_id)) is None
    with pytest.raises(RuntimeError, match="there is none"):
        AsyncPostgresSaver(_async_saver_pool).get_tuple(conf(thread_id))


# SQL savers: storage details, safety, other processes


class SqlStore:
    """A SQL saver plus raw access to its tables, bypassing the saver."""

    def __init__(
        self, kind: str, saver: Saver, raw: Callable[..., list[tuple[Any, ...]]], open_code: str
    ) -> None:
        self.kind = kind
        self.saver = saver
        self.raw = raw
        self.open_code = open_code
        """Python that binds ``saver`` to a new saver on the same database."""


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        path = str(tmp_path / "state.db")
        with SqliteSaver.from_conn_string(path) as saver:
            saver.setup()

            def raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
                with saver._lock:
                    return saver.conn.execute(sql, params).fetchall()

            code = (
                "from pregelkit.checkpoint.sqlite import SqliteSaver\n"
                f"opened = SqliteSaver.from_conn_string({path!r})\n"
                "saver = opened.__enter__()"
            )
            yield SqlStore("sqlite", saver, raw, code)
        return
    pool: ConnectionPool[Any] = request.getfixturevalue("_saver_pool")
    pool_saver = PostgresSaver(pool)
    truncate_saver_tables(pool)

    def pg_raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with pool.connection() as conn, conn.cursor() as cur:
            cur.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    code = (
        "from pregelkit.checkpoint.postgres import PostgresSaver\n"
        f"opened = PostgresSaver.from_conn_string({pool.conninfo!r})\n"
        "saver = opened.__enter__()"
    )
    yield SqlStore("postgres", pool_saver, pg_raw, code)


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _stored_rows(store: SqlStore) -> list[tuple[Any, ...]]:
    return [
        *store.raw(
            "SELECT thread_id, checkpoint_id, type, checkpoint FROM pregelkit_checkpoints "
            "ORDER BY 1, 2"
        ),
        *store.raw(
            "SELECT thread_id, channel, version, type, blob FROM pregelkit_blobs ORDER BY 1, 2, 3"
        ),
        *store.raw(
            "SELECT thread_id, task_id, idx, type, value FROM pregelkit_writes ORDER BY 1, 2, 3"
        ),
    ]


@pytest.mark.parametrize("tag", ["pickle", "cloudpickle"])
def test_malicious_pickle_in_a_blob_is_refused_not_run(
    sql_store: SqlStore, tmp_path: Path, tag: str
) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Exploit(marker))
    [config] = put_chain(sql_store.saver, thread_id := new_thread(), 1)
    checkpoint_id = config["configurable"]["checkpoint_id"]
    sql_store.raw(
        "UPDATE pregelkit_blobs SET type = ?, blob = ? WHERE thread_id = ? AND channel = 'x'",
        tag,
        payload,
        thread_id,
    )
    before = _stored_rows(sql_store)

    with pytest.raises(CheckpointCorruptError) as err:
        sql_store.saver.get_tuple(conf(thread_id))
    assert (
        err.value.thread_id,
        err.value.checkpoint_ns,
        err.value.checkpoint_id,
        err.value.channel,
    ) == (thread_id, "", checkpoint_id, "x")
    for text in (thread_id, checkpoint_id, "'x'"):
        assert text in str(err.value)
    assert err.value.__cause__ is not None
    with pytest.raises(CheckpointCorruptError):
        list(sql_store.saver.list(conf(thread_id)))
    assert not marker.exists()
    assert _stored_rows(sql_store) == before


def test_malicious_pickle_in_a_write_or_checkpoint_is_refused_not_run(
    sql_store: SqlStore, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Exploit(marker))
    [config] = put_chain(sql_store.saver, thread_id := new_thread(), 1)
    checkpoint_id = config["configurable"]["checkpoint_id"]
    sql_store.saver.put_writes(config, [("x", "fine"), ("y", "bad")], "task-1")
    sql_store.raw(
        "UPDATE pregelkit_writes SET type = 'pickle', value = ? "
        "WHERE thread_id = ? AND channel = 'y'",
        payload,
        thread_id,
    )
    with pytest.raises(CheckpointCorruptError) as err:
        sql_store.saver.get_tuple(config)
    assert (err.value.checkpoint_id, err.value.task_id, err.value.channel) == (
        checkpoint_id,
        "task-1",
        "y",
    )
    assert "task-1" in str(err.value)

    sql_store.raw(
        "UPDATE pregelkit_checkpoints SET type = 'pickle', checkpoint = ? WHERE thread_id = ?",
        payload,
        thread_id,
    )
    with pytest.raises(CheckpointCorruptError) as err:
        sql_store.saver.get_tuple(config)
    assert (err.value.thread_id, err.value.checkpoint_id, err.value.channel) == (
        thread_id,
        checkpoint_id,
        None,
    )
    assert not marker.exists()
    assert len(sql_store.raw("SELECT 1 FROM pregelkit_writes WHERE thread_id = ?", thread_id)) == 2


@pytest.mark.parametrize(
    ("tag", "mangle"),
    [
        ("keep", lambda blob: blob[: len(blob) // 2]),
        ("keep", lambda blob: b"\x80\x05garbage"),
        ("no-such-tag", lambda blob: blob),
        ("keep", lambda blob: None),
    ],
    ids=["truncated", "garbage", "unknown-tag", "null"],
)
def test_truncated_garbage_or_unknown_blobs_are_corrupt(
    sql_store: SqlStore, tag: str, mangle: Callable[[bytes], bytes | None]
) -> None:
    thread_id = new_thread()
    version = sql_store.saver.get_next_version(None)
    value = {"big": list(range(200)), "text": "x" * 100}
    config = sql_store.saver.put(
        conf(thread_id), checkpoint({"x": value}, {"x": version}), meta(0), {"x": version}
    )
    [(stored_tag, blob)] = sql_store.raw(
        "SELECT type, blob FROM pregelkit_blobs WHERE thread_id = ?", thread_id
    )
    new_tag = stored_tag if tag == "keep" else tag
    sql_store.raw(
        "UPDATE pregelkit_blobs SET type = ?, blob = ? WHERE thread_id = ?",
        new_tag,
        mangle(bytes(blob)),
        thread_id,
    )
    with pytest.raises(CheckpointCorruptError) as err:
        sql_store.saver.get_tuple(config)
    assert err.value.channel == "x" and err.value.thread_id == thread_id
    assert len(sql_store.raw("SELECT 1 FROM pregelkit_blobs WHERE thread_id = ?", thread_id)) == 1


def test_list_rejects_a_filter_value_it_cannot_compare(sql_store: SqlStore) -> None:
    with pytest.raises(ValueError, match="'when'"):
        list(sql_store.saver.list(None, filter={"when": datetime.date(2024, 1, 1)}))


def test_blobs_are_stored_once_per_version(sql_store: SqlStore) -> None:
    thread_id = new_thread()
    va, vb = "1", "1"
    first = sql_store.saver.put(
        conf(thread_id),
        checkpoint({"a": 1, "b": 2}, {"a": va, "b": vb}),
        meta(0),
        {"a": va, "b": vb},
    )
    sql_store.saver.put(
        first, checkpoint({"a": 3, "b": 2}, {"a": "2", "b": vb}), meta(1), {"a": "2"}
    )
    rows = sql_store.raw(
        "SELECT channel, version FROM pregelkit_blobs WHERE thread_id = ? ORDER BY 1, 2", thread_id
    )
    assert rows == [("a", "1"), ("a", "2"), ("b", "1")]
    sql_store.saver.prune([thread_id])
    rows = sql_store.raw(
        "SELECT channel, version FROM pregelkit_blobs WHERE thread_id = ? ORDER BY 1, 2", thread_id
    )
    assert rows == [("a", "2"), ("b", "1")]


def test_writers_in_several_processes_lose_nothing(sql_store: SqlStore) -> None:
    [config] = put_chain(sql_store.saver, thread_id := new_thread(), 1)
    script = (
        f"{sql_store.open_code}\n"
        "import sys\n"
        "for i in range(40):\n"
        f"    saver.put_writes({config!r}, [('x', (sys.argv[1], i))], f'{{sys.argv[1]}}-{{i}}')\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, f"p{n}"], stderr=subprocess.PIPE)
        for n in range(3)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err.decode()
    loaded = sql_store.saver.get_tuple(conf(thread_id))
    assert loaded is not None
    assert sorted(w[2] for w in loaded.pending_writes or []) == sorted(
        (f"p{n}", i) for n in range(3) for i in range(40)
    )


def test_lock_is_held_across_processes_and_freed_when_the_holder_dies(sql_store: SqlStore) -> None:
    thread_id = new_thread()
    script = (
        f"{sql_store.open_code}\n"
        "import time\n"
        f"with saver.lock_thread({thread_id!r}):\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line == b"locked\n", holder.stderr.read() if holder.stderr else line
        with pytest.raises(ThreadBusyError), sql_store.saver.lock_thread(thread_id):
            pass
        with sql_store.saver.lock_thread(new_thread()):
            pass
    finally:
        holder.kill()  # SIGKILL: no cleanup code runs in the holder
        holder.wait()
        for stream in (holder.stdout, holder.stderr):
            if stream:
                stream.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            with sql_store.saver.lock_thread(thread_id):
                break
        except ThreadBusyError:
            assert time.monotonic() < deadline, "the dead holder's lock was never released"
            time.sleep(0.05)


# SQLite specifics


def test_sqlite_file_settings_and_schema_version(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        saver.setup()  # idempotent
        assert saver.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert saver.conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert saver.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
        versions = saver.conn.execute("SELECT version FROM pregelkit_migrations").fetchall()
        # 2: run-control marks, 3: attempt records, 4: the run queue, 5: its claim index,
        # 6: durable waits (sleeping and waiting runs, messages, events),
        # 7: detached children (a parent's cancel cancels the others), then
        # queues, retention, schedules, stream parts: every one applied, in order
        assert versions == [(v,) for v in range(1, len(MIGRATIONS) + 1)]
        saver.conn.execute("INSERT INTO pregelkit_migrations VALUES (99, 'future')")
    with (
        SqliteSaver.from_conn_string(path) as saver,
        pytest.raises(RuntimeError, match="upgrade pregelkit"),
    ):
        saver.get_tuple(conf("t"))


def test_sqlite_in_memory_database_uses_the_in_process_lock() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        [config] = put_chain(saver, "t", 1)
        assert saver.get_tuple(config) is not None
        with saver.lock_thread("t"), pytest.raises(ThreadBusyError), saver.lock_thread("t"):
            pass


def test_sqlite_put_writes_is_one_statement(tmp_path: Path) -> None:
    """What kept put_writes at ~25 µs, checked without a clock (a timed bound
    failed on a loaded machine): one statement a call, no transaction or
    checkpoint of the WAL of its own; with WAL and synchronous=NORMAL
    (``test_sqlite_file_settings_and_schema_version``) its commit needs no
    fsync."""
    with SqliteSaver.from_conn_string(str(tmp_path / "speed.db")) as saver:
        [config] = put_chain(saver, "t", 1)
        seen: list[str] = []
        saver.conn.set_trace_callback(seen.append)
        for i in range(50):
            saver.put_writes(config, [("x", i)], f"task-{i}")
        saver.conn.set_trace_callback(None)
    assert len(seen) == 50
    assert all(statement.lstrip().startswith("INSERT INTO pregelkit_writes") for statement in seen)


# PostgreSQL specifics


def test_postgres_setup_is_safe_to_run_concurrently(
    postgres_database: Callable[[str], str],
) -> None:
    dsn = postgres_database("pregelkit_setup_race")
    errors: list[BaseException] = []

    def setup() -> None:
        try:
            with PostgresSaver.from_conn_string(dsn) as saver:
                saver.setup()
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=setup) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT version FROM pregelkit_migrations").fetchall() == [
            (v,) for v in range(1, len(PG_MIGRATIONS) + 1)
        ]
        conn.execute("INSERT INTO pregelkit_migrations (version) VALUES (99)")
        conn.commit()
    with (
        PostgresSaver.from_conn_string(dsn) as saver,
        pytest.raises(RuntimeError, match="upgrade pregelkit"),
    ):
        saver.setup()


def test_postgres_lock_connection_goes_back_to_the_pool(_saver_pool: ConnectionPool[Any]) -> None:
    saver = PostgresSaver(_saver_pool)
    saver.setup()
    t1, t2 = new_thread(), new_thread()
    available = _saver_pool.get_stats()["pool_available"]
    with saver.lock_thread(t1), saver.lock_thread(t2):
        # both locks share one borrowed connection
        assert _saver_pool.get_stats()["pool_available"] == available - 1
        with pytest.raises(ThreadBusyError), PostgresSaver(_saver_pool).lock_thread(t2):
            pass
    assert _saver_pool.get_stats()["pool_available"] == available
    with PostgresSaver(_saver_pool).lock_thread(t1), PostgresSaver(_saver_pool).lock_thread(t2):
        pass


def test_postgres_saver_on_a_single_connection(postgres_dsn: str) -> None:
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        thread_id = new_thread()
        configs = put_chain(saver, thread_id, 3)
        saver.put_writes(configs[-1], [("x", "w")], "task")
        assert saver.get_tuple(conf(thread_id)).pending_writes == [("task", "x", "w")]
        assert ids(saver.list(conf(thread_id))) == [
            c["configurable"]["checkpoint_id"] for c in reversed(configs)
        ]
        with (
            saver.lock_thread(thread_id),
            pytest.raises(ThreadBusyError),
            saver.lock_thread(thread_id),
        ):
            pass
        saver.delete_thread(thread_id)


def test_postgres_async_saver_on_a_single_connection(postgres_dsn: str) -> None:
    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(postgres_dsn) as saver:
            thread_id = new_thread()
            config = await saver.aput(
                conf(thread_id), checkpoint({"x": 1}, {"x": "1"}), meta(0), {"x": "1"}
            )
            await asyncio.gather(
                *(saver.aput_writes(config, [("x", n)], f"t{n}") for n in range(10))
            )
            loaded = await saver.aget_tuple(config)
            assert loaded is not None and len(loaded.pending_writes or []) == 10
            async with saver.alock_thread(thread_id):
                with pytest.raises(ThreadBusyError):
                    async with saver.alock_thread(thread_id):
                        pass
            await saver.adelete_thread(thread_id)

    asyncio.run(main())


def test_postgres_saver_works_on_a_connection_that_returns_dict_rows(postgres_dsn: str) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from pregelkit.checkpoint.postgres import PostgresSaver

    with psycopg.connect(postgres_dsn, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        config = {"configurable": {"thread_id": "dict-rows", "checkpoint_ns": ""}}
        saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        saver.put_writes(saved, [("a", 1)], "task-1")
        loaded = saver.get_tuple(saved)
        assert loaded is not None and loaded.pending_writes == [("task-1", "a", 1)]


def test_delta_history_ends_where_a_re_put_made_the_parent_chain_cycle(
    saver: Saver, arun: Run
) -> None:
    """Putting an existing checkpoint id again under a newer parent makes the
    chain a loop; the history walk stops where it comes back, on every saver."""
    thread_id = new_thread()
    first = checkpoint({}, {})
    first_config = saver.put(conf(thread_id), first, meta(0), {})
    saver.put_writes(first_config, [("log", "a")], "task-a")
    second = checkpoint({}, {})
    second_config = saver.put(first_config, second, meta(1), {})
    saver.put(second_config, first, meta(0), {})  # the first, now under the second
    history = saver.get_delta_channel_history(config=second_config, channels=["log"])
    assert history == {"log": {"writes": [("task-a", "log", "a")]}}
    assert arun(saver.aget_delta_channel_history(config=second_config, channels=["log"])) == history


def test_a_value_without_a_version_is_kept_with_its_checkpoint(saver: Saver, arun: Run) -> None:
    """A hand-made checkpoint may hold a value for a channel it gives no
    version (no blob can hold it): it is stored with the checkpoint, not
    dropped, and seeds the delta history of the checkpoints after it."""
    thread_id = new_thread()
    root = checkpoint({"seeded": ["s"], "x": 1}, {"x": "1"})
    root["versions_seen"] = {}
    root_config = saver.put(conf(thread_id), root, meta(0), {"x": "1"})
    saver.put_writes(root_config, [("seeded", "w")], "task")
    assert saver.get_tuple(root_config).checkpoint["channel_values"] == {"seeded": ["s"], "x": 1}
    child_config = saver.put(root_config, checkpoint({}, {"x": "1"}), meta(1), {})
    assert saver.get_tuple(child_config).checkpoint["channel_values"] == {"x": 1}
    history = saver.get_delta_channel_history(config=child_config, channels=["seeded"])
    assert history == {"seeded": {"writes": [("task", "seeded", "w")], "seed": ["s"]}}
    assert arun(saver.aget_tuple(root_config)).checkpoint["channel_values"]["seeded"] == ["s"]
