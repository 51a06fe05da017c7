"""The run's use of the task cache: which tasks to look up, what a hit
gives, and the results on their way to the cache.

``TaskCache`` makes no cache call: it says what to read (``ReadCache``)
and write (``WriteCache``), and the performer reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pregelkit.cache.base import BaseCache
from pregelkit.pregel._core.effects import CacheKey, ReadCache, WriteCache
from pregelkit.types import PregelExecutableTask

__all__ = ["TaskCache"]

Writes = list[tuple[str, Any]]


class TaskCache:
    """The cache of one run, and the results it has not written yet."""

    __slots__ = ("cache", "fresh")

    def __init__(self, cache: BaseCache[Any] | None) -> None:
        self.cache = cache
        self.fresh: dict[CacheKey, Writes] = {}
        """Results of this run on their way to the cache (written in the
        background): a same-run call with the same key is served from here."""

    def wanted(self, tasks: Iterable[PregelExecutableTask]) -> dict[CacheKey, PregelExecutableTask]:
        """The tasks of a step to look up, by key: those with a cache key and no writes yet."""
        if self.cache is None:
            return {}
        return {
            (t.cache_key.ns, t.cache_key.key): t
            for t in tasks
            if t.cache_key is not None and not t.writes
        }

    @staticmethod
    def read(wanted: Mapping[CacheKey, PregelExecutableTask]) -> ReadCache:
        return ReadCache(list(wanted))

    def hits(
        self, wanted: Mapping[CacheKey, PregelExecutableTask], found: Mapping[CacheKey, Writes]
    ) -> list[tuple[PregelExecutableTask, Writes]]:
        """The tasks ``found`` (a cache read) answers, with this run's fresh results."""
        if self.fresh:
            fresh = {k: self.fresh[k] for k in wanted if k in self.fresh}
            found = {**found, **fresh} if fresh else found
        hits = []
        for key, writes in found.items():
            task = wanted.get(key)
            if task is not None and writes:
                hits.append((task, writes))
        return hits

    def key_of(self, task: PregelExecutableTask) -> CacheKey | None:
        """The cache key of a call, if the run has a cache and the call a policy."""
        if task.cache_key is None or self.cache is None:
            return None
        return (task.cache_key.ns, task.cache_key.key)

    def write(self, task: PregelExecutableTask, writes: Writes) -> WriteCache | None:
        """A task's result on its way to the cache."""
        key = task.cache_key
        if key is None or self.cache is None:
            return None
        full = (key.ns, key.key)
        self.fresh[full] = writes
        return WriteCache({full: (writes, key.ttl)}, self.fresh, "async")
