"""Exceptions raised by pregelkit.

``GraphBubbleUp`` and its subclasses are control flow, not failures: the runner
never retries them and never lets them cancel sibling tasks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from pregelkit._internal._dataclass import lazy_dataclass

if TYPE_CHECKING:
    from pregelkit.types import Command, Interrupt

__all__ = [
    "AmbiguousResumeError",
    "CheckpointCorruptError",
    "ChildWorkflowError",
    "EmptyChannelError",
    "EmptyInputError",
    "ErrorCode",
    "GraphBubbleUp",
    "GraphDrained",
    "GraphInterrupt",
    "GraphRecursionError",
    "InterruptNotPendingError",
    "InvalidScheduleError",
    "InvalidUpdateError",
    "LeaseLostError",
    "MessageTooLargeError",
    "NodeCancelledError",
    "NodeError",
    "NodeInterrupt",
    "NodeTimeoutError",
    "NondeterminismError",
    "NothingToResumeError",
    "ParentCommand",
    "ReplayedTaskError",
    "RunCancelledError",
    "RunFailedError",
    "RunSuspended",
    "ScheduleNotFoundError",
    "StorageError",
    "ThreadStateError",
    "TaskNotFound",
    "ThreadBusyError",
    "UnknownInterruptError",
    "UnknownQueueError",
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
        from pregelkit.warnings import LangGraphDeprecatedSinceV10

        warnings.warn(
            "NodeInterrupt is deprecated. Please use `pregelkit.types.interrupt` instead.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        super().__init__([Interrupt(value=value) if id is None else Interrupt(value, id)])


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


class LeaseLostError(StorageError):
    """A worker's lease on a run was taken over: another worker claimed the
    run (this one was paused, partitioned or too slow to renew), so this one
    may write nothing more for it.

    Every checkpoint and write of a leased run checks its fencing token in
    the same transaction, so nothing the old holder computed afterwards
    reaches the database. The worker drops the run; the new holder resumes
    it from its last checkpoint. Nothing to do for the user.
    """

    def __init__(self, run_id: str, fence: int, operation: str) -> None:
        self.run_id = run_id
        self.fence = fence
        super().__init__(
            f"run {run_id!r}: {operation} refused: the lease (fence {fence}) was lost to "
            "another worker, which resumes the run from its last checkpoint"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_lease_lost, (self.run_id, self.fence, self.args[0]))


def _rebuild_lease_lost(run_id: str, fence: int, message: str) -> LeaseLostError:
    err = LeaseLostError(run_id, fence, "")
    err.args = (message,)
    return err


class RunFailedError(Exception):
    """A queued run (``wf.submit``) ended with an error, raised by
    ``RunHandle.result()``. ``error`` is what the worker recorded: the
    exception's type and message (the exception itself stayed in the worker;
    its log has the traceback). Submit the thread again to resume it from
    its last checkpoint once the cause is fixed."""

    def __init__(self, thread_id: str, run_id: str, error: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.error = error
        super().__init__(f"run {run_id!r} of thread {thread_id!r} failed: {error}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (RunFailedError, (self.thread_id, self.run_id, self.error))


class NondeterminismError(RuntimeError):
    """A resumed run made a different task call than the run it resumes.

    The code changed between the run that was recorded and this resume: a call
    was swapped, inserted before a recorded one, given other arguments, or
    removed (also the last one: the task returns before making it).
    Nothing this resume did was saved, so the thread still resumes with the
    code that recorded it. Guard new behaviour with ``patched()`` to change
    code while threads are in flight (see the "Changing code" guide).
    """

    def __init__(self, *, position: int, parent: str, recorded: str, new: str) -> None:
        self.position = position
        self.parent = parent
        self.recorded = recorded
        self.new = new
        super().__init__(
            f"replay of task {parent!r} diverged at call #{position}: the recorded run "
            f"called {recorded} there, this code calls {new}. The code changed since "
            "the thread was recorded: resume it with the code that recorded it, or guard "
            "the change with `if patched(...)` (pregelkit.func)"
        )


class ReplayedTaskError(Exception):
    """Stands in, on replay, for a recorded task failure whose exception class
    cannot be rebuilt safely (not a builtin and not from an allowed module)."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        self.message = message
        super().__init__(f"{type_name}: {message}")


class NothingToResumeError(ValueError):
    """``Command(resume=...)`` was given but nothing in the thread waits for a
    resume value: the thread finished, or its last run failed without an
    interrupt."""


class ThreadStateError(ValueError):
    """An action that makes no sense in the thread's state, such as
    cancelling a thread that has finished (docs/guides/lifecycle.md has the
    table of states and actions). ``state`` and ``action`` name them."""

    def __init__(self, thread_id: str, state: str, action: str, advice: str) -> None:
        self.thread_id = thread_id
        self.state = state
        self.action = action
        super().__init__(f"cannot {action} thread {thread_id!r}: it is {state}; {advice}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_state_error, (self.thread_id, self.state, self.action, self.args[0]))


def _rebuild_state_error(thread_id: str, state: str, action: str, message: str) -> ThreadStateError:
    err = ThreadStateError(thread_id, state, action, "")
    err.args = (message,)
    return err


class NodeTimeoutError(TimeoutError):
    """A task or node ran past its ``TimeoutPolicy``, or past ``step_timeout``.

    ``kind`` says which limit fired: ``"run"`` (``run_timeout``), ``"idle"``
    (``idle_timeout``: no progress signal for that long) or ``"step"``
    (the graph's ``step_timeout``). A subclass of ``TimeoutError`` (hence of
    ``OSError``), so ``default_retry_on`` does not retry it: name it in a
    ``RetryPolicy(retry_on=...)`` to retry timed-out attempts.
    """

    def __init__(
        self,
        node: str,
        elapsed: float,
        *,
        kind: Literal["run", "idle", "step"],
        timeout: float,
        run_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self.node = node
        self.elapsed = elapsed
        self.kind = kind
        self.timeout = timeout
        self.run_timeout = run_timeout
        self.idle_timeout = idle_timeout
        if kind == "step":
            head = (
                f"the step timed out after {elapsed:.3g}s with tasks {node} still "
                f"running: step_timeout is {timeout:g}s. Raise step_timeout"
            )
        elif kind == "idle":
            head = (
                f"{node!r} timed out after {elapsed:.3g}s: no sign of progress for its "
                f"idle_timeout of {timeout:g}s. Call get_runtime().heartbeat() while it works, "
                "raise the limit, or retry it with RetryPolicy(retry_on=NodeTimeoutError)"
            )
        else:
            head = (
                f"{node!r} timed out after {elapsed:.3g}s: its run_timeout is {timeout:g}s. "
                "Raise the limit, or retry it with RetryPolicy(retry_on=NodeTimeoutError)"
            )
        super().__init__(f"{head}; the thread can be resumed with invoke(None, config)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_timeout,
            (self.node, self.elapsed, self.kind, self.timeout, self.run_timeout, self.idle_timeout),
        )


def _rebuild_timeout(
    node: str,
    elapsed: float,
    kind: Literal["run", "idle", "step"],
    timeout: float,
    run_timeout: float | None,
    idle_timeout: float | None,
) -> NodeTimeoutError:
    return NodeTimeoutError(
        node,
        elapsed,
        kind=kind,
        timeout=timeout,
        run_timeout=run_timeout,
        idle_timeout=idle_timeout,
    )


class RunCancelledError(Exception):
    """The thread was cancelled (``cancel(config)`` or ``pregelkit cancel``).

    Raised by the run that owned the thread once it has stopped (what finished
    is saved), and by any later run of the thread until ``uncancel(config)``
    (or ``pregelkit resume``) clears the mark: a cancelled thread never
    resumes by accident.
    """

    def __init__(
        self, thread_id: str, *, starting: bool = False, replaced_by: str | None = None
    ) -> None:
        self.thread_id = thread_id
        self.replaced_by = replaced_by
        """For a debounced run (``submit(..., debounce=...)``): the run that
        replaced it before it started."""
        if replaced_by is not None:
            msg = (
                f"the queued run of thread {thread_id!r} was cancelled before it started: "
                f"run {replaced_by!r}, a newer submit with the same queue and key, replaced it "
                "(debounce); wait for that run's handle instead"
            )
        elif starting:
            msg = (
                f"thread {thread_id!r} was cancelled, so it does not run: to continue it, "
                "call uncancel(config) (or `pregelkit resume`) first, then "
                "invoke(None, config)"
            )
        else:
            msg = (
                f"thread {thread_id!r} was cancelled: the run stopped, and what finished "
                "is saved. To continue it, call uncancel(config) (or `pregelkit resume`), "
                "then invoke(None, config)"
            )
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_cancelled, (self.thread_id, self.args[0], self.replaced_by))


def _rebuild_cancelled(
    thread_id: str, message: str, replaced_by: str | None = None
) -> RunCancelledError:
    err = RunCancelledError(thread_id, replaced_by=replaced_by)
    err.args = (message,)
    return err


class UnknownQueueError(ValueError):
    """A run was submitted to a queue no one declared (``declare_queue``, or
    a worker given ``Worker(..., queues=[...])``): its limits are unknown,
    so no worker would know how to serve it."""

    def __init__(self, queue: str, declared: Sequence[str]) -> None:
        self.queue = queue
        self.declared = list(declared)
        names = ", ".join(repr(name) for name in declared) if declared else "none"
        super().__init__(
            f"queue {queue!r} was never declared (declared queues: {names}): declare it with "
            f"pregelkit.durable.declare_queue(saver, Queue({queue!r}, ...)) or start a worker "
            f"with Worker(..., queues=[Queue({queue!r}, ...)]), or leave queue= out for the "
            "default queue"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (UnknownQueueError, (self.queue, self.declared))


class GraphDrained(GraphBubbleUp):
    """The run stopped early because its ``RunControl`` asked it to drain.

    It finished the tasks it had started, saved, and left the thread
    resumable: ``invoke(None, config)`` continues it. ``reason`` is what
    ``request_drain`` was given.
    """

    def __init__(self, reason: str = "shutdown") -> None:
        self.reason = reason
        super().__init__(
            f"the run drained ({reason}): finished tasks are saved; resume the thread "
            "with invoke(None, config)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (GraphDrained, (self.reason,))


class RunSuspended(GraphBubbleUp):
    """A run on a worker stopped to wait (``pregelkit.durable``): what it
    had started finished and was saved, and its queue row says what it
    waits for, so the worker's slot is free meanwhile and any worker
    resumes the thread once it is due.

    ``status``: ``"sleeping"`` or ``"waiting"``; ``kind``: ``"sleep"``,
    ``"recv"`` or ``"child"``; ``due_at``: when it resumes at the latest
    (seconds since the epoch; ``None``: only when what it waits for comes);
    ``topic``: the message topic (``recv``) or the child's thread (``child``).
    """

    def __init__(self, status: str, kind: str, due_at: float | None, topic: str | None) -> None:
        self.status, self.kind, self.due_at, self.topic = status, kind, due_at, topic
        super().__init__(f"the run {status} ({kind}): a worker resumes it when it is due")

    def __reduce__(self) -> tuple[Any, ...]:
        return (RunSuspended, (self.status, self.kind, self.due_at, self.topic))


class ChildWorkflowError(Exception):
    """A child workflow (``child.submit`` inside a workflow) failed or was
    cancelled; its exception is the ``__cause__`` when it could be loaded.
    ``thread_id``: the child's thread; ``error``: its type and message."""

    def __init__(self, thread_id: str, error: str) -> None:
        self.thread_id, self.error = thread_id, error
        super().__init__(f"child workflow (thread {thread_id!r}) failed: {error}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChildWorkflowError, (self.thread_id, self.error))


class MessageTooLargeError(ValueError):
    """A message (``pregelkit.durable.send``) or event value is over the
    size limit once serialized."""

    def __init__(self, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(
            f"the message is {size:,} bytes serialized, over the {limit:,}-byte limit: "
            "store large values elsewhere (a store, a file) and send a reference"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageTooLargeError, (self.size, self.limit))


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


class InterruptNotPendingError(UnknownInterruptError, ValueError):
    """``Command(resume={id: value, ...})`` names an interrupt that is not
    pending; nothing was applied.

    LangGraph ignores such an id, but the commonest cause is an answer sent
    twice (a double-clicked button): the id it names was answered already,
    and taking the value as the answer to the next question is how a stale
    "yes" to "delete staging?" deletes production. ``pending`` holds the
    interrupts that can still be answered.
    """

    def __init__(self, interrupt_ids: Sequence[str], pending: Sequence[Interrupt]) -> None:
        self.pending = tuple(pending)
        super().__init__(
            f"Command(resume=...) answers interrupts that are not pending: "
            f"{sorted(interrupt_ids)}; nothing was applied. An id stops being pending once "
            f"its interrupt is answered (an answer sent twice names such an id), and ids "
            f"of other threads never are. Pending interrupts:\n{_pending_lines(pending)}",
            reason="not_pending",
            interrupt_ids=sorted(interrupt_ids),
            pending_ids=[i.id for i in pending],
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (InterruptNotPendingError, (self.interrupt_ids, self.pending))


class AmbiguousResumeError(UnknownInterruptError, ValueError, RuntimeError):
    """One resume value was given while several interrupts are pending; nothing
    was applied. Which question it answers must be said by id.

    A ``RuntimeError`` too: LangGraph raises one for this, so code written
    against it catches this as well."""

    def __init__(self, pending: Sequence[Interrupt]) -> None:
        self.pending = tuple(pending)
        super().__init__(
            f"{len(pending)} interrupts are pending, and a single resume value does not say "
            "which it answers; nothing was applied. Resume with "
            f"Command(resume={{interrupt_id: value, ...}}). Pending interrupts:\n"
            f"{_pending_lines(pending)}",
            reason="ambiguous",
            pending_ids=[i.id for i in pending],
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (AmbiguousResumeError, (self.pending,))


def _pending_lines(pending: Sequence[Interrupt]) -> str:
    """One line per pending interrupt: its id and the start of its question."""
    if not pending:
        return "  (none)"
    return "\n".join(f"  {i.id}: {_summarize(i.value)}" for i in pending)


def _summarize(value: Any, width: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``width`` characters: enough of a
    question to tell it from the others in an error message."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@lazy_dataclass(frozen=True, slots=True)
class NodeError:
    """A failed node and what it raised, as given to a node's error handler."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("node", "error")  # noqa: RUF023

    node: str
    error: BaseException

    def __init__(self, node: str, error: BaseException) -> None:
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "error", error)


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


class InvalidScheduleError(ValueError):
    """``wf.schedule(...)`` was given something it cannot fire by: a cron
    expression with a wrong field (the message names it), an unknown
    timezone, an interval under a second, an id another workflow's
    schedule has. Raised before anything is stored."""


class ScheduleNotFoundError(LookupError):
    """No schedule has this id (in this database): it was never declared,
    or it was deleted. ``schedules(saver)`` lists those there are."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"no schedule {schedule_id!r} in this database: `pregelkit schedules list` "
            "shows the schedules there are"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScheduleNotFoundError, (self.schedule_id,))
