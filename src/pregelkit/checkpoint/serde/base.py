"""The serializer protocol every saver and cache speaks."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["SerdeError", "SerializerProtocol", "UnsafeTypeError"]


@runtime_checkable
class SerializerProtocol(Protocol):
    """Turns values into ``(type tag, bytes)`` and back.

    The tag says how the bytes were made, so a loader picks the decoder without
    guessing and can refuse tags it does not trust.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


class SerdeError(ValueError):
    """A value could not be serialized, or stored bytes could not be loaded."""


class UnsafeTypeError(SerdeError):
    """Stored bytes asked to rebuild a type that loading is not allowed to import."""
