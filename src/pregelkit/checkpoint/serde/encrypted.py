"""Encryption at rest for any serializer: AES-GCM over the inner payload,
bound to where the value is stored.

Savers store ``(tag, bytes)`` pairs; this wraps the bytes and marks the tag
``enc2:<inner tag>``. The associated data authenticated with the ciphertext
is the inner tag and the value's ``StoredAt`` (thread, namespace, and the
checkpoint, blob version or write it is), which every saver passes through
``dumps_typed_at`` / ``loads_typed_at``. So a ciphertext copied into another
thread's row, another channel or another checkpoint fails authentication,
and so does a row rewritten as plaintext: with encryption on, anything not
sealed for its own place is refused.

Values encrypted before locations were bound (tag ``enc:``) and plaintext
written before encryption was turned on load only with
``accept_legacy=True``, meant for migrating a store you trust.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pregelkit.checkpoint.serde.base import SerdeError, SerializerProtocol, StoredAt

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["EncryptedSerializer"]

_PREFIX = "enc2:"
_LEGACY_PREFIX = "enc:"
_NONCE_BYTES = 12  # the GCM standard nonce; random per value, so keys never reuse one
_GCM_TAG_BYTES = 16
_KEY_ENV = "LANGGRAPH_AES_KEY"


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


def _associated_data(inner_tag: str, where: StoredAt | None) -> bytes:
    """What the ciphertext is sealed to: its inner tag and its place (``None``
    for values stored outside a saver, such as cache entries)."""
    place = None
    if where is not None:
        place = [where.thread_id, where.checkpoint_ns, where.kind, *where.key]
    return json.dumps(["pregelkit-enc2", inner_tag, place], separators=(",", ":")).encode()


def _describe(where: StoredAt | None) -> str:
    if where is None:
        return "a value stored outside a checkpoint"
    return f"the {where.kind} {'/'.join(where.key)!r} of thread {where.thread_id!r}"


class EncryptedSerializer:
    """Encrypts what ``inner`` produces and loads only what it sealed for the
    same place with the same key.

    :param inner: the serializer whose bytes are encrypted.
    :param key: an AES key of 16, 24 or 32 bytes.
    :param accept_legacy: also load plaintext values (written before
        encryption was turned on) and values encrypted by pregelkit before
        values were bound to their place. Neither is authenticated where it
        lies, so turn this on only to migrate a store you trust (copy each
        thread with ``saver.copy_thread``, which seals the copy).
    """

    def __init__(
        self, inner: SerializerProtocol, key: bytes, *, accept_legacy: bool = False
    ) -> None:
        self.inner = inner
        self.accept_legacy = accept_legacy
        self._cipher = _aesgcm(key)

    @classmethod
    def from_key(
        cls, key: bytes, *, inner: SerializerProtocol | None = None, accept_legacy: bool = False
    ) -> EncryptedSerializer:
        """An encrypting ``JsonPlusSerializer``, the usual choice."""
        if inner is None:
            from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer

            inner = JsonPlusSerializer()
        return cls(inner, key, accept_legacy=accept_legacy)

    @classmethod
    def from_pycryptodome_aes(
        cls, serde: SerializerProtocol | None = None, **kwargs: Any
    ) -> EncryptedSerializer:
        """LangGraph's constructor name: ``key=`` (bytes or str), or the
        ``LANGGRAPH_AES_KEY`` environment variable when no key is given.

        pregelkit encrypts with AES-GCM from the ``cryptography`` package (the
        ``encryption`` extra), not pycryptodome's AES-EAX, so stores written by
        LangGraph cannot be read; other pycryptodome options are refused.
        """
        key = kwargs.pop("key", None)
        if kwargs:
            raise TypeError(
                f"from_pycryptodome_aes() takes only key= (and serde); got {sorted(kwargs)}: "
                "pregelkit always uses AES-GCM from the 'cryptography' package"
            )
        if key is None:
            key = os.environ.get(_KEY_ENV)
            if not key:
                raise ValueError(
                    f"from_pycryptodome_aes() needs key= or the {_KEY_ENV} environment variable"
                )
        if isinstance(key, str):
            key = key.encode()
        return cls.from_key(key, inner=serde)

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> EncryptedSerializer:
        """A copy (same key) whose inner serializer also loads the classes
        ``extra_allowlist`` names; see ``JsonPlusSerializer.with_msgpack_allowlist``."""
        derive = getattr(self.inner, "with_msgpack_allowlist", None)
        inner = self.inner if derive is None else derive(extra_allowlist)
        if inner is self.inner:
            return self
        clone = copy.copy(self)
        clone.inner = inner
        return clone

    def __repr__(self) -> str:
        return f"EncryptedSerializer(inner={self.inner!r}, accept_legacy={self.accept_legacy!r})"

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.dumps_typed_at(obj, None)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.loads_typed_at(data, None)

    def dumps_typed_at(self, obj: Any, where: StoredAt | None) -> tuple[str, bytes]:
        """Encrypt ``obj`` sealed to ``where``: it loads only from there."""
        tag, payload = self.inner.dumps_typed(obj)
        return self._seal(tag, payload, where)

    def loads_typed_at(self, data: tuple[str, bytes], where: StoredAt | None) -> Any:
        """The value sealed for ``where``; ``SerdeError`` for anything else."""
        tag, payload = self._open(data, where)
        return self.inner.loads_typed((tag, payload))

    def reseal(
        self, data: tuple[str, bytes], source: StoredAt | None, target: StoredAt | None
    ) -> tuple[str, bytes]:
        """``data`` sealed for ``source``, sealed again for ``target`` (a thread
        copy), without loading the value."""
        return self._seal(*self._open(data, source), target)

    def _seal(self, tag: str, payload: bytes, where: StoredAt | None) -> tuple[str, bytes]:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._cipher.encrypt(nonce, payload, _associated_data(tag, where))
        return _PREFIX + tag, nonce + sealed

    def _open(self, data: tuple[str, bytes], where: StoredAt | None) -> tuple[str, bytes]:
        tag, payload = data
        if tag.startswith(_PREFIX):
            inner_tag = tag[len(_PREFIX) :]
            associated = _associated_data(inner_tag, where)
        elif tag.startswith(_LEGACY_PREFIX) and self.accept_legacy:
            inner_tag = tag[len(_LEGACY_PREFIX) :]
            associated = inner_tag.encode()
        elif tag.startswith(_LEGACY_PREFIX):
            raise SerdeError(
                f"{_describe(where)} was encrypted by an older pregelkit, which did not bind "
                "values to their place, so it cannot be told apart from a value copied here "
                "from elsewhere. To migrate a store you trust, load it with "
                "EncryptedSerializer(..., accept_legacy=True) and copy each thread with "
                "saver.copy_thread(old, new), which seals every copied value for its place."
            )
        elif self.accept_legacy:
            return tag, bytes(payload)
        else:
            raise SerdeError(
                f"{_describe(where)} is stored unencrypted (tag {tag!r}) while encryption is on: "
                "refusing it, since anyone with write access to the store could have put it "
                "there. If it predates turning encryption on, migrate with "
                "EncryptedSerializer(..., accept_legacy=True) and saver.copy_thread()."
            )
        if len(payload) < _NONCE_BYTES + _GCM_TAG_BYTES:
            raise SerdeError(
                f"encrypted {inner_tag!r} value is truncated ({len(payload)} bytes, shorter "
                "than a nonce and an authentication tag)"
            )
        from cryptography.exceptions import InvalidTag

        nonce, ciphertext = bytes(payload[:_NONCE_BYTES]), bytes(payload[_NONCE_BYTES:])
        try:
            return inner_tag, self._cipher.decrypt(nonce, ciphertext, associated)
        except InvalidTag:
            raise SerdeError(
                f"cannot decrypt {_describe(where)} (tag {inner_tag!r}): it was sealed for "
                "another thread, checkpoint or channel, or the key differs from the one it was "
                "written with, or the stored bytes or tag were altered. Refusing to use it."
            ) from None
