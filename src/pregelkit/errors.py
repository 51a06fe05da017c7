"""Exceptions raised by pregelkit.

``GraphBubbleUp`` and its subclasses are control flow, not failures: the runner
never retries them and never lets them cancel sibling tasks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pregelkit.types import Command, Interrupt

__all__ = [
    "CheckpointCorruptError",
    "EmptyChannelError",
    "EmptyInputError",
    "ErrorCode",
    "GraphBubbleUp",
    "GraphDrained",
    "GraphInterrupt",
    "GraphRecursionError",
    "InvalidUpdateError",
    "NodeCancelledError",
    "NodeError",
    "NodeInterrupt",
    "ParentCommand",
    "TaskNotFound",
    "ThreadBusyError",
    "UnknownInterruptError",
    "create_error_message",
    "is_invalid_resume",
]


class ErrorCode(Enum):
    """Error codes LangGraph links to its troubleshooting pages."""

    GRAPH_RECURSION_LIMIT = "GRAPH_RECURSION_LIMIT"
    INVALID_CONCURRENT_GRAPH_UPDATE = "INVALID_CONCURRENT_GRAPH_UPDATE"
    INVALID_GRAPH_NODE_RETURN_VALUE = "INVALID_GRAPH_NODE_RETURN_VALUE"
    MULTIPLE_SUBGRAPHS = "MULTIPLE_SUBGRAPHS"
    INVALID_CHAT_HISTORY = "INVALID_CHAT_HISTORY"


def create_error_message(*, message: str, error_code: ErrorCode) -> str:
    """``message`` followed by where to read about ``error_code``."""
    return (
        f"{message}\nFor troubleshooting, visit: "
        f"https://docs.langchain.com/oss/python/langgraph/errors/{error_code.value}"
    )


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


class NodeInterrupt(GraphInterrupt):
    """Deprecated: raised by a node to interrupt it; use ``interrupt()``,
    which can be resumed with an answer."""

    def __init__(self, value: Any, id: str | None = None) -> None:
        from pregelkit.types import Interrupt

        warnings.warn(
            "NodeInterrupt is deprecated. Please use `pregelkit.types.interrupt` instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__([Interrupt(value=value) if id is None else Interrupt(value, id)])


class GraphDrained(GraphBubbleUp):
    """A run stopped early, at a superstep boundary, because a drain was
    requested; its checkpoint is saved and it can be resumed."""

    def __init__(self, reason: str = "shutdown") -> None:
        self.reason = reason
        super().__init__(f"Graph drained: {reason}")


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


class UnknownInterruptError(Exception):
    """A resume that does not match the pending interrupts.

    ``reason``: ``"not_pending"`` (``interrupt_ids`` are not pending),
    ``"empty_map"`` (an empty resume map) or ``"ambiguous"`` (one value for
    several pending interrupts). ``pending_ids`` can still be answered.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: Literal["not_pending", "empty_map", "ambiguous"],
        interrupt_ids: Sequence[str] = (),
        pending_ids: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.interrupt_ids = tuple(interrupt_ids)
        self.pending_ids = tuple(pending_ids)


@dataclass(frozen=True, slots=True)
class NodeError:
    """A failed node and what it raised, as given to a node's error handler."""

    node: str
    error: BaseException


class NodeCancelledError(Exception):
    """A node's own code raised ``asyncio.CancelledError``: a failure of the
    node, not a cancellation of the run."""

    def __init__(self, node: str, message: str | None = None) -> None:
        super().__init__(message or f"Node {node!r} raised asyncio.CancelledError")
        self.node = node


_INVALID_RESUME = "_pregelkit_invalid_resume"


def is_invalid_resume(error: BaseException) -> bool:
    """Whether ``error`` means a resume value did not match the interrupt's
    ``response_schema``. pregelkit does not validate answers, so only errors
    marked so by user code are."""
    return bool(getattr(error, _INVALID_RESUME, False))
