"""Where a run's checkpoints come from and what they have not saved yet.

``Lineage`` holds the ids that tie a run's checkpoints together (the last
one made, the last one saved, the previous one's config, the parents of a
nested run's) and the channels changed since the last save; ``Versions``
the channel versions a step's writes are applied with. Both are the core's
own state, kept apart only so that each says what it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pregelkit.channels.base import BaseChannel
from pregelkit.checkpoint.base import Checkpoint
from pregelkit.pregel._plan.algo import apply_writes

__all__ = ["Lineage", "Versions"]


class Lineage:
    """The ids of a run's checkpoint line, and what is not saved yet."""

    __slots__ = ("last_id", "parents", "prev_config", "saved_id", "unsaved")

    def __init__(
        self,
        last_id: str,
        saved_id: str | None,
        prev_config: dict[str, Any] | None,
        parents: dict[str, str],
    ) -> None:
        # new ids sort after ``last_id`` (the thread's newest, whatever the
        # clock says); ``saved_id`` is the last saved (None: the run's start
        # is not); ``parents`` the checkpoint of each enclosing namespace
        self.last_id, self.saved_id, self.parents = last_id, saved_id, parents
        self.prev_config = prev_config
        self.unsaved: set[str] = set()
        """Channels changed since the last save."""


class Versions:
    """How a step's writes become channel versions."""

    __slots__ = ("live_ephemeral", "max", "next")

    def __init__(self, next: Callable[[Any], Any]) -> None:
        self.next = next
        self.max: Any = None
        self.live_ephemeral: set[str] = set()
        """Channels cleared at each step that hold a value now."""

    def apply(
        self,
        checkpoint: Checkpoint,
        channels: Mapping[str, BaseChannel[Any, Any, Any]],
        tasks: Sequence[Any],
        trigger_to_nodes: Mapping[str, Sequence[str]],
        changed: set[str],
    ) -> set[str]:
        """Apply ``tasks``' writes; the channels updated (``changed``: those whose value moved)."""
        updated = apply_writes(
            checkpoint,
            channels,
            tasks,
            self.next,
            trigger_to_nodes,
            live_ephemeral=self.live_ephemeral,
            changed=changed,
            max_version=self.max,
        )
        if changed:
            versions = checkpoint["channel_versions"]
            self.max = max(versions[c] for c in changed if c in versions)
        return updated
