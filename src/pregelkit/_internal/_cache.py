"""The default cache key: a canonical encoding of a call's arguments.

Equal arguments must give equal bytes whatever order a dict was built in, and
in any process: a pickle keeps dict insertion order and orders a set of
strings by the per-process string hash, so plain containers are encoded here
instead: dict items and set members are sorted by their own encodings. Other
values are pickled (a value pickle refuses falls back to cloudpickle); inside
such a value, dict order counts again.

Every value is tagged with its type and every variable-length part is
length-prefixed, so two different arguments never share an encoding
(``1``, ``1.0``, ``True`` and ``"1"`` are four keys).
"""

from __future__ import annotations

from typing import Any

__all__ = ["canonical_bytes", "default_cache_key"]


class _Opaque(Exception):
    """The value holds a cycle: encode the whole of it with pickle."""


def default_cache_key(*args: Any, **kwargs: Any) -> bytes:
    """Bytes that identify a call's arguments; equal arguments give equal bytes."""
    return canonical_bytes((args, kwargs))


def canonical_bytes(value: Any) -> bytes:
    """``value`` encoded so that equal plain data gives equal bytes.

    Raises ``TypeError`` when a part of it can be neither encoded nor pickled.
    """
    out = bytearray()
    try:
        _encode(value, out, set())
    except (_Opaque, RecursionError):
        out = bytearray(b"P")
        out += _pickled(value)
    return bytes(out)


def _pickled(value: Any) -> bytes:
    import pickle  # only for arguments that have no canonical encoding: off the import path

    try:
        return pickle.dumps(value, protocol=5)
    except Exception:
        import cloudpickle  # only for values plain pickle refuses (lambdas, local classes)

        try:
            data: bytes = cloudpickle.dumps(value, protocol=5)
        except Exception as exc:
            raise TypeError(
                f"a value of type {type(value).__qualname__} cannot be part of a cache key "
                f"(it cannot be pickled: {exc})"
            ) from exc
        return data


def _encode(value: Any, out: bytearray, stack: set[int]) -> None:
    t = type(value)
    if t is str:
        data = value.encode("utf-8", "surrogatepass")
        out += b"s%d:" % len(data)
        out += data
    elif t is int:
        out += b"i%d;" % value
    elif value is None:
        out += b"N"
    elif t is bool:
        out += b"T" if value else b"F"
    elif t is float:
        out += b"f" + value.hex().encode() + b";"
    elif t is bytes:
        out += b"b%d:" % len(value)
        out += value
    elif t is tuple or t is list or t is dict or t is set or t is frozenset:
        key = id(value)
        if key in stack:
            raise _Opaque
        stack.add(key)
        if t is tuple or t is list:
            out += b"(%d:" % len(value) if t is tuple else b"[%d:" % len(value)
            for item in value:
                _encode(item, out, stack)
        elif t is dict:
            items = []
            for k, v in value.items():
                item = bytearray()
                _encode(k, item, stack)
                _encode(v, item, stack)
                items.append(bytes(item))
            out += b"{%d:" % len(items)
            for encoded in sorted(items):
                out += encoded
        else:
            members = []
            for member in value:
                buf = bytearray()
                _encode(member, buf, stack)
                members.append(bytes(buf))
            out += b"<%d:" % len(members) if t is set else b">%d:" % len(members)
            for encoded in sorted(members):
                out += encoded
        stack.discard(key)
    else:
        data = _pickled(value)
        out += b"p%d:" % len(data)
        out += data
