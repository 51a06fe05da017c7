"""A thread's state as LangGraph's server shows it (``ThreadState``): its
values, next nodes, checkpoint, metadata, tasks and interrupts, from a
``StateSnapshot``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pregelkit._internal._snapshot import PregelTask, StateSnapshot
from pregelkit.server._json import jsonable


def checkpoint_of(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    conf = config.get("configurable", {})
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map"),
    }


def _task(task: PregelTask) -> dict[str, Any]:
    state = task.state
    return {
        "id": task.id,
        "name": task.name,
        "error": None if task.error is None else f"{type(task.error).__name__}: {task.error}",
        "interrupts": jsonable(list(task.interrupts)),
        "checkpoint": checkpoint_of(state) if isinstance(state, Mapping) else None,
        "state": thread_state(state) if isinstance(state, StateSnapshot) else None,
        "result": jsonable(task.result),
    }


def thread_state(snapshot: StateSnapshot) -> dict[str, Any]:
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "checkpoint": checkpoint_of(snapshot.config),
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": checkpoint_of(snapshot.parent_config),
        "tasks": [_task(t) for t in snapshot.tasks],
        "interrupts": jsonable(list(snapshot.interrupts)),
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    """The state of a thread no run has saved anything for."""
    return {
        "values": {},
        "next": [],
        "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None,
                       "checkpoint_map": None},
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": [],
    }  # fmt: skip
