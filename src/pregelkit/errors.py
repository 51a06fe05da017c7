"""Exceptions raised by pregelkit.

``GraphBubbleUp`` and its subclasses are control flow, not failures: the runner
never retries them and never lets them cancel sibling tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pregelkit.types import Command, Interrupt

__all__ = [
    "CheckpointCorruptError",
    "EmptyChannelError",
    "EmptyInputError",
    "GraphBubbleUp",
    "GraphInterrupt",
    "GraphRecursionError",
    "InvalidUpdateError",
    "ParentCommand",
    "StorageError",
    "TaskNotFound",
    "ThreadBusyError",
]


class GraphRecursionError(RecursionError):
    """The graph ran more supersteps than ``recursion_limit`` allows.

    Raise the limit with ``config={"recursion_limit": N}`` if the graph is
    meant to run that long; otherwise look for a cycle that never ends.
    """


class InvalidUpdateError(Exception):
    """A channel was given an update it cannot accept."""


class EmptyInputError(Exception):
    """The graph was invoked with an input that writes to no channel."""


class EmptyChannelError(Exception):
    """Raised when reading a channel that holds no value yet."""


class TaskNotFound(Exception):
    """A task was not found, e.g. a Send to a node that does not exist."""


class GraphBubbleUp(Exception):
    """Base of the exceptions that carry control flow up through tasks."""


class GraphInterrupt(GraphBubbleUp):
    """Raised to stop the graph at an ``interrupt()``; carries the interrupts."""

    def __init__(self, interrupts: Sequence[Interrupt] = ()) -> None:
        super().__init__(tuple(interrupts))

    @property
    def interrupts(self) -> tuple[Interrupt, ...]:
        value: tuple[Interrupt, ...] = self.args[0]
        return value


class ParentCommand(GraphBubbleUp):
    """Carries a ``Command(graph=Command.PARENT)`` up to the parent graph."""

    args: tuple[Command]

    def __init__(self, command: Command) -> None:
        super().__init__(command)


class ThreadBusyError(RuntimeError):
    """Another run holds this thread; two runs of one thread never overlap."""

    def __init__(self, thread_id: str, detail: str = "") -> None:
        self.thread_id = thread_id
        msg = (
            f"thread {thread_id!r} is being run by another process or run. Wait for it to "
            "finish, or pass config={'configurable': {'wait_for_thread': True}} to wait."
        )
        super().__init__(f"{msg} {detail}".strip())


class CheckpointCorruptError(Exception):
    """A stored checkpoint, write or blob could not be loaded safely.

    Nothing stored is changed; the message names the thread, the checkpoint and
    the channel or write so the row can be inspected or deleted.
    """

    def __init__(
        self,
        reason: str,
        *,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        channel: str | None = None,
        task_id: str | None = None,
    ) -> None:
        self.reason = reason
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.channel = channel
        self.task_id = task_id
        where = [
            f"{name}={value!r}"
            for name, value in (
                ("thread_id", thread_id),
                ("checkpoint_ns", checkpoint_ns),
                ("checkpoint_id", checkpoint_id),
                ("channel", channel),
                ("task_id", task_id),
            )
            if value is not None
        ]
        super().__init__(f"cannot load stored data ({', '.join(where)}): {reason}")


class StorageError(Exception):
    """The checkpoint database failed: down, unreachable, full, read-only, or
    busy past its timeout. The driver's error is the ``__cause__``.

    Nothing the message calls unsaved reached the database; everything saved
    before is intact. Once the database is back, resume the thread with
    ``invoke(None, config)``: only the tasks whose results were not saved run
    again.
    """

    def __init__(
        self, message: str, *, thread_id: str | None = None, not_saved: Sequence[str] = ()
    ) -> None:
        self.thread_id = thread_id
        self.not_saved = list(not_saved)
        """What the run could not save: one line per task's writes or checkpoint."""
        super().__init__(message)
