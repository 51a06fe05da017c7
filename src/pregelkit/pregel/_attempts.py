"""The attempts of one run, on their way to the saver (and to tracing hooks).

The runner says when an attempt starts and when a retried one failed; the
loop closes an attempt when it saves the task's result, so the end record
goes to the saver in the same call (one transaction) as the result. Records
wait in ``AttemptLog.buffer`` until the loop's next saver call takes them;
an attempt's start asks the loop to save at once, so a process killed while
the body runs leaves its start behind.

Cost: with no checkpointer and no tracing the runner holds ``None`` and pays
one test per attempt. With a saver, an attempt costs two records (start and
end) and, at its start, one saver call unless one is already queued.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pregelkit._internal._constants import ERROR, INTERRUPT
from pregelkit.checkpoint.attempts import AttemptRecord, Outcome
from pregelkit.errors import GraphInterrupt, NodeTimeoutError
from pregelkit.types import PregelExecutableTask

__all__ = [
    "AttemptEvents",
    "AttemptHooks",
    "AttemptLog",
    "add_hooks_factory",
    "has_hooks",
    "outcome_of",
    "run_hooks",
]

_HOST = socket.gethostname()


def outcome_of(exc: BaseException | None) -> Outcome:
    """What an attempt that ended with ``exc`` (None: returned) counts as."""
    if exc is None:
        return "ok"
    if isinstance(exc, GraphInterrupt):
        return "interrupted"
    if isinstance(exc, NodeTimeoutError):
        return "timeout"
    if isinstance(exc, Exception):
        return "error"
    return "cancelled"


def _outcome_of_writes(writes: Sequence[tuple[str, Any]]) -> tuple[Outcome, BaseException | None]:
    chan, value = writes[0]
    if chan == ERROR:
        exc = value if isinstance(value, BaseException) else None
        return ("timeout" if isinstance(exc, NodeTimeoutError) else "error"), exc
    if chan == INTERRUPT:
        return "interrupted", None
    return "ok", None


def _error_fields(exc: BaseException | None) -> tuple[str | None, str | None]:
    if exc is None:
        return None, None
    return type(exc).__qualname__, str(exc)[:2000]


class AttemptLog:
    """The records of one run's attempts that no saver call has taken yet."""

    __slots__ = ("_lock", "buffer", "ns", "open", "pid", "run_id", "thread_id")

    def __init__(self, thread_id: str, ns: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.ns = ns
        self.run_id = run_id
        self.pid = os.getpid()
        self.buffer: list[AttemptRecord] = []
        self.open: dict[str, AttemptRecord] = {}
        """The running attempt of each task id: its start record."""
        self._lock = threading.Lock()

    def start(self, task: PregelExecutableTask, step: int, attempt: int) -> None:
        rec = AttemptRecord(
            self.thread_id,
            self.ns,
            self.run_id,
            step,
            task.id,
            task.name,
            attempt,
            time.time(),
            None,
            None,
            None,
            None,
            self.pid,
            _HOST,
            threading.current_thread().name,
        )
        with self._lock:
            self.open[task.id] = rec
            self.buffer.append(rec)

    def end(self, task_id: str, outcome: Outcome, exc: BaseException | None = None) -> bool:
        """Close the running attempt of ``task_id``; False if none runs."""
        with self._lock:
            rec = self.open.pop(task_id, None)
            if rec is None:
                return False
            etype, message = _error_fields(exc)
            self.buffer.append(
                AttemptRecord(
                    rec.thread_id,
                    rec.checkpoint_ns,
                    rec.run_id,
                    rec.step,
                    rec.task_id,
                    rec.name,
                    rec.attempt,
                    rec.started_at,
                    time.time(),
                    outcome,
                    etype,
                    message,
                    rec.pid,
                    rec.host,
                    rec.worker,
                )
            )
        return True

    def end_with(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> bool:
        """Close the running attempt of ``task_id`` with what its writes say."""
        if task_id not in self.open:
            return False
        outcome, exc = _outcome_of_writes(writes)
        return self.end(task_id, outcome, exc)

    def instant(self, task: PregelExecutableTask, step: int, outcome: Outcome) -> None:
        """A task whose result came without running it (``replayed``, ``cached``):
        attempt 0, started and ended now."""
        now = time.time()
        rec = AttemptRecord(
            self.thread_id,
            self.ns,
            self.run_id,
            step,
            task.id,
            task.name,
            0,
            now,
            now,
            outcome,
            None,
            None,
            self.pid,
            _HOST,
            threading.current_thread().name,
        )
        with self._lock:
            self.buffer.append(rec)

    def take(self) -> list[AttemptRecord]:
        """The records not yet given to a saver call (and forget them)."""
        with self._lock:
            taken = self.buffer
            if taken:
                self.buffer = []
            return taken


class AttemptHooks(Protocol):
    """What a tracer (``pregelkit.observe.otel``) hears of one run.

    ``attempt_started`` runs in the thread or asyncio task that runs the
    attempt's body, right before it, and ``attempt_ended`` right after it in
    the same place, so a hook can make its span current for the body."""

    def attempt_started(self, task: PregelExecutableTask, step: int, attempt: int) -> Any: ...

    def attempt_ended(
        self, token: Any, outcome: Outcome, exc: BaseException | None, retrying: bool
    ) -> None: ...

    def interrupted(self, interrupts: Sequence[Any]) -> None: ...

    def run_ended(self, exc: BaseException | None) -> None: ...


HooksFactory = Callable[[str, str, bool], "AttemptHooks | None"]
_factories: list[HooksFactory] = []


def add_hooks_factory(factory: HooksFactory) -> None:
    """Register ``factory(thread_id, run_id, nested)``, asked once per run for
    hooks (None: it has nothing to do for this run)."""
    if factory not in _factories:
        _factories.append(factory)


def has_hooks() -> bool:
    """Whether anything may trace runs (asked once per run)."""
    return bool(_factories)


def run_hooks(thread_id: str, run_id: str, nested: bool) -> AttemptHooks | None:
    for factory in _factories:
        hooks = factory(thread_id, run_id, nested)
        if hooks is not None:
            return hooks
    return None


class _Token:
    __slots__ = ("hook", "pending")

    def __init__(self, hook: Any, pending: Any) -> None:
        self.hook = hook
        self.pending = pending


class AttemptEvents:
    """What the runner tells the loop of attempts: one object for records
    (``log``, with ``flush`` to save them) and tracing (``hooks``)."""

    __slots__ = ("flush", "hooks", "log", "step")

    def __init__(
        self,
        log: AttemptLog | None,
        flush: Callable[[], Any],
        hooks: AttemptHooks | None,
        step: Callable[[], int],
    ) -> None:
        self.log = log
        self.flush = flush
        self.hooks = hooks
        self.step = step

    def started(self, task: PregelExecutableTask, attempt: int) -> _Token:
        """Attempt ``attempt`` (from 1) of ``task`` starts in this thread or
        task; ``.pending`` of the result is a save to await (async loop)."""
        step = self.step()
        pending = None
        if self.log is not None:
            self.log.start(task, step, attempt)
            pending = self.flush()
        hook = None if self.hooks is None else self.hooks.attempt_started(task, step, attempt)
        return _Token(hook, pending)

    def ended(
        self,
        task: PregelExecutableTask,
        token: _Token,
        exc: BaseException | None,
        retrying: bool,
    ) -> None:
        """The attempt's body is over. A failed attempt that will be retried
        is closed here (no writes record it); the last one is closed by the
        loop with the task's writes."""
        outcome = outcome_of(exc)
        if retrying and self.log is not None:
            self.log.end(task.id, outcome, exc)
        if self.hooks is not None:
            self.hooks.attempt_ended(token.hook, outcome, exc, retrying)
