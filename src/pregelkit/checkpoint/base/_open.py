"""What a run asks of its saver before its first step, as one call.

A run's start takes its thread's lock, reads the thread's gate (its mark,
and a queued run's state) and loads the checkpoint it starts from. On a
database across a network each is a round trip; asked together
(``BaseCheckpointSaver.open_thread``) a saver can send them as one
pipeline: the PostgreSQL savers do. The default here makes the calls one
by one, each only when the one before let the run go on, so a saver that
overrides none of this behaves as it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["Gate", "OpenedThread", "aopen_one_by_one", "open_one_by_one"]

Gate: TypeAlias = Literal["gate", "mark"] | None
"""What the run reads of its thread's run control: ``"gate"`` (the mark and
a queued run's state, ``get_thread_gate``), ``"mark"`` (the mark alone: a
worker's run, whose lease holds the thread) or nothing (``None``)."""


class OpenedThread:
    """What ``open_thread`` found.

    ``lock``: the thread's lock, entered (sync or async, as the call was),
    or ``None``; the run leaves it when it ends. ``gate``: the mark and
    queued state as ``get_thread_gate`` gives them, or ``None`` when not
    asked. ``checkpoint``: the checkpoint the config names, read with the
    rest and decoded when called (a refused run never decodes it), or
    ``None`` when it was not read (the run calls ``get_tuple``)."""

    __slots__ = ("checkpoint", "gate", "lock")

    def __init__(
        self,
        lock: Any,
        gate: tuple[str | None, str | None] | None,
        checkpoint: Callable[[], CheckpointTuple | None] | None = None,
    ) -> None:
        self.lock, self.gate, self.checkpoint = lock, gate, checkpoint


def open_one_by_one(
    saver: BaseCheckpointSaver[Any], thread_id: str, lock: bool, wait: bool, gate: Gate
) -> OpenedThread:
    """The lock, then the gate; the checkpoint is left to ``get_tuple``."""
    held = saver.lock_thread(thread_id, wait=wait) if lock else None
    if held is not None:
        held.__enter__()
    try:
        return OpenedThread(held, _read_gate(saver, thread_id, gate))
    except BaseException:
        if held is not None:
            held.__exit__(None, None, None)
        raise


async def aopen_one_by_one(
    saver: BaseCheckpointSaver[Any], thread_id: str, lock: bool, wait: bool, gate: Gate
) -> OpenedThread:
    held = saver.alock_thread(thread_id, wait=wait) if lock else None
    if held is not None:
        await held.__aenter__()
    try:
        if gate == "gate":
            read = await saver.aget_thread_gate(thread_id)
        elif gate == "mark":
            read = await saver.aget_thread_control(thread_id), None
        else:
            read = None
        return OpenedThread(held, read)
    except BaseException:
        if held is not None:
            await held.__aexit__(None, None, None)
        raise


def _read_gate(
    saver: BaseCheckpointSaver[Any], thread_id: str, gate: Gate
) -> tuple[str | None, str | None] | None:
    if gate == "gate":
        return saver.get_thread_gate(thread_id)
    if gate == "mark":
        return saver.get_thread_control(thread_id), None
    return None
