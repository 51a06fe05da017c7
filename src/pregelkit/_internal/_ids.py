"""Identifiers: deterministic task ids and time-ordered checkpoint ids."""

from __future__ import annotations

import os
import threading
import time
from _random import Random  # the generator behind `random`, without its 2 ms import

import xxhash

_lock = threading.Lock()
_random = Random()  # seeded from os.urandom, as `random`'s own instance is
# A forked child must not repeat its parent's ids: reseed, as `random` does.
os.register_at_fork(after_in_child=_random.seed)
_last_ts = 0
_last_id = ""
"""The last id ``uuid6`` made: its timestamp is below ``_last_ts`` already."""
_second: tuple[int, str] = (-1, "")
"""The last whole second ``utc_now_iso`` formatted, and its text."""


def _fmt(h: str) -> str:
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def task_id(namespace: bytes, *parts: str) -> str:
    """A task id that depends only on its inputs, so a resumed step recomputes it.

    The checkpoint id (``namespace``) plus the task's namespace, step, name,
    kind and path identify the task; xxh3-128 of them, in UUID form.
    """
    data = namespace + b"\x00" + "\x00".join(parts).encode()
    return _fmt(xxhash.xxh3_128_hexdigest(data))


def id_prefix(namespace: bytes, *parts: str) -> bytes:
    """What ``task_id(namespace, *parts, last)`` hashes before ``last``:
    the ids of one task's calls differ in their position alone, so the
    rest is joined and encoded once per task (``task_id_after``)."""
    return namespace + b"\x00" + ("\x00".join(parts) + "\x00").encode()


def task_id_after(prefix: bytes, last: str) -> str:
    """``task_id`` of the parts ``prefix`` (``id_prefix``) holds, then ``last``."""
    h = xxhash.xxh3_128_hexdigest(prefix + last.encode())
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def interrupt_id(namespace: str, index: int = 0) -> str:
    """The id of the ``index``-th ``interrupt()`` call of the task with this
    checkpoint namespace (0 for the first).

    Each call gets its own id, so an answer sent again after its question was
    answered (a double-clicked button) cannot be taken for the answer to the
    next one. The first keeps the id of the namespace alone, as interrupts
    saved before had; a later one hashes ``namespace|index``, the ids
    LangGraph 1.2 gives, so a client can answer either library's interrupts.
    """
    if index:
        namespace = f"{namespace}|{index}"
    return xxhash.xxh3_128_hexdigest(namespace.encode())


def uuid6(clock_seq: int | None = None, after: str | None = None) -> str:
    """A UUIDv6: time-ordered, so string order is creation order.

    Checkpoint ids must sort from first to last. Within a process the
    timestamp increases strictly; across processes and clock changes, a
    thread's order comes from its previous checkpoint: ``after`` (that
    checkpoint's id) is always exceeded, whatever the wall clock says.
    """
    global _last_ts, _last_id
    # an id made here (a run's previous checkpoint, mostly) is not parsed again
    floor = _timestamp(after) if after and after != _last_id else 0
    with _lock:
        ns = time.time_ns()
        ts = ns // 100 + 0x01B21DD213814000  # 100ns intervals since 1582-10-15
        if ts <= _last_ts:
            ts = _last_ts + 1
        if ts <= floor:
            ts = floor + 1
        _last_ts = ts
    if clock_seq is None:
        clock_seq = _random.getrandbits(14)
    # not os.urandom: it releases the GIL, and every checkpoint id would then
    # be a chance for another thread to take it (hundreds of µs under load)
    node = _random.getrandbits(48)
    time_high_and_time_mid = (ts >> 12) & 0xFFFFFFFFFFFF
    time_low_and_version = (ts & 0x0FFF) | (6 << 12)
    value = (time_high_and_time_mid << 80) | (time_low_and_version << 64)
    value |= ((clock_seq & 0x3FFF) | 0x8000) << 48
    value |= node & 0xFFFFFFFFFFFF
    # str(uuid.UUID(int=value)), without the object; bytes.hex rather than a
    # format spec, which parses the spec on every call (a third of the time)
    h = value.to_bytes(16, "big").hex()
    _last_id = made = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"  # _fmt, inline
    return made


def random_digits() -> str:
    """16 random decimal digits (53 bits), from this module's generator
    (``random``'s import costs 2 ms)."""
    return str(_random.getrandbits(53)).zfill(16)


def utc_now_iso() -> str:
    """``datetime.now(UTC).isoformat()``, the same text, for a few times less:
    every checkpoint gets a timestamp, and building an aware ``datetime`` and
    formatting its offset cost ~11k instructions (two checkpoints and the new
    thread's empty one: ~2% of a short run). The date and time of day are
    formatted once per second."""
    global _second
    micros = time.time_ns() // 1000
    sec, us = divmod(micros, 1_000_000)
    cached, text = _second
    if cached != sec:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second = (sec, text)  # one assignment: a racing thread sees old or new, both whole
    # zfill rather than a format spec (``{us:06d}``), which costs twice as much
    return f"{text}.{str(us).zfill(6)}+00:00" if us else f"{text}+00:00"


def _timestamp(checkpoint_id: str) -> int:
    """The 60-bit timestamp of a UUIDv6 id; 0 for an id of another form."""
    if isinstance(checkpoint_id, str) and len(checkpoint_id) == 36 and checkpoint_id[14] == "6":
        try:  # the canonical form these ids are made in: no need for uuid.UUID
            value = int(checkpoint_id.replace("-", ""), 16)
        except ValueError:
            return 0
    else:
        import uuid  # rare forms only: the module costs import pregelkit ~4 ms

        try:
            value = uuid.UUID(checkpoint_id).int
        except (ValueError, TypeError, AttributeError):
            return 0
    if (value >> 76) & 0xF != 6:
        return 0
    return (((value >> 80) & 0xFFFFFFFFFFFF) << 12) | ((value >> 64) & 0x0FFF)
