"""Encryption at rest for any serializer: AES-GCM over the inner payload.

Savers store ``(tag, bytes)`` pairs; this wraps the bytes and marks the tag
``enc:<inner tag>``, so a store can hold encrypted and older plaintext values
side by side and each is loaded the way it was written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pregelkit.checkpoint.serde.base import SerdeError, SerializerProtocol

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["EncryptedSerializer"]

_PREFIX = "enc:"
_NONCE_BYTES = 12  # the GCM standard nonce; random per value, so keys never reuse one
_GCM_TAG_BYTES = 16


def _aesgcm(key: bytes) -> AESGCM:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ImportError(
            "EncryptedSerializer needs the 'cryptography' package: "
            'pip install "pregelkit[encryption]"'
        ) from exc
    if not isinstance(key, (bytes, bytearray)) or len(key) not in (16, 24, 32):
        detail = f"{len(key)} bytes" if isinstance(key, (bytes, bytearray)) else type(key).__name__
        raise ValueError(
            f"EncryptedSerializer needs an AES key of 16, 24 or 32 bytes, got {detail}; "
            "make one with os.urandom(32) and keep it outside the store"
        )
    return AESGCM(bytes(key))


class EncryptedSerializer:
    """Encrypts what ``inner`` produces; loads what it encrypted, and passes
    values without the ``enc:`` tag (written before encryption was turned on)
    to ``inner`` unchanged.

    The inner tag is authenticated with the ciphertext, so swapping tags
    between stored values is detected like any other tampering.
    """

    def __init__(self, inner: SerializerProtocol, key: bytes) -> None:
        self.inner = inner
        self._cipher = _aesgcm(key)

    @classmethod
    def from_key(
        cls, key: bytes, *, inner: SerializerProtocol | None = None
    ) -> EncryptedSerializer:
        """An encrypting ``JsonPlusSerializer``, the usual choice."""
        if inner is None:
            from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer

            inner = JsonPlusSerializer()
        return cls(inner, key)

    def __repr__(self) -> str:
        return f"EncryptedSerializer(inner={self.inner!r})"

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        tag, payload = self.inner.dumps_typed(obj)
        nonce = os.urandom(_NONCE_BYTES)
        return _PREFIX + tag, nonce + self._cipher.encrypt(nonce, payload, tag.encode())

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, payload = data
        if not tag.startswith(_PREFIX):
            return self.inner.loads_typed(data)
        inner_tag = tag[len(_PREFIX) :]
        if len(payload) < _NONCE_BYTES + _GCM_TAG_BYTES:
            raise SerdeError(
                f"encrypted {inner_tag!r} value is truncated ({len(payload)} bytes, shorter "
                "than a nonce and an authentication tag)"
            )
        from cryptography.exceptions import InvalidTag

        nonce, ciphertext = bytes(payload[:_NONCE_BYTES]), bytes(payload[_NONCE_BYTES:])
        try:
            plaintext = self._cipher.decrypt(nonce, ciphertext, inner_tag.encode())
        except InvalidTag as exc:
            raise SerdeError(
                f"cannot decrypt stored {inner_tag!r} value: the key differs from the one it "
                "was written with, or the stored bytes or tag were altered"
            ) from exc
        return self.inner.loads_typed((inner_tag, plaintext))
