"""The serializer protocol every saver and cache speaks."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = [
    "LoadLimitError",
    "SerdeError",
    "SerializerProtocol",
    "StoredAt",
    "UnsafeTypeError",
    "dumps_at",
    "loads_at",
]


@runtime_checkable
class SerializerProtocol(Protocol):
    """Turns values into ``(type tag, bytes)`` and back.

    The tag says how the bytes were made, so a loader picks the decoder without
    guessing and can refuse tags it does not trust.

    A serializer may also define ``dumps_typed_at(obj, where)`` and
    ``loads_typed_at(data, where)``, taking the ``StoredAt`` of the value:
    savers call those when present (see ``dumps_at``), so a serializer can
    bind what it writes to where it is stored.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


class StoredAt(NamedTuple):
    """Where a saver keeps one serialized value: enough to tell it from every
    other value of every thread.

    ``kind`` is ``"checkpoint"``, ``"metadata"``, ``"blob"`` or ``"write"``;
    ``key`` identifies the value within its thread and namespace: the
    checkpoint id; ``(channel, version)`` for a blob (blobs are shared by
    every checkpoint that has that version); ``(checkpoint id, task id, write
    slot, channel)`` for a write.
    """

    thread_id: str
    checkpoint_ns: str
    kind: str
    key: tuple[str, ...]


def dumps_at(serde: SerializerProtocol, obj: Any, where: StoredAt) -> tuple[str, bytes]:
    """``serde.dumps_typed_at(obj, where)`` if the serializer binds values to
    their place, else ``serde.dumps_typed(obj)``."""
    bound = getattr(serde, "dumps_typed_at", None)
    if bound is None:
        return serde.dumps_typed(obj)
    result: tuple[str, bytes] = bound(obj, where)
    return result


def loads_at(serde: SerializerProtocol, data: tuple[str, bytes], where: StoredAt) -> Any:
    """``serde.loads_typed_at(data, where)`` if the serializer binds values to
    their place, else ``serde.loads_typed(data)``."""
    bound = getattr(serde, "loads_typed_at", None)
    if bound is None:
        return serde.loads_typed(data)
    return bound(data, where)


class SerdeError(ValueError):
    """A value could not be serialized, or stored bytes could not be loaded."""


class UnsafeTypeError(SerdeError):
    """Stored bytes asked to rebuild a type that loading is not allowed to import."""


class LoadLimitError(SerdeError):
    """Stored bytes would build far more (objects, memory, nesting) than they
    hold: a crafted or corrupt payload, refused before it is run."""
