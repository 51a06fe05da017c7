"""The runtime a node or task can ask for by naming a ``runtime`` parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

ContextT = TypeVar("ContextT")

__all__ = ["Runtime"]


def _noop_writer(_: Any) -> None:
    return None


@dataclass(frozen=True)
class Runtime(Generic[ContextT]):
    """What the run offers a task: the user's context, the store, the stream
    writer, and the thread's previous return value."""

    context: ContextT | None = None
    store: Any = None
    stream_writer: Any = field(default=_noop_writer)
    previous: Any = None
