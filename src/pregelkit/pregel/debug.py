"""Payload helpers of the ``debug`` and ``tasks`` stream modes, under
LangGraph's names (``langgraph.pregel.debug``), for code that builds or reads
those payloads itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pregelkit._internal._constants import CONF, ERROR, INTERRUPT, RETURN
from pregelkit.checkpoint.base import EXCLUDED_METADATA_KEYS
from pregelkit.pregel._plan.io import fold_writes
from pregelkit.types import PregelExecutableTask

__all__ = [
    "get_bolded_text",
    "get_colored_text",
    "is_multiple_channel_write",
    "map_debug_task_results",
    "map_debug_tasks",
    "map_task_result_writes",
    "rm_pregel_keys",
]

COLOR_MAPPING = {
    "black": "0",
    "red": "1",
    "green": "2",
    "yellow": "3",
    "blue": "4",
    "magenta": "5",
    "cyan": "6",
    "white": "7",
    "gray": "8",
}


# Metadata the engine adds to every task's config: the task's own fields and
# namespace already say it, so a ``task`` payload leaves it out.
_ENGINE_METADATA = EXCLUDED_METADATA_KEYS


def map_debug_tasks(tasks: Iterable[PregelExecutableTask]) -> Iterator[dict[str, Any]]:
    """The ``task`` payload of each task: id, name, input and triggers, plus
    ``metadata`` when the task's config carries some of the caller's own
    (its ``metadata`` less the engine's keys, and its tags but the
    ``seq:step`` markers, under ``tags``)."""
    for task in tasks:
        config = task.config
        tags = (config or {}).get("tags") or ()
        if "langsmith:hidden" in tags:
            continue
        payload = {"id": task.id, "name": task.name, "input": task.input, "triggers": task.triggers}
        if config:
            metadata = {
                k: v for k, v in (config.get("metadata") or {}).items() if k not in _ENGINE_METADATA
            }
            user_tags = [t for t in tags if not t.startswith("seq:step")]
            if user_tags:
                metadata["tags"] = user_tags
            if metadata:
                payload["metadata"] = metadata
        yield payload


def is_multiple_channel_write(value: Any) -> bool:
    """Whether ``value`` already folds several writes to one channel."""
    return isinstance(value, dict) and isinstance(value.get("$writes"), list)


def map_task_result_writes(writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``{channel: value}``; a channel written more than once gets
    ``{"$writes": [value, ...]}``."""
    return fold_writes(writes)


def map_debug_task_results(
    task_tup: tuple[PregelExecutableTask, Sequence[tuple[str, Any]]],
    stream_keys: str | Sequence[str],
) -> Iterator[dict[str, Any]]:
    """The ``task_result`` payload of a finished task: its error, its writes
    to ``stream_keys`` (and its return value), and its interrupts as dicts."""
    keys = [stream_keys] if isinstance(stream_keys, str) else list(stream_keys)
    task, writes = task_tup
    yield {
        "id": task.id,
        "name": task.name,
        "error": next((v for c, v in writes if c == ERROR), None),
        "result": map_task_result_writes([w for w in writes if w[0] in keys or w[0] == RETURN]),
        "interrupts": [
            _interrupt_dict(i)
            for c, v in writes
            if c == INTERRUPT
            for i in (v if isinstance(v, Sequence) else [v])
        ],
    }


def _interrupt_dict(interrupt: Any) -> dict[str, Any]:
    return {f.name: getattr(interrupt, f.name) for f in dataclasses.fields(interrupt)}


def rm_pregel_keys(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """``config`` with only its ``configurable``, less the engine's own keys."""
    if config is None:
        return None
    return {
        CONF: {
            k: v
            for k, v in config.get(CONF, {}).items()
            if not k.startswith(("__pregel_", "__pregelkit_"))
        }
    }


def get_colored_text(text: str, color: str) -> str:
    """``text`` in bold ``color`` for a terminal."""
    return f"\033[1;3{COLOR_MAPPING[color]}m{text}\033[0m"


def get_bolded_text(text: str) -> str:
    """``text`` in bold for a terminal."""
    return f"\033[1m{text}\033[0m"
