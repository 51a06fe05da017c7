"""A task cache kept in process memory."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Mapping, Sequence
from time import monotonic

from pregelkit.cache.base import BaseCache, FullKey, Namespace, ValueT
from pregelkit.checkpoint.serde.base import SerializerProtocol

__all__ = ["InMemoryCache"]

# Indirection so tests can move time forward; monotonic because entries never
# leave this process, and a wall-clock jump must not expire or revive them.
_now = monotonic

_Entry = tuple[str, bytes, float | None]
"""(serializer tag, serialized value, monotonic expiry time or None)"""


class InMemoryCache(BaseCache[ValueT]):
    """A thread-safe cache in a dict, for one process.

    Values are stored serialized, so a caller mutating a value it cached or got
    back cannot change what later hits return, and a value the serializer
    cannot handle fails at ``set`` here just as it would with a persistent
    cache. A TTL of 0 stores an entry that is already expired.

    Expired entries are never returned. They are dropped lazily: a min-heap of
    expiry times lets each ``get``/``set`` discard the ones that have passed,
    so entries that are never asked for again do not pile up.
    """

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self._lock = threading.Lock()
        self._entries: dict[Namespace, dict[str, _Entry]] = {}
        self._expiries: list[tuple[float, Namespace, str]] = []

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The live entries among ``keys``; see :meth:`BaseCache.get`."""
        with self._lock:
            self._drop_expired()
            found: dict[FullKey, _Entry] = {}
            for namespace, key in keys:
                entry = self._entries.get(namespace, {}).get(key)
                if entry is not None:
                    found[(namespace, key)] = entry
        # Deserialize outside the lock: it may be slow and touches no shared state.
        return {
            full_key: self.serde.loads_typed((tag, data))
            for full_key, (tag, data, _) in found.items()
        }

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store ``key -> (value, ttl seconds or None)``; see :meth:`BaseCache.set`."""
        now = _now()
        prepared: list[tuple[Namespace, str, _Entry]] = [
            (namespace, key, (tag, data, expires_at))
            for namespace, key, tag, data, expires_at in self._encoded(pairs, now)
        ]
        with self._lock:
            for namespace, key, entry in prepared:
                self._entries.setdefault(namespace, {})[key] = entry
                if entry[2] is not None:
                    heapq.heappush(self._expiries, (entry[2], namespace, key))
            self._drop_expired()

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Drop the entries of ``namespaces``, or every entry when it is ``None``."""
        with self._lock:
            if namespaces is None:
                self._entries.clear()
                self._expiries.clear()
                return
            for namespace in namespaces:
                self._entries.pop(namespace, None)

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """Same as :meth:`get`: memory access does not block, so no thread hop."""
        return self.get(keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Same as :meth:`set`."""
        self.set(pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Same as :meth:`clear`."""
        self.clear(namespaces)

    def _drop_expired(self) -> None:
        # Caller holds the lock. A heap record is stale when its key was
        # cleared or re-set since; only drop the entry it still describes.
        now = _now()
        while self._expiries and self._expiries[0][0] <= now:
            expires_at, namespace, key = heapq.heappop(self._expiries)
            entries = self._entries.get(namespace)
            if entries is None:
                continue
            entry = entries.get(key)
            if entry is not None and entry[2] == expires_at:
                del entries[key]
                if not entries:
                    del self._entries[namespace]
