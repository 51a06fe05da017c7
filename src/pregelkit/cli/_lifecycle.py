"""A thread's state as docs/guides/lifecycle.md names it, read from what is
stored alone (checkpoints, the run-control mark, the run queue), and the
one-line refusals of the actions that make no sense in it.

Every command that acts on a thread asks ``state_of`` first, so ``threads``,
``run``, ``resume``, ``cancel`` and ``submit`` judge a thread the same way,
and a refusal names the state and the command that does make sense.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pregelkit.cli._errors import CliError
from pregelkit.cli._marks import marked_status
from pregelkit.cli._render import shell_join
from pregelkit.cli._status import saved_status

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import CheckpointTuple
    from pregelkit.checkpoint.runs import RunRecord
    from pregelkit.cli._db import Database

__all__ = [
    "ACTIVE",
    "ThreadState",
    "latest_run",
    "queued_threads",
    "refuse",
    "state_of",
    "thread_status",
]

QUEUED = "queued"
RUNNING = "running"
SLEEPING = "sleeping"
WAITING = "waiting"
INTERRUPTED = "interrupted"
FAILED = "failed"
PENDING = "pending"
CANCELLED = "cancelled"
DRAINED = "drained"
DONE = "done"
UNREADABLE = "unreadable"
THREAD_STATUSES = (
    QUEUED,
    RUNNING,
    SLEEPING,
    WAITING,
    INTERRUPTED,
    FAILED,
    PENDING,
    CANCELLED,
    DRAINED,
    DONE,
    UNREADABLE,
)
"""Every status ``pregelkit threads`` shows (``unreadable``: its latest
checkpoint cannot be loaded): the choices of ``threads --status``."""
ACTIVE = (QUEUED, RUNNING, SLEEPING, WAITING)
"""The statuses of a thread's active queued run (one at a time)."""


@dataclass(frozen=True)
class ThreadState:
    """What a command needs to know of a thread before acting on it."""

    thread_id: str
    status: str
    """What ``pregelkit threads`` shows."""
    saved: str | None
    """The status its checkpoints alone give (None: it has none yet)."""
    run: RunRecord | None
    """Its latest queued run (``submit``), if it ever had one."""

    @property
    def queued_thread(self) -> bool:
        """Its runs go through the queue: resuming it queues the resume."""
        return self.run is not None

    @property
    def left_to_run(self) -> bool:
        """Whether continuing it would run anything (a cancel mark aside)."""
        return self.saved in (INTERRUPTED, FAILED, PENDING)


def latest_run(db: Database, thread_id: str) -> RunRecord | None:
    """The thread's latest queued run, if the database has a run queue."""
    if not db.saver.has_run_queue:
        return None
    from pregelkit.checkpoint.runs import handle_of_thread

    handle = handle_of_thread(db.saver, thread_id)
    return None if handle is None else handle.record()


_UNSAVED = (QUEUED, RUNNING, SLEEPING, WAITING, CANCELLED)
"""The states of a thread its queued run gives while it has no checkpoint:
submitted, being started (or waiting already), or cancelled before it started."""


def _known_unsaved(db: Database, run: RunRecord | None) -> bool:
    """Whether a thread without checkpoints is still one: its queued run
    waits or runs, or was cancelled before it started and the thread is
    still marked (uncancelled or deleted, it is as if never submitted)."""
    if run is None or run.status not in _UNSAVED:
        return False
    return run.status != CANCELLED or marked_status(db.saver, run.thread_id) == CANCELLED


def queued_threads(db: Database) -> list[str]:
    """Threads the run queue knows that may have no checkpoint yet."""
    if not db.saver.has_run_queue:
        return []
    marks = ", ".join("?" for _ in _UNSAVED)
    rows = db._rows(
        f"SELECT DISTINCT thread_id FROM pregelkit_runs WHERE status IN ({marks})", _UNSAVED
    )
    return [str(r[0]) for r in rows]


def thread_status(db: Database, tup: CheckpointTuple | None, run: RunRecord | None) -> str:
    """``running`` (a run holds the thread now: a process's lock or a
    worker's lease), ``queued`` (a submitted run waits for a worker),
    ``sleeping`` or ``waiting`` (its run waits: ``pregelkit.durable``),
    ``cancelled`` or ``drained`` (its run-control mark), else what its latest
    checkpoint says (``interrupted``, ``failed``, ``pending``, ``done``)."""
    thread_id = tup.config["configurable"]["thread_id"] if tup is not None else None
    if thread_id is None and run is not None:
        thread_id = run.thread_id
    if run is not None and run.status in (QUEUED, RUNNING, SLEEPING, WAITING):
        return run.status
    if thread_id is not None and db.is_running(thread_id):
        return RUNNING
    if thread_id is not None and (mark := marked_status(db.saver, thread_id)) is not None:
        return mark
    if tup is None:
        # a queued run that has not saved a checkpoint (state_of: only a
        # queued, running or cancelled one)
        return run.status if run is not None else DONE
    return saved_status(tup)


def state_of(db: Database, thread_id: str, tup: CheckpointTuple | None) -> ThreadState | None:
    """The thread's state, given its latest root checkpoint; None when the
    database knows nothing of it (no checkpoint, no queued run)."""
    run = latest_run(db, thread_id)
    if tup is None and not _known_unsaved(db, run):
        return None  # never known, or deleted (the queue keeps its history)
    return ThreadState(
        thread_id,
        thread_status(db, tup, run),
        None if tup is None else saved_status(tup),
        run,
    )


def refuse(state: ThreadState, action: str, advice: str) -> CliError:
    """The one-line error for ``action`` on a thread in ``state.status``:
    what the thread is, and the command that makes sense instead."""
    return CliError(
        f"cannot {action} thread {state.thread_id!r}: it is {_described(state)}; {advice}",
        kind="not_resumable",
        thread_id=state.thread_id,
    )


def _described(state: ThreadState) -> str:
    status = state.status
    run = state.run
    if status == QUEUED and run is not None:
        return f"queued (run {run.run_id}, waiting for a worker serving {run.workflow!r})"
    if status == RUNNING:
        return "running right now"
    if status in (SLEEPING, WAITING) and run is not None and run.waits_for:
        return f"{status} ({run.waits_for})"
    if status == CANCELLED and state.saved is None:
        return "cancelled before it ever ran"
    if status == CANCELLED:
        left = {INTERRUPTED: "waiting for an answer", DONE: "nothing left to run"}
        return f"cancelled ({left.get(state.saved or DONE, 'work left')})"
    if status == PENDING:
        return "pending (its run stopped before its end)"
    if status == INTERRUPTED:
        return "interrupted (waiting for an answer)"
    return status


def command(*words: str) -> str:
    """A command line to show, quoted for a shell."""
    return shell_join(words)
