"""The attempts of one run, on their way to the saver (and to tracing hooks).

The runner says when an attempt starts and when a retried one failed; the
loop closes an attempt when it saves the task's result, so the end record
goes to the saver in the same call (one transaction) as the result. Records
wait in ``AttemptLog.buffer`` until the loop's next saver call takes them,
or until the loop's start saver (``_loop_attempts``) finds an attempt still
running ``START_SAVE_DELAY`` after it started.

Cost: with no checkpointer and no tracing the runner holds ``None`` and pays
one test per attempt. With a saver, an attempt costs two small objects and
one more row in the transaction of its writes; only an attempt that runs
longer than ``START_SAVE_DELAY`` costs a save of its own (its start).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pregelkit._internal._constants import ERROR, INTERRUPT
from pregelkit.checkpoint.attempts import AttemptRow, Outcome, error_fields
from pregelkit.errors import GraphInterrupt, NodeTimeoutError
from pregelkit.pregel._hooks import AttemptHooks
from pregelkit.types import PregelExecutableTask

__all__ = ["AttemptEvents", "AttemptLog", "outcome_of"]


def _hostname() -> str:
    if hasattr(os, "uname"):  # what socket.gethostname() says, without loading socket
        return os.uname().nodename
    import socket

    return socket.gethostname()


_HOST = _hostname()
_PID = os.getpid()


def _forked() -> None:
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_forked)  # a forked worker records its own pid

_here = threading.local()


def _worker() -> str:
    """The name of the running thread, kept in the thread (one attribute read
    on the task path instead of ``current_thread()``)."""
    try:
        name: str = _here.name
    except AttributeError:
        name = _here.name = threading.current_thread().name
    return name


def outcome_of(exc: BaseException | None, name: str) -> Outcome:
    """What an attempt of task ``name`` that ended with ``exc`` (None:
    returned) counts as. A timeout is the attempt's own (or its step's); a
    body that failed with a timeout of a task it called is an ``error``."""
    if exc is None:
        return "ok"
    if isinstance(exc, GraphInterrupt):
        return "interrupted"
    if isinstance(exc, NodeTimeoutError) and (exc.node == name or exc.kind == "step"):
        return "timeout"
    if isinstance(exc, Exception):
        return "error"
    return "cancelled"


def _outcome_of_writes(
    writes: Sequence[tuple[str, Any]], name: str
) -> tuple[Outcome, BaseException | None]:
    chan, value = writes[0]
    if chan == ERROR:
        exc = value if isinstance(value, BaseException) else None
        return ("error" if exc is None else outcome_of(exc, name)), exc
    if chan == INTERRUPT:
        return "interrupted", None
    return "ok", None


class AttemptLog:
    """The records of one run's attempts that no saver call has taken yet,
    as rows (``AttemptRecord`` fields in order: what savers store).

    ``buffer`` is keyed by attempt: an attempt that ends before its start was
    taken leaves one row (the finished one), so a quick task costs one row
    in the transaction of its writes."""

    __slots__ = ("buffer", "head", "open")

    def __init__(self, thread_id: str, ns: str, run_id: str) -> None:
        self.head = (thread_id, ns, run_id)
        self.buffer: dict[tuple[str, int], AttemptRow] = {}
        self.open: dict[str, AttemptRow] = {}
        """The running attempt of each task id: its start row."""

    @property
    def thread_id(self) -> str:
        return self.head[0]

    def start(self, task: PregelExecutableTask, step: int, attempt: int) -> None:
        row = (
            *self.head,
            step,
            task.id,
            task.name,
            attempt,
            time.time(),
            None,
            None,
            None,
            None,
            _PID,
            _HOST,
            _worker(),
        )
        self.open[task.id] = row
        self.buffer[(task.id, attempt)] = row

    def end(self, task_id: str, outcome: Outcome, exc: BaseException | None = None) -> bool:
        """Close the running attempt of ``task_id``; False if none runs."""
        row = self.open.pop(task_id, None)
        if row is None:
            return False
        etype, message = (None, None) if exc is None else error_fields(exc)
        self.buffer[(task_id, row[6])] = (
            *row[:8],
            time.time(),
            outcome,
            etype,
            message,
            *row[12:],
        )
        return True

    def end_with(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> bool:
        """Close the running attempt of ``task_id`` with what its writes say."""
        row = self.open.get(task_id)
        if row is None:
            return False
        chan = writes[0][0]
        if chan != ERROR and chan != INTERRUPT:
            return self.end(task_id, "ok")
        outcome, exc = _outcome_of_writes(writes, row[5])
        return self.end(task_id, outcome, exc)

    def instant(self, task: PregelExecutableTask, step: int, outcome: Outcome) -> None:
        """A task whose result came without running it (``replayed``, ``cached``):
        attempt 0, started and ended now."""
        now = time.time()
        row = (
            *self.head,
            step,
            task.id,
            task.name,
            0,
            now,
            now,
            outcome,
            None,
            None,
            _PID,
            _HOST,
            _worker(),
        )
        self.buffer[(task.id, 0)] = row

    def stale(self, before: float) -> bool:
        """Whether an attempt that started before ``before`` runs with its
        start not yet taken."""
        rows = list(self.buffer.values())
        return any(row[8] is None and row[7] < before for row in rows)

    def take(self) -> list[AttemptRow]:
        """The rows not yet given to a saver call (and forget them). The run
        and the process-wide start saver may take at once: each row goes to
        whichever pops it first (a late start row replaces no end row)."""
        buffer = self.buffer
        if not buffer:
            return []
        pop = buffer.pop
        return [row for key in list(buffer) if (row := pop(key, None)) is not None]


class AttemptEvents:
    """What the runner tells the loop of attempts: one object for records
    (``log``; ``watch`` asks for starts to be saved soon) and tracing
    (``hooks``)."""

    __slots__ = ("hooks", "instant", "log", "step", "watch")

    def __init__(
        self,
        log: AttemptLog | None,
        watch: Callable[[], None],
        hooks: AttemptHooks | None,
        step: Callable[[], int],
        instant: Callable[[PregelExecutableTask, Outcome], None],
    ) -> None:
        self.log = log
        self.watch = watch
        self.hooks = hooks
        self.step = step
        self.instant = instant
        """A task's result came without running it (a twin's result: ``cached``)."""

    def started(self, task: PregelExecutableTask, attempt: int) -> Any:
        """Attempt ``attempt`` (from 1) of ``task`` starts in this thread or
        asyncio task; returns what ``ended`` needs back."""
        step = self.step()
        if self.log is not None:
            self.log.start(task, step, attempt)
            self.watch()
        return None if self.hooks is None else self.hooks.attempt_started(task, step, attempt)

    def ended(
        self,
        task: PregelExecutableTask,
        token: Any,
        exc: BaseException | None,
        retrying: bool,
    ) -> None:
        """The attempt's body is over. A failed attempt that will be retried
        is closed here (no writes record it); the last one is closed by the
        loop with the task's writes."""
        outcome = outcome_of(exc, task.name)
        if retrying and self.log is not None:
            self.log.end(task.id, outcome, exc)
        if self.hooks is not None:
            self.hooks.attempt_ended(token, outcome, exc, retrying)
