"""Where a run's checkpoints come from, their channel versions, and what is not saved yet.

``Lineage`` holds the ids that tie a run's checkpoints together (the last
one made, the last one saved, the previous one's config, the parents of a
nested run's), how a step's writes are versioned (the saver's next version
after the highest so far, and the channels cleared at each step that hold
a value), and the channels changed since the last save. It is the core's
own state, kept apart only so that it says what it is; the core applies a
step's writes with it (``PregelLoop._apply``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Lineage"]


class Lineage:
    """The ids and versions of a run's checkpoint line, and what is not saved yet."""

    __slots__ = (
        "last_id",
        "live_ephemeral",
        "max_version",
        "next_version",
        "parents",
        "prev_config",
        "saved_id",
        "unsaved",
    )

    def __init__(
        self,
        last_id: str,
        saved_id: str | None,
        prev_config: dict[str, Any] | None,
        parents: dict[str, str],
        next_version: Callable[[Any], Any],
    ) -> None:
        # new ids sort after ``last_id`` (the thread's newest, whatever the
        # clock says); ``saved_id`` is the last saved (None: the run's start
        # is not); ``parents`` the checkpoint of each enclosing namespace
        self.last_id, self.saved_id, self.parents = last_id, saved_id, parents
        self.prev_config = prev_config
        self.next_version = next_version
        self.max_version: Any = None
        """The highest channel version so far."""
        self.live_ephemeral: set[str] = set()
        """Channels cleared at each step that hold a value now."""
        self.unsaved: set[str] = set()
        """Channels changed since the last save."""
