"""The loop's use of the task cache: hits found before a step runs, and a
hit saved as the task's writes so a replay needs no cache.

``LoopCache`` is a base of ``PregelLoop``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pregelkit.checkpoint.attempts import Outcome
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.pregel._algo import task_path_str
from pregelkit.pregel._attempts import AttemptLog
from pregelkit.pregel._hooks import AttemptHooks
from pregelkit.pregel._loop_events import LoopEvents
from pregelkit.types import PregelExecutableTask

__all__ = ["LoopCache"]


class LoopCache(LoopEvents):
    """Cache lookups and cache-hit records of one run."""

    cache: Any
    checkpointer: BaseCheckpointSaver[Any] | None
    checkpoint_config: dict[str, Any]
    checkpoint_pending_writes: list[tuple[str, str, Any]]
    durability: str
    tasks: dict[str, PregelExecutableTask]
    _fresh: dict[tuple[Any, str], list[tuple[str, Any]]]
    _keep_writes: bool
    attempt_log: AttemptLog | None
    hooks: AttemptHooks | None
    _attempt_instant: Callable[[PregelExecutableTask, Outcome], None]

    def _background(
        self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any, apart: bool = False
    ) -> None:
        raise NotImplementedError

    def _record_cached(self, task: PregelExecutableTask) -> None:
        """Save a cache hit as the task's writes, so a replay needs no cache."""
        writes = list(task.writes)
        if self.attempt_log is not None or self.hooks is not None:
            self._attempt_instant(task, "cached")
        if self._keep_writes:
            self.checkpoint_pending_writes.extend((task.id, c, v) for c, v in writes)
        if self.checkpointer is not None and self.durability != "exit":
            saver = self.checkpointer
            self._background(
                saver.put_writes,
                saver.aput_writes,
                self.checkpoint_config,
                writes,
                task.id,
                task_path_str(task.path),
            )

    def _cache_set(self, pairs: Mapping[tuple[Any, str], Any]) -> None:
        assert self.cache is not None
        self.cache.set(pairs)
        for key in pairs:
            self._fresh.pop(key, None)

    async def _acache_set(self, pairs: Mapping[tuple[Any, str], Any]) -> None:
        assert self.cache is not None
        await self.cache.aset(pairs)
        for key in pairs:
            self._fresh.pop(key, None)

    def _cached_lookup(self) -> dict[tuple[Any, str], PregelExecutableTask]:
        if self.cache is None:
            return {}
        return {
            (t.cache_key.ns, t.cache_key.key): t
            for t in self.tasks.values()
            if t.cache_key is not None and not t.writes
        }

    def _apply_cached(
        self, wanted: dict[tuple[Any, str], PregelExecutableTask], found: Mapping[Any, Any]
    ) -> list[PregelExecutableTask]:
        matched = []
        if self._fresh:
            fresh = {k: self._fresh[k] for k in wanted if k in self._fresh}
            found = {**found, **fresh} if fresh else found
        for key, writes in found.items():
            task = wanted.get(key)
            if task is not None and writes:
                task.writes.extend(writes)
                self._output_writes(task, writes, True)
                self._record_cached(task)
                matched.append(task)
        return matched
