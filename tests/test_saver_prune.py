"""``prune(strategy="keep_latest")`` keeps what a thread needs to resume.

A run's writes may reach the saver before the checkpoint they belong to (an
async save of the checkpoint still on its way, a subgraph whose first
checkpoint is not saved yet; LangGraph's savers accept writes for any
checkpoint id): those writes are the results of finished
tasks, and once the checkpoint lands they are its pending writes. A prune
in between must leave them, or the resume runs the finished tasks again.
What belongs to the checkpoints a prune drops goes with them. ``aprune``
runs the same statements (memory: the same code).
"""

from __future__ import annotations

from typing import Any

import pytest

from pregelkit.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from test_savers import checkpoint, conf, meta, new_thread, put_chain

Saver = BaseCheckpointSaver[Any]


def _early_writes(saver: Saver) -> tuple[str, Any, Any, Any]:
    """A thread of two checkpoints, the writes of each, and writes saved
    ahead of the next checkpoint and of a subgraph's first one."""
    thread_id = new_thread()
    first, second = put_chain(saver, thread_id, 2)
    saver.put_writes(first, [("x", "stale")], "old-task")
    saver.put_writes(second, [("x", "pending")], "task-a")
    version = saver.get_next_version(saver.get_next_version(saver.get_next_version(None)))
    upcoming = checkpoint({"x": 2}, {"x": version})
    saver.put_writes(conf(thread_id, checkpoint_id=upcoming["id"]), [("x", "early")], "task-b")
    child = empty_checkpoint()
    child_config = conf(thread_id, "child:1", child["id"])
    saver.put_writes(child_config, [("y", "early child")], "task-c")
    return thread_id, (first, second), (upcoming, version), (child, child_config)


def _check_after_prune(saver: Saver, made: tuple[str, Any, Any, Any]) -> None:
    thread_id, (first, second), (upcoming, version), (child, child_config) = made
    kept = saver.get_tuple(second)
    assert kept is not None and kept.pending_writes == [("task-a", "x", "pending")]
    # the checkpoints the early writes belong to land after the prune
    saved = saver.put(second, upcoming, meta(2), {"x": version})
    landed = saver.get_tuple(saved)
    assert landed is not None and landed.pending_writes == [("task-b", "x", "early")]
    saver.put(conf(thread_id, "child:1"), child, meta(0), {})
    sub = saver.get_tuple(child_config)
    assert sub is not None and sub.pending_writes == [("task-c", "y", "early child")]
    # what belonged to a pruned checkpoint went with it: saved again, it has no writes
    assert saver.get_tuple(first) is None
    old = checkpoint({"x": 0}, {"x": saver.get_next_version(None)})
    old["id"] = first["configurable"]["checkpoint_id"]
    saver.put(conf(thread_id), old, meta(0), {})
    back = saver.get_tuple(first)
    assert back is not None and back.pending_writes == [], back.pending_writes


def test_keep_latest_keeps_writes_saved_before_their_checkpoint(saver: Saver) -> None:
    made = _early_writes(saver)
    saver.prune([made[0]], strategy="keep_latest")
    _check_after_prune(saver, made)


def test_a_lone_thread_id_string_is_refused_before_anything_is_pruned(saver: Saver) -> None:
    # "ab" read as a sequence would prune the threads "a" and "b"
    for name in ("a", "b", "ab"):
        put_chain(saver, name, 2)
    with pytest.raises(TypeError, match=r"pass \['ab'\]"):
        saver.prune("ab")
    with pytest.raises(TypeError, match="thread ids are strings, got int"):
        saver.prune(["a", 7])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'keep_latest' or 'delete'"):
        saver.prune(["a"], strategy="everything")  # type: ignore[arg-type]
    for name in ("a", "b", "ab"):
        assert len(list(saver.list(conf(name)))) == 2


def test_aprune_refuses_a_lone_string_too(async_saver: Saver, arun: Any) -> None:
    put_chain(async_saver, "ab", 2)
    with pytest.raises(TypeError, match=r"pass \['ab'\]"):
        arun(async_saver.aprune("ab"))
    assert len(list(async_saver.list(conf("ab")))) == 2
