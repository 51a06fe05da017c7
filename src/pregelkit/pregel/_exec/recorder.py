"""The attempts of one run, on their way to the saver (and to tracing hooks).

The runner says when an attempt starts and when a retried one failed; the
loop closes an attempt when it saves the task's result, so the end record
goes to the saver in the same call (one transaction) as the result.
Finished rows wait in ``AttemptLog.done`` until the loop's next saver call
takes them; a start becomes a row only when the loop's start saver
(``_core.records``) finds its attempt still running ``START_SAVE_DELAY``
after it started.

Cost: with no checkpointer and no tracing the runner holds ``None`` and pays
one test per attempt. With a saver, an attempt costs two tuples (its start,
its row) and one more row in the transaction of its writes: 1-4% of a task
of the chain and the fan-out with ``InMemorySaver``, 13% of the durable
SQLite chain (instructions, ``benchmarks/attempts_ab.py``). Only an attempt
that runs longer than ``START_SAVE_DELAY`` costs a save of its own (its start).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pregelkit._internal._constants import ERROR, INTERRUPT
from pregelkit.checkpoint.attempts import AttemptRow, Outcome, error_fields
from pregelkit.errors import GraphInterrupt, NodeTimeoutError
from pregelkit.pregel._exec.hooks import AttemptHooks
from pregelkit.types import PregelExecutableTask

__all__ = ["START_SAVE_DELAY", "AttemptRecorder", "AttemptLog", "outcome_of"]


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


Begun = tuple[int, str, str, int, float, str]
"""An attempt that started: (step, task id, name, attempt, started at, worker)."""

START_SAVE_DELAY = 0.002
"""Seconds a running attempt goes without its start saved (see
``pregel/_core/records.py``)."""


class AttemptLog:
    """The records of one run's attempts that no saver call has taken yet,
    as rows (``AttemptRecord`` fields in order: what savers store).

    A finished attempt is one row in ``done``, built once and given to the
    saver with the task's writes. A start becomes a row of its own only
    when its attempt is still running ``START_SAVE_DELAY`` after it began
    (``take_starts``): most tasks end sooner."""

    __slots__ = ("done", "head", "open", "saved", "thread_id")

    def __init__(self, thread_id: str, ns: str, run_id: str) -> None:
        self.head = (thread_id, ns, run_id)
        self.thread_id = thread_id
        self.open: dict[str, Begun] = {}
        """The running attempt of each task id."""
        self.saved: set[tuple[str, int]] = set()
        """(task id, attempt) of running attempts whose start was taken."""
        self.done: list[AttemptRow] = []

    def end(self, task_id: str, outcome: Outcome, exc: BaseException | None = None) -> bool:
        """Close the running attempt of ``task_id``; False if none runs."""
        begun = self.open.pop(task_id, None)
        if begun is None:
            return False
        step, tid, name, attempt, started_at, worker = begun
        if self.saved:
            self.saved.discard((tid, attempt))
        thread_id, ns, run_id = self.head
        etype, message = (None, None) if exc is None else error_fields(exc)
        self.done.append(
            (
                thread_id,
                ns,
                run_id,
                step,
                tid,
                name,
                attempt,
                started_at,
                time.time(),
                outcome,
                etype,
                message,
                _PID,
                _HOST,
                worker,
            )
        )
        return True

    def end_ok(self, task_id: str) -> list[AttemptRow]:
        """The path of nearly every task, in one call: its attempt returned
        and its writes are being saved; close the attempt as ``ok`` and take
        every finished row to save with them."""
        begun = self.open.pop(task_id, None)
        if begun is not None:
            step, tid, name, attempt, started_at, worker = begun
            if self.saved:
                self.saved.discard((tid, attempt))
            thread_id, ns, run_id = self.head
            ended_at = time.time()
            row: AttemptRow = (
                thread_id, ns, run_id, step, tid, name, attempt, started_at, ended_at,
                "ok", None, None, _PID, _HOST, worker,
            )  # fmt: skip
            done = self.done
            if not done:
                return [row]
            done.append(row)
        return self.take()

    def end_with(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> bool:
        """Close the running attempt of ``task_id`` with what its writes say."""
        chan = writes[0][0]
        if chan != ERROR and chan != INTERRUPT:
            return self.end(task_id, "ok")
        begun = self.open.get(task_id)
        if begun is None:
            return False
        outcome, exc = _outcome_of_writes(writes, begun[2])
        return self.end(task_id, outcome, exc)

    def instant(self, task_id: str, name: str, step: int, outcome: Outcome) -> None:
        """A task whose result came without running it (``replayed``, ``cached``):
        attempt 0, started and ended now."""
        now = time.time()
        thread_id, ns, run_id = self.head
        try:  # _worker(), without its frame: once per replayed call
            worker: str = _here.name
        except AttributeError:
            worker = _worker()
        self.done.append(
            (
                thread_id,
                ns,
                run_id,
                step,
                task_id,
                name,
                0,
                now,
                now,
                outcome,
                None,
                None,
                _PID,
                _HOST,
                worker,
            )
        )

    def stale(self, before: float) -> bool:
        """Whether an attempt that started before ``before`` runs with its
        start not yet taken (asked from the start saver's thread)."""
        saved = self.saved
        return any(b[4] < before and (b[1], b[3]) not in saved for b in list(self.open.values()))

    def take(self) -> list[AttemptRow]:
        """The finished rows no saver call has had yet (and forget them).
        Threads may take and append at once: each slice and ``del`` is
        atomic, so a row goes to one taker and an appended one is not lost."""
        done = self.done
        if not done:
            return []
        rows = done[:]
        del done[: len(rows)]
        return rows

    def take_starts(self, before: float) -> list[AttemptRow]:
        """``take``, and the start rows of attempts running since before
        ``before`` whose start was not taken yet (a start row that lands
        after its attempt's end replaces nothing: savers keep the end)."""
        rows = self.take()
        saved = self.saved
        head = self.head
        for begun in list(self.open.values()):
            key = (begun[1], begun[3])
            if begun[4] < before and key not in saved:
                saved.add(key)
                rows.append((*head, *begun[:5], None, None, None, None, _PID, _HOST, begun[5]))
        return rows


class _Run(Protocol):
    """What ``AttemptRecorder`` reads of the loop: the step running now."""

    step: int


class AttemptRecorder:
    """What the runner tells the loop of attempts: one object for records
    (``log``) and tracing (``hooks``)."""

    __slots__ = ("hooks", "instant", "log", "run")

    def __init__(
        self,
        log: AttemptLog | None,
        run: _Run,
        hooks: AttemptHooks | None,
        instant: Callable[[PregelExecutableTask, Outcome], None],
    ) -> None:
        self.log = log
        self.run = run
        self.hooks = hooks
        self.instant = instant
        """A task's result came without running it (a twin's result: ``cached``)."""

    def started(self, task: PregelExecutableTask, attempt: int) -> Any:
        """Attempt ``attempt`` (from 1) of ``task`` starts in this thread or
        asyncio task; returns what ``ended`` needs back."""
        if self.log is not None:  # the log's start, inline: this is the per-task path
            try:
                worker: str = _here.name
            except AttributeError:
                worker = _worker()
            begun = (self.run.step, task.id, task.name, attempt, time.time(), worker)
            self.log.open[task.id] = begun
        if self.hooks is None:
            return None
        return self.hooks.attempt_started(task, self.run.step, attempt)

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
        hooks = self.hooks
        outcome = outcome_of(exc, task.name)
        if retrying and self.log is not None:
            self.log.end(task.id, outcome, exc)
        if hooks is not None:
            hooks.attempt_ended(token, outcome, exc, retrying)
