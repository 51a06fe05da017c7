"""What ``get_delta_channel_history`` returns: for each channel, the writes
made to it along a checkpoint's ancestor chain (oldest first) back to the
nearest ancestor that stores a value for it (the seed).

The walk is a generator that asks for one checkpoint tuple at a time, so the
sync and async savers share it and differ only in how they fetch.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import CheckpointTuple

PendingWrite = tuple[str, str, Any]


class DeltaChannelHistory(TypedDict):
    """One channel's history: ``writes`` (task id, channel, value) oldest to
    newest, and ``seed``, the value stored at the ancestor where the walk
    stopped (absent when it reached the root without one: start empty)."""

    writes: list[PendingWrite]
    seed: NotRequired[Any]


def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
    """The order a superstep's writes are applied in: by task path, then task
    id, then index; a replay of stored writes must sort them the same way."""
    return (task_path, task_id, idx)


Walk = Generator[dict[str, Any], "CheckpointTuple | None", dict[str, DeltaChannelHistory]]


def walk(config: dict[str, Any], channels: Sequence[str]) -> Walk:
    """Yields the config of each checkpoint to fetch (the target first, then
    its parents); is sent the tuple; returns the history of every channel.

    Writes stored at the target itself are left out: they are pending for the
    step after it, not part of its state. A parent chain that comes back to a
    checkpoint already walked (a ``put`` that re-parented an existing id) ends
    the walk there instead of looping forever."""
    pending = list(dict.fromkeys(channels))
    chunks: dict[str, list[list[PendingWrite]]] = {ch: [] for ch in pending}
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in pending}
    current = (yield config) if pending else None
    first = True
    seen: set[tuple[Any, Any]] = set()
    while current is not None and pending:
        conf = current.config.get("configurable", {})
        here = (conf.get("checkpoint_ns"), conf.get("checkpoint_id"))
        if here in seen:
            break
        seen.add(here)
        values = current.checkpoint["channel_values"]
        for ch in list(pending):
            if not first:
                chunks[ch].append([w for w in current.pending_writes or () if w[1] == ch])
            if ch in values:
                result[ch]["seed"] = values[ch]
                pending.remove(ch)
        first = False
        if not pending or current.parent_config is None:
            break
        current = yield current.parent_config
    for ch, found in chunks.items():
        result[ch]["writes"] = [w for chunk in reversed(found) for w in chunk]
    return result
