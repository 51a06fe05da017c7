"""``pregelkit cancel THREAD`` and ``uncancel THREAD``: stop a thread's run
from another terminal, and let a cancelled thread run again.

``cancel`` marks the thread cancelled in the database; the run that owns
it (in whatever process) notices within a task call or a tenth of a second,
stops starting tasks, saves what finished and exits with ``RunCancelledError``.
A queued run that has not started is cancelled in the queue: it never
starts. The thread runs again only when asked: ``pregelkit resume THREAD``
clears the mark and continues it; ``uncancel`` only clears the mark.
What each does in each state is the table of docs/guides/lifecycle.md.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from pregelkit.cli._commands import _cli, _known_state, _resume_command, _state
from pregelkit.cli._db import Database, open_database
from pregelkit.cli._lifecycle import (
    ACTIVE,
    CANCELLED,
    DONE,
    RUNNING,
    SLEEPING,
    WAITING,
    ThreadState,
    refuse,
)
from pregelkit.cli._options import add_command
from pregelkit.cli._render import _print_json, clean

__all__ = ["cmd_cancel", "cmd_uncancel", "register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``cancel`` and ``uncancel`` to the ``pregelkit`` subcommands."""
    add_command(
        sub,
        "cancel",
        cmd_cancel,
        [common],
        help="cancel a thread's run; it runs again only after `resume`",
        description="Mark THREAD cancelled. Its run, in any process, starts no new task, "
        "saves what finished and stops; a queued run of it never starts; no run of THREAD "
        "starts until `pregelkit resume THREAD` (or `pregelkit uncancel THREAD`).",
        thread=True,
    )
    add_command(
        sub,
        "uncancel",
        cmd_uncancel,
        [common],
        help="clear a thread's cancel mark without running it",
        description="Clear THREAD's cancel mark, so that it may run again (`pregelkit "
        "resume THREAD` clears it too, and continues the thread at once).",
        thread=True,
    )


def cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False) as db:
        state = _known_state(db, args.thread)
        message = _cancel(args, db, state)
    hint = _resume_command(args, args.thread, None) if _resumable(state) else None
    if args.json:
        _print_json(
            {"event": "cancelled", "thread_id": args.thread, "resume": hint, "message": message},
            out,
        )
    else:
        out.write(clean(message) + (f"; continue it later with: {hint}" if hint else "") + "\n")
    return 0


def _resumable(state: ThreadState) -> bool:
    """Whether ``pregelkit resume`` will have something to continue."""
    return state.saved is not None and state.saved != DONE


def _cancel(args: argparse.Namespace, db: Database, state: ThreadState) -> str:
    """Cancel the thread as its state asks; what happened, in a line."""
    thread_id = state.thread_id
    if state.status == CANCELLED:
        return f"thread {thread_id} is cancelled already"
    run = state.run
    if run is not None and state.status in ACTIVE:
        from pregelkit.checkpoint.runs import RunHandle

        cancelled = RunHandle(db.saver, run.run_id, thread_id).cancel() == CANCELLED
        # the mark keeps any run of it from starting until it is resumed
        db.saver.put_thread_control(thread_id, CANCELLED)
        if cancelled and run.status in (SLEEPING, WAITING):
            return f"cancelled: run {run.run_id} of thread {thread_id} while it was {run.status}"
        if cancelled and state.saved is None:
            return (
                f"cancelled: run {run.run_id} of thread {thread_id} before it started "
                "(nothing of it ran; `pregelkit submit` queues it again)"
            )
        if cancelled:
            return f"cancelled: run {run.run_id} of thread {thread_id} before it started"
        return f"cancelled: thread {thread_id}; its run stops at its next task"
    if state.status == RUNNING:
        db.saver.put_thread_control(thread_id, CANCELLED)
        return f"cancelled: thread {thread_id}; its run stops at its next task"
    if state.saved == DONE or state.saved is None:
        raise refuse(
            state,
            "cancel",
            f"nothing runs or is left to run (`{_cli(args, 'delete', thread_id)}` forgets it)",
        )
    db.saver.put_thread_control(thread_id, CANCELLED)
    return f"cancelled: thread {thread_id}; it does not run until resumed"


def cmd_uncancel(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False) as db:
        state = _known_state(db, args.thread)
        marked = db.saver.get_thread_control(args.thread) == CANCELLED
        if marked:
            db.saver.put_thread_control(args.thread, None)
        after = _state(db, args.thread)
    status = after.status if after is not None else state.status
    if marked:
        message = f"uncancelled: thread {clean(args.thread)} is {status} now"
        if after is not None and after.left_to_run:
            message += f"; continue it with: {_resume_command(args, args.thread, None)}"
    else:
        message = f"thread {clean(args.thread)} is not cancelled ({status}): nothing to do"
    if args.json:
        _print_json(
            {"event": "uncancelled", "thread_id": args.thread, "was_cancelled": marked,
             "status": status},
            out,
        )  # fmt: skip
    else:
        out.write(message + "\n")
    return 0
