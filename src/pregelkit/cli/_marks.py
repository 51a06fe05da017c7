"""A thread's run-control mark as a status: ``cancelled`` (``pregelkit
cancel``; it runs again after ``pregelkit resume``) or ``drained`` (a
deployment drained its run; ``resume`` continues it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = ["marked_status"]

_STATUSES = ("cancelled", "drained")


def marked_status(saver: BaseCheckpointSaver[Any], thread_id: str) -> str | None:
    """``cancelled`` or ``drained`` when the thread is marked so, else None
    (the status then comes from its checkpoints)."""
    if not saver.has_thread_control:
        return None
    mark = saver.get_thread_control(thread_id)
    return mark if mark in _STATUSES else None
