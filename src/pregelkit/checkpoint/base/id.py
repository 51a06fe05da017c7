"""Time-ordered UUIDs (version 6), as ``langgraph.checkpoint.base.id`` has
them: checkpoint ids made with them sort in creation order."""

from __future__ import annotations

import uuid

from pregelkit._internal import _ids

__all__ = ["uuid6"]

_NODE_MASK = 0xFFFFFFFFFFFF


def uuid6(node: int | None = None, clock_seq: int | None = None) -> uuid.UUID:
    """A new UUIDv6, later than every one made before it in this process.

    ``node`` (48 bits) replaces the random node part; ``clock_seq`` (14 bits)
    the random clock sequence (checkpoint ids use the step number).
    """
    value = uuid.UUID(_ids.uuid6(clock_seq=clock_seq))
    if node is None:
        return value
    return uuid.UUID(int=(value.int & ~_NODE_MASK) | (node & _NODE_MASK))
