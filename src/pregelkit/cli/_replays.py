"""Telling a replayed result from a cache hit in a continued run's updates.

When a run continues a thread, its first step takes the results its tasks
saved before the run stopped instead of running them again, and the
``updates`` stream marks them ``cached`` (as LangGraph does). They are not
cache hits: ``pregelkit run`` and ``resume`` label them ``replayed``. Those
updates come first, before anything of the new run: the leading cached
updates of tasks that had saved results are the replays.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pregelkit.cli._status import task_labels

if TYPE_CHECKING:
    from pregelkit.cli._db import Database

__all__ = ["Replays"]

_PULL = "~__pregel_pull"


class Replays:
    """The saved results a continued run replays, by task name, consumed as
    their updates arrive; the first update that is not one ends the replay."""

    def __init__(self, db: Database | None = None, thread_id: str | None = None) -> None:
        self.left: Counter[str] = Counter()
        if db is None or thread_id is None:
            return
        from pregelkit.pregel._plan.algo import is_done_write

        conf = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        tup = db.saver.get_tuple(conf)
        if tup is None or not tup.pending_writes:
            return
        cid = tup.config["configurable"]["checkpoint_id"]
        # only a step's own tasks are replayed as updates; a task call's saved
        # result goes back to its caller without one
        pulled = {t for t, path in db.task_paths(thread_id, cid).items() if path.startswith(_PULL)}
        labels = task_labels(db, tup)
        done = {t for t, channel, _ in tup.pending_writes if is_done_write(channel)}
        self.left.update(labels.get(t, "-") for t in done & pulled)

    @classmethod
    def none(cls) -> Replays:
        """A run from a new input: nothing is replayed."""
        return cls()

    def take(self, name: str, cached: bool) -> bool:
        """Whether this update of task ``name`` is a replayed result."""
        if cached and self.left[name] > 0:
            self.left[name] -= 1
            return True
        self.left.clear()
        return False
