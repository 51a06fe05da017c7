"""Serialization of checkpoints, writes and cached values.

Every name loads on first use: ``pregelkit.checkpoint.base`` imports this
package for the protocol alone, and must not pull in the serializer (and
through it the public types) while it is itself being imported; and
``pregelkit.func`` imports the class registry (``_registry``) beside it,
which must not cost the protocol's module either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint.serde.base import (
        LoadLimitError,
        SerdeError,
        SerializerProtocol,
        StoredAt,
        UnsafeTypeError,
    )
    from pregelkit.checkpoint.serde.encrypted import EncryptedSerializer
    from pregelkit.checkpoint.serde.jsonplus import (
        JsonPlusSerializer,
        allow_modules,
        allow_types,
    )

__all__ = [
    "EncryptedSerializer",
    "JsonPlusSerializer",
    "LoadLimitError",
    "SerdeError",
    "SerializerProtocol",
    "StoredAt",
    "UnsafeTypeError",
    "allow_modules",
    "allow_types",
]

_LAZY = {
    "LoadLimitError": "pregelkit.checkpoint.serde.base",
    "SerdeError": "pregelkit.checkpoint.serde.base",
    "SerializerProtocol": "pregelkit.checkpoint.serde.base",
    "StoredAt": "pregelkit.checkpoint.serde.base",
    "UnsafeTypeError": "pregelkit.checkpoint.serde.base",
    "EncryptedSerializer": "pregelkit.checkpoint.serde.encrypted",
    "JsonPlusSerializer": "pregelkit.checkpoint.serde.jsonplus",
    "allow_modules": "pregelkit.checkpoint.serde.jsonplus",
    "allow_types": "pregelkit.checkpoint.serde.jsonplus",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
