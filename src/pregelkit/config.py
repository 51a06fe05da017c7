"""What code running inside a task can ask for: its config, its stream writer,
the store. Mirrors ``langgraph.config``."""

from __future__ import annotations

from typing import Any

from pregelkit._internal._current import CURRENT, require_scope
from pregelkit.types import StreamWriter

__all__ = ["RunnableConfig", "get_config", "get_store", "get_stream_writer"]

RunnableConfig = dict[str, Any]
"""A run's config: a plain dict (``configurable``, ``recursion_limit``,
``tags``, ``metadata``, ...), where LangGraph uses langchain-core's
``TypedDict`` of the same keys."""


def get_config() -> dict[str, Any]:
    """The config of the running task (its ``configurable`` holds the thread id,
    the checkpoint namespace and the task id); an error outside a run."""
    return require_scope("get_config()").config


def _noop_writer(_: Any) -> None:
    return None


def get_stream_writer() -> StreamWriter:
    """A function that emits a chunk on the ``custom`` stream of the running
    graph; outside a run, or when nobody streams ``custom``, it does nothing."""
    scope = CURRENT.get()
    if scope is None:
        return _noop_writer
    writer: StreamWriter = scope.stream_writer
    return writer


def get_store() -> Any:
    """The store the running graph was given (``None`` if it has none); an
    error outside a run."""
    return require_scope("get_store()").run.store
