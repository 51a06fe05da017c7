"""Shaping what the loop emits: input writes, values, updates, task events."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pregelkit._internal._constants import ERROR, INTERRUPT, PUSH, RESERVED, RETURN
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import EmptyChannelError
from pregelkit.pregel._graph.call import Call
from pregelkit.types import PregelExecutableTask

__all__ = ["map_input", "map_output_updates", "read_channels", "task_result_event"]


def read_channels(
    channels: Mapping[str, BaseChannel[Any, Any, Any]], select: str | Sequence[str]
) -> Any:
    """One channel's value (``str``), or a dict of the available ones."""
    if isinstance(select, str):
        try:
            return channels[select].get()
        except EmptyChannelError:
            return None
    values = {}
    for k in select:
        c = channels[k]
        if c.is_available():
            values[k] = c.get()
    return values


def map_input(input_channels: str | Sequence[str], chunk: Any) -> Iterator[tuple[str, Any]]:
    """The writes an input makes: the whole input to one channel, or a dict's
    keys to the channels of the same name."""
    if chunk is None:
        return
    if isinstance(input_channels, str):
        yield (input_channels, chunk)
        return
    if not isinstance(chunk, dict):
        raise TypeError(
            f"this graph takes a dict of input channels {list(input_channels)}, "
            f"got {type(chunk).__name__}"
        )
    unknown = [k for k in chunk if k not in input_channels]
    if unknown:
        raise ValueError(
            f"input names channels that are not input channels: {unknown}; "
            f"input channels: {list(input_channels)}"
        )
    for k in input_channels:
        if k in chunk:
            yield (k, chunk[k])


def map_output_updates(
    stream_keys: str | Sequence[str],
    task: PregelExecutableTask,
    writes: Sequence[tuple[str, Any]],
    cached: bool = False,
) -> dict[str, Any] | None:
    """``{task name: what it wrote}`` for the updates stream."""
    if writes and writes[0][0] in (INTERRUPT, ERROR):
        return None
    if type(task.proc) is Call:
        value = next((v for c, v in writes if c == RETURN), None)
    elif isinstance(stream_keys, str):
        value = None
        found = False
        for c, v in writes:
            if c == stream_keys:
                value = v
                found = True
        if not found and task.path[0] == PUSH and not any(c not in RESERVED for c, _ in writes):
            value = None
    else:
        picked = {c: v for c, v in writes if c in stream_keys}
        value = picked or None
    update: dict[str, Any] = {task.name: value}
    if cached:
        update["__metadata__"] = {"cached": True}
    return update


def task_start_event(task: PregelExecutableTask) -> dict[str, Any]:
    return {"id": task.id, "name": task.name, "input": task.input, "triggers": task.triggers}


def task_result_event(
    task: PregelExecutableTask,
    writes: Sequence[tuple[str, Any]],
    stream_keys: str | Sequence[str],
) -> dict[str, Any]:
    """The ``task_result`` payload, as LangGraph 1.2 shapes it: ``result`` is
    ``{channel: value}`` of the task's writes to the streamed channels (and its
    return value), ``interrupts`` are plain dicts."""
    keys = (stream_keys,) if isinstance(stream_keys, str) else stream_keys
    error = next((v for c, v in writes if c == ERROR), None)
    interrupts = [
        {"value": i.value, "id": i.id, "response_schema": i.response_schema}
        for c, v in writes
        if c == INTERRUPT
        for i in v
    ]
    if type(task.proc) is Call:
        result = [(c, v) for c, v in writes if c == RETURN]
    else:
        result = [(c, v) for c, v in writes if c == RETURN or (c in keys and c not in RESERVED)]
    return {
        "id": task.id,
        "name": task.name,
        "error": error,
        "result": fold_writes(result),
        "interrupts": interrupts,
    }


def fold_writes(writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``{channel: value}``; a channel written more than once gets
    ``{"$writes": [value, ...]}``."""
    result: dict[str, Any] = {}
    for channel, value in writes:
        if channel in result:
            existing = result[channel]
            folded = (
                existing["$writes"]
                if isinstance(existing, dict) and isinstance(existing.get("$writes"), list)
                else [existing]
            )
            result[channel] = {"$writes": [*folded, value]}
        else:
            result[channel] = value
    return result


def print_debug(event: dict[str, Any]) -> None:
    """One line per debug event, for ``debug=True``: what ran, what it wrote,
    which checkpoints were made."""
    step, kind, payload = event["step"], event["type"], event["payload"]
    if kind == "task":
        text = f"task {payload['name']} starts with {payload['input']!r:.200}"
    elif kind == "task_result":
        if payload["error"] is not None:
            outcome = f"failed: {payload['error']!r:.200}"
        elif payload["interrupts"]:
            outcome = f"interrupted: {[i['value'] for i in payload['interrupts']]!r:.200}"
        else:
            outcome = f"wrote {payload['result']!r:.200}"
        text = f"task {payload['name']} {outcome}"
    else:
        checkpoint_id = payload["config"]["configurable"].get("checkpoint_id")
        text = f"checkpoint {checkpoint_id} values {payload['values']!r:.200}"
    print(f"[pregelkit step {step}] {text}", flush=True)
