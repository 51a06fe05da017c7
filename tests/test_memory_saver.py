"""InMemorySaver: storage layout, pending-write semantics, listing, thread
maintenance and corruption reporting."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from pregelkit._internal._constants import NULL_TASK_ID
from pregelkit.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    RunnableConfig,
    create_checkpoint_id,
    empty_checkpoint,
)
from pregelkit.checkpoint.memory import InMemorySaver, MemorySaver
from pregelkit.checkpoint.serde import JsonPlusSerializer, SerdeError, UnsafeTypeError
from pregelkit.errors import CheckpointCorruptError
from pregelkit.types import Interrupt


def thread(thread_id: str = "t1", ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint(
    step: int, values: dict[str, Any], versions: dict[str, Any], seen: dict[str, Any] | None = None
) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = create_checkpoint_id(step)
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    cp["versions_seen"] = seen or {}
    return cp


def meta(step: int, source: str = "loop", **extra: Any) -> CheckpointMetadata:
    return {"source": source, "step": step, "parents": {}, **extra}  # type: ignore[typeddict-item]


def chain(saver: InMemorySaver, config: RunnableConfig, steps: int) -> list[RunnableConfig]:
    """``steps`` checkpoints, each a child of the previous, channel ``n`` = step."""
    configs = []
    for step in range(steps):
        config = saver.put(
            config, checkpoint(step, {"n": step}, {"n": step + 1}), meta(step), {"n": step + 1}
        )
        configs.append(config)
    return configs


def test_put_then_get_latest_and_by_id() -> None:
    saver = InMemorySaver()
    first = saver.put(
        {"configurable": {"thread_id": "t1"}, "metadata": {"user": "ann", "__secret": 1}},
        checkpoint(0, {"a": 1, "b": [1]}, {"a": 1, "b": 1}, {"node": {"a": 1}}),
        meta(0, source="input"),
        {"a": 1, "b": 1},
    )
    cp2 = checkpoint(1, {"a": 2, "b": [1]}, {"a": 2, "b": 1})
    second = saver.put(first, cp2, meta(1), {"a": 2})

    assert first == thread(checkpoint_id=first["configurable"]["checkpoint_id"])
    latest = saver.get_tuple(thread())
    assert latest is not None
    assert latest.config == second
    assert latest.checkpoint == cp2
    assert latest.metadata == meta(1)
    assert latest.parent_config == first
    assert latest.pending_writes == []

    older = saver.get_tuple(first)
    assert older is not None
    assert older.checkpoint["channel_values"] == {"a": 1, "b": [1]}
    assert older.checkpoint["versions_seen"] == {"node": {"a": 1}}
    assert older.metadata == {**meta(0, source="input"), "user": "ann"}  # run metadata, no dunders
    assert older.parent_config is None
    assert saver.get(second) == cp2


def test_missing_things_return_none_without_creating_entries() -> None:
    saver = InMemorySaver()
    assert saver.get_tuple(thread("nobody")) is None
    chain(saver, thread(), 1)
    assert saver.get_tuple(thread(checkpoint_id="no-such-id")) is None
    assert saver.get_tuple(thread(ns="other")) is None
    assert set(saver.storage) == {"t1"}
    assert set(saver.storage["t1"]) == {""}


def test_thread_id_is_required() -> None:
    saver = InMemorySaver()
    with pytest.raises(ValueError, match="needs a thread id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(ValueError, match="needs a thread id"):
        list(saver.list({"configurable": {"checkpoint_ns": ""}}))


def test_put_serializes_so_later_mutation_does_not_leak() -> None:
    saver = InMemorySaver()
    values = {"items": [1]}
    cp = checkpoint(0, values, {"items": 1})
    config = saver.put(thread(), cp, meta(0), {"items": 1})
    cp["channel_values"]["items"].append(2)
    cp["channel_versions"]["items"] = 99
    writes = [("items", {"x": 1})]
    saver.put_writes(config, writes, "task")
    writes[0][1]["x"] = 2

    stored = saver.get_tuple(config)
    assert stored is not None
    assert stored.checkpoint["channel_values"] == {"items": [1]}
    assert stored.checkpoint["channel_versions"] == {"items": 1}
    assert stored.pending_writes == [("task", "items", {"x": 1})]


def test_only_channels_in_new_versions_get_blobs() -> None:
    saver = InMemorySaver()
    big = "x" * 1000
    first = saver.put(
        thread(),
        checkpoint(0, {"big": big, "n": 0}, {"big": 1, "n": 1}),
        meta(0),
        {
            "big": 1,
            "n": 1,
        },
    )
    # "big" is unchanged: even a different value handed in must not be stored.
    second = saver.put(
        first,
        checkpoint(1, {"big": "IGNORED", "n": 1}, {"big": 1, "n": 2}),
        meta(1),
        {"n": 2},
    )
    assert sorted(saver.blobs) == [
        ("t1", "", "big", 1),
        ("t1", "", "n", 1),
        ("t1", "", "n", 2),
    ]
    latest = saver.get_tuple(second)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"big": big, "n": 1}
    assert (
        saver.storage["t1"][""][second["configurable"]["checkpoint_id"]][2]
        == (first["configurable"]["checkpoint_id"])
    )


def test_channel_with_version_but_no_value_is_stored_empty() -> None:
    saver = InMemorySaver()
    config = saver.put(thread(), checkpoint(0, {}, {"gone": 3}), meta(0), {"gone": 3})
    assert saver.blobs[("t1", "", "gone", 3)] == ("empty", b"")
    stored = saver.get_tuple(config)
    assert stored is not None
    assert stored.checkpoint["channel_values"] == {}
    assert stored.checkpoint["channel_versions"] == {"gone": 3}


def test_error_write_reads_back_as_the_exception_repr() -> None:
    # The first example of the pending-writes design note.
    saver = InMemorySaver()
    (config,) = chain(saver, thread("123"), 1)
    task = "f9ff1e88-4d82-f417-ad11-8fd870bfe647"
    saver.put_writes(config, [("__error__", Exception("manllually raised exception"))], task)
    _, _, _, _, pending = saver.get_tuple(thread("123"))  # type: ignore[misc]
    assert pending == [(task, "__error__", "Exception('manllually raised exception')")]


def test_interrupt_and_resume_writes_follow_the_design_note() -> None:
    # The second example: foo interrupts three times, bar writes nothing.
    saver = InMemorySaver()
    (config,) = chain(saver, thread("123"), 1)
    foo, bar = "8d407c25-02f6-9101-d1b8-5a99c247edde", "22507855-e257-1b5b-eb1a-3c3fb0a071e9"
    iid = "5603cdf275d8b8ba0633d272fa176fd3"

    def pending() -> list[Any]:
        stored = saver.get_tuple(thread("123"))
        assert stored is not None
        return stored.pending_writes or []

    saver.put_writes(config, [("__interrupt__", [Interrupt("1st interrupt", iid)])], foo)
    saver.put_writes(config, [("__no_writes__", None)], bar)
    assert pending() == [
        (foo, "__interrupt__", [Interrupt("1st interrupt", iid)]),
        (bar, "__no_writes__", None),
    ]

    saver.put_writes(config, [("__resume__", "1st resume")], NULL_TASK_ID)
    saver.put_writes(config, [("__resume__", ["1st resume"])], foo)
    saver.put_writes(config, [("__interrupt__", [Interrupt("2nd interrupt", iid)])], foo)
    assert pending() == [
        (foo, "__interrupt__", [Interrupt("2nd interrupt", iid)]),
        (bar, "__no_writes__", None),
        (NULL_TASK_ID, "__resume__", "1st resume"),
        (foo, "__resume__", ["1st resume"]),
    ]

    saver.put_writes(config, [("__resume__", "2nd resume")], NULL_TASK_ID)
    saver.put_writes(config, [("__resume__", ["1st resume", "2nd resume"])], foo)
    saver.put_writes(config, [("__interrupt__", [Interrupt("3rd interrupt", iid)])], foo)
    saver.put_writes(config, [("__no_writes__", "a re-run must not replace this")], bar)
    assert pending() == [
        (foo, "__interrupt__", [Interrupt("3rd interrupt", iid)]),
        (bar, "__no_writes__", None),
        (NULL_TASK_ID, "__resume__", "2nd resume"),
        (foo, "__resume__", ["1st resume", "2nd resume"]),
    ]


def test_regular_writes_are_kept_once_stored() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    saver.put_writes(config, [("a", 1), ("b", 2)], "t-a", task_path="~path")
    saver.put_writes(config, [("a", 99), ("b", 98), ("c", 3)], "t-a")
    saver.put_writes(config, [("a", 5)], "t-b")
    stored = saver.get_tuple(config)
    assert stored is not None
    assert stored.pending_writes == [
        ("t-a", "a", 1),
        ("t-a", "b", 2),
        ("t-a", "c", 3),
        ("t-b", "a", 5),
    ]
    key = ("t1", "", config["configurable"]["checkpoint_id"])
    assert saver.writes[key][("t-a", 0)][3] == "~path"


def test_put_writes_needs_a_checkpoint_id() -> None:
    with pytest.raises(ValueError, match="task 'x' needs the checkpoint"):
        InMemorySaver().put_writes(thread(), [("a", 1)], "x")


def test_unserializable_write_fails_at_once_and_stores_nothing() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    with pytest.raises(SerdeError, match="lock"):
        saver.put_writes(config, [("a", 1), ("b", threading.Lock())], "task")
    stored = saver.get_tuple(config)
    assert stored is not None
    assert stored.pending_writes == []


# listing


def ids(tuples: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def test_list_newest_first_with_before_limit_and_filter() -> None:
    saver = InMemorySaver()
    configs = chain(saver, thread(), 5)
    all_ids = [c["configurable"]["checkpoint_id"] for c in configs]
    assert ids(saver.list(thread())) == all_ids[::-1]
    assert ids(saver.list(thread(), limit=2)) == all_ids[:2:-1]
    assert ids(saver.list(thread(), limit=0)) == []
    assert ids(saver.list(thread(), before=configs[3])) == all_ids[2::-1]
    assert ids(saver.list(thread(), before=configs[3], limit=1)) == [all_ids[2]]
    assert ids(saver.list(thread(), filter={"step": 1})) == [all_ids[1]]
    assert ids(saver.list(thread(), filter={"source": "loop"}, limit=3)) == all_ids[:1:-1]
    assert ids(saver.list(thread(), filter={"source": "input"})) == []
    assert ids(saver.list(thread(), filter={"absent": None})) == []
    assert ids(saver.list(configs[2])) == [all_ids[2]]

    newest = next(saver.list(thread()))
    assert newest.checkpoint["channel_values"] == {"n": 4}
    assert newest.parent_config == configs[3]


def test_list_includes_pending_writes() -> None:
    saver = InMemorySaver()
    configs = chain(saver, thread(), 2)
    saver.put_writes(configs[0], [("n", 10)], "task")
    listed = list(saver.list(thread()))
    assert [t.pending_writes for t in listed] == [[], [("task", "n", 10)]]


def test_list_across_threads_and_namespaces() -> None:
    saver = InMemorySaver()
    a = chain(saver, thread("a"), 2)
    b = chain(saver, thread("b"), 1)
    sub = chain(saver, thread("a", ns="child:1"), 1)
    everything = list(saver.list(None))
    assert sorted(ids(everything), reverse=True) == ids(everything)
    assert len(everything) == 4
    assert {t.config["configurable"]["thread_id"] for t in everything} == {"a", "b"}
    # a thread without a namespace lists every namespace; naming one narrows it
    expected = {c["configurable"]["checkpoint_id"] for c in [*a, *sub]}
    assert set(ids(saver.list({"configurable": {"thread_id": "a"}}))) == expected
    assert ids(saver.list(thread("a", ns="child:1"))) == [sub[0]["configurable"]["checkpoint_id"]]
    assert ids(saver.list(thread("b"))) == [b[0]["configurable"]["checkpoint_id"]]
    assert list(saver.list(thread("nobody"))) == []


# thread maintenance


def test_delete_thread_forgets_everything_of_that_thread_only() -> None:
    saver = InMemorySaver()
    gone = chain(saver, thread("gone"), 2)
    kept = chain(saver, thread("kept"), 2)
    saver.put_writes(gone[-1], [("n", 1)], "task")
    saver.put_writes(kept[-1], [("n", 1)], "task")
    saver.delete_thread("gone")
    assert saver.get_tuple(thread("gone")) is None
    assert all(k[0] == "kept" for k in saver.writes)
    assert all(k[0] == "kept" for k in saver.blobs)
    assert saver.get_tuple(thread("kept")) is not None
    saver.delete_thread("never-existed")


def test_copy_thread_duplicates_checkpoints_writes_and_values() -> None:
    saver = InMemorySaver()
    configs = chain(saver, thread("src"), 3)
    chain(saver, thread("src", ns="child:1"), 1)
    saver.put_writes(configs[-1], [("n", "pending")], "task")
    saver.copy_thread("src", "dst")

    for ns in ("", "child:1"):
        source = list(saver.list(thread("src", ns=ns)))
        copied = list(saver.list(thread("dst", ns=ns)))
        assert [(t.checkpoint, t.metadata, t.pending_writes) for t in copied] == [
            (t.checkpoint, t.metadata, t.pending_writes) for t in source
        ]
        assert all(t.config["configurable"]["thread_id"] == "dst" for t in copied)
    # the copy is independent of the source
    saver.delete_thread("src")
    latest = saver.get_tuple(thread("dst"))
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"n": 2}
    assert latest.pending_writes == [("task", "n", "pending")]


def test_prune_keep_latest_keeps_each_namespaces_latest_with_its_blobs_and_writes() -> None:
    saver = InMemorySaver()
    configs = chain(saver, thread(), 4)
    (sub,) = chain(saver, thread(ns="child:1"), 1)
    others = chain(saver, thread("other"), 2)
    saver.put_writes(configs[1], [("n", "old")], "task")
    saver.put_writes(configs[-1], [("n", "new")], "task")

    saver.prune(["t1"])

    assert ids(saver.list(thread())) == [configs[-1]["configurable"]["checkpoint_id"]]
    assert ids(saver.list(thread(ns="child:1"))) == [sub["configurable"]["checkpoint_id"]]
    latest = saver.get_tuple(thread())
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"n": 3}
    assert latest.pending_writes == [("task", "n", "new")]
    assert sorted(k for k in saver.blobs if k[0] == "t1") == [
        ("t1", "", "n", 4),
        ("t1", "child:1", "n", 1),
    ]
    assert [k[2] for k in saver.writes if k[0] == "t1"] == [
        configs[-1]["configurable"]["checkpoint_id"]
    ]
    assert len(list(saver.list(thread("other")))) == len(others)  # untouched


def test_prune_delete_and_bad_strategy() -> None:
    saver = InMemorySaver()
    chain(saver, thread("a"), 2)
    chain(saver, thread("b"), 2)
    saver.prune(["a", "b"], strategy="delete")
    assert list(saver.list(None)) == []
    assert not saver.blobs
    with pytest.raises(ValueError, match="'keep_latest' or 'delete', got 'all'"):
        saver.prune(["a"], strategy="all")  # type: ignore[arg-type]


# corruption


def test_corrupt_blob_names_the_channel() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    saver.blobs[("t1", "", "n", 1)] = ("pickle", b"\x80\x05garbage")
    with pytest.raises(CheckpointCorruptError) as info:
        saver.get_tuple(config)
    err = info.value
    assert (err.thread_id, err.checkpoint_ns, err.channel) == ("t1", "", "n")
    assert err.checkpoint_id == config["configurable"]["checkpoint_id"]
    assert "channel='n'" in str(err)
    assert isinstance(err.__cause__, SerdeError)


def test_corrupt_write_names_the_task() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    saver.put_writes(config, [("n", 1)], "the-task")
    key = ("t1", "", config["configurable"]["checkpoint_id"])
    saver.writes[key][("the-task", 0)] = ("the-task", "n", ("nonsense-tag", b""), "")
    with pytest.raises(CheckpointCorruptError, match="task_id='the-task'") as info:
        next(saver.list(thread()))
    assert info.value.channel == "n"


def test_corrupt_checkpoint_and_metadata_name_the_checkpoint() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    cid = config["configurable"]["checkpoint_id"]
    cp, md, parent = saver.storage["t1"][""][cid]
    saver.storage["t1"][""][cid] = (("str", b"not a checkpoint"), md, parent)
    with pytest.raises(CheckpointCorruptError, match="checkpoint is a str, not a dict"):
        saver.get_tuple(config)
    with pytest.raises(CheckpointCorruptError, match=f"checkpoint_id={cid!r}"):
        saver.prune(["t1"])
    saver.storage["t1"][""][cid] = (cp, ("int", b"x"), parent)
    with pytest.raises(CheckpointCorruptError, match="metadata cannot be loaded"):
        list(saver.list(None))


def test_disallowed_type_in_store_surfaces_the_allow_hint() -> None:
    class Local:
        pass

    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    with pytest.raises(SerdeError, match=r"Local is a local class"):
        saver.put_writes(config, [("n", Local())], "task")  # refused when saved
    assert saver.get_tuple(config).pending_writes == []  # type: ignore[union-attr]
    trusting = InMemorySaver(serde=JsonPlusSerializer(pickle_fallback=True))
    trusting.writes = saver.writes
    trusting.storage = saver.storage
    trusting.blobs = saver.blobs
    trusting.put_writes(config, [("n", Local())], "task")  # stored by value (cloudpickle)
    with pytest.raises(CheckpointCorruptError, match="pickle_fallback=True") as info:
        saver.get_tuple(config)
    assert isinstance(info.value.__cause__, UnsafeTypeError)
    stored = trusting.get_tuple(config)
    assert stored is not None
    assert type(stored.pending_writes[0][2]).__name__ == "Local"  # type: ignore[index]


# concurrency, async, scale


def test_concurrent_put_writes_lose_nothing() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)

    def worker(n: int) -> None:
        for i in range(300):
            saver.put_writes(config, [("n", i)], f"task-{n}-{i}")

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stored = saver.get_tuple(config)
    assert stored is not None
    assert len(stored.pending_writes or []) == 8 * 300


def test_async_twins_run_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_threads(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the in-memory saver must not hop to a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)

    async def scenario() -> tuple[CheckpointTuple | None, list[CheckpointTuple]]:
        async with InMemorySaver() as saver:
            config = await saver.aput(
                thread(), checkpoint(0, {"n": 1}, {"n": 1}), meta(0), {"n": 1}
            )
            await saver.aput_writes(config, [("n", 2)], "task")
            await saver.acopy_thread("t1", "t2")
            await saver.aprune(["t2"])
            listed = [t async for t in saver.alist(thread("t2"))]
            got = await saver.aget_tuple(config)
            assert got is not None
            assert await saver.aget(config) == got.checkpoint
            await saver.adelete_thread("t1")
            assert await saver.aget_tuple(config) is None
            return got, listed

    got, listed = asyncio.run(scenario())
    assert got is not None
    assert got.pending_writes == [("task", "n", 2)]
    assert len(listed) == 1


def test_context_manager_and_alias() -> None:
    with MemorySaver() as saver:
        assert isinstance(saver, InMemorySaver)
        chain(saver, thread(), 1)
        assert saver.get_tuple(thread()) is not None


def test_many_pending_writes_load_in_linear_time() -> None:
    saver = InMemorySaver()
    (config,) = chain(saver, thread(), 1)
    saver.put_writes(config, [(f"c{i}", i) for i in range(100_000)], "task")
    start = time.perf_counter()
    stored = saver.get_tuple(config)
    elapsed = time.perf_counter() - start
    assert stored is not None
    assert len(stored.pending_writes or []) == 100_000
    assert stored.pending_writes[-1] == ("task", "c99999", 99999)  # type: ignore[index]
    assert elapsed < 2.0  # ~0.05 s measured; quadratic would take minutes
