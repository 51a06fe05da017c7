"""The runtime a node or task can ask for by naming a ``runtime`` parameter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pregelkit._internal._scope import require_scope

ContextT = TypeVar("ContextT")

__all__ = ["Runtime", "get_runtime"]


def _noop_writer(_: Any) -> None:
    return None


def _noop_heartbeat() -> None:
    return None


@dataclass(frozen=True)
class Runtime(Generic[ContextT]):
    """What the run offers a task: the user's context, the store, the stream
    writer, the thread's previous return value, and ``heartbeat()``: a sign of
    progress that restarts the task's ``TimeoutPolicy.idle_timeout`` clock."""

    context: ContextT | None = None
    store: Any = None
    stream_writer: Any = field(default=_noop_writer)
    previous: Any = None
    heartbeat: Callable[[], None] = field(default=_noop_heartbeat)


def get_runtime() -> Runtime[Any]:
    """The running task's ``Runtime``; call it from inside a task or node."""
    runtime: Runtime[Any] = require_scope("get_runtime()").runtime()
    return runtime
