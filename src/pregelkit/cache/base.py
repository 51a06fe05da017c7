"""The cache interface: task writes stored under (namespace, key) with a TTL."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from pregelkit.checkpoint.serde.base import SerializerProtocol

ValueT = TypeVar("ValueT")
Namespace = tuple[str, ...]
FullKey = tuple[Namespace, str]

__all__ = ["BaseCache", "FullKey", "Namespace"]


class BaseCache(ABC, Generic[ValueT]):
    """Stores values under ``(namespace, key)``; an entry lives for its TTL in
    seconds, or forever when the TTL is ``None``."""

    serde: SerializerProtocol

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        if serde is None:
            from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer

            serde = JsonPlusSerializer()
        self.serde = serde

    @abstractmethod
    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The live entries among ``keys``; missing and expired ones are left out."""

    @abstractmethod
    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]: ...

    @abstractmethod
    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store ``key -> (value, ttl seconds or None)``."""

    @abstractmethod
    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None: ...

    @abstractmethod
    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Drop the entries of these namespaces, or all entries."""

    @abstractmethod
    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None: ...

    def _encoded(
        self, pairs: Mapping[FullKey, tuple[ValueT, int | None]], now: float
    ) -> Iterator[tuple[Namespace, str, str, bytes, float | None]]:
        """What ``set`` stores of each pair: namespace, key, the value's tag
        and bytes, and when it expires (``None``: never); a negative TTL is
        an error."""
        for (namespace, key), (value, ttl) in pairs.items():
            if ttl is not None and ttl < 0:
                raise ValueError(
                    f"ttl for cache key {key!r} in namespace {namespace!r} is {ttl}; "
                    f"give seconds >= 0, or None to keep the entry forever"
                )
            tag, data = self.serde.dumps_typed(value)
            yield namespace, key, tag, data, None if ttl is None else now + ttl
