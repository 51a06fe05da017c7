"""A thread's history as runs of attempts, for code, tests and the CLI.

The records come from the thread's saver (``list_attempts``); the model
(``AttemptRecord``, ``RunTimeline``, ``Timeline``) lives in
``pregelkit.checkpoint.attempts`` so that ``Pregel.get_timeline`` can build
it too, and is re-exported here.
"""

from __future__ import annotations

from typing import Any

from pregelkit.checkpoint.attempts import AttemptRecord, RunTimeline, Timeline, group_attempts
from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = ["AttemptRecord", "RunTimeline", "Timeline", "aload_timeline", "load_timeline"]


def load_timeline(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> Timeline:
    """Every run of ``thread_id`` that ``checkpointer`` recorded, oldest first
    (an empty timeline for a thread it has never seen)."""
    _check(checkpointer)
    return group_attempts(str(thread_id), checkpointer.list_attempts(str(thread_id)))


async def aload_timeline(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> Timeline:
    """The async twin of ``load_timeline``."""
    _check(checkpointer)
    return group_attempts(str(thread_id), await checkpointer.alist_attempts(str(thread_id)))


def _check(checkpointer: Any) -> None:
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise TypeError(
            "load_timeline() takes a checkpoint saver (InMemorySaver, SqliteSaver, "
            f"PostgresSaver...), got {type(checkpointer).__name__}"
        )
