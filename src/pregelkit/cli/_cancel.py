"""``pregelkit cancel THREAD``: stop a thread's run from another terminal.

The command marks the thread cancelled in the database; the run that owns
it (in whatever process) notices within a task call or a tenth of a second,
stops starting tasks, saves what finished and exits with ``RunCancelledError``.
The thread runs again only when asked: ``pregelkit resume THREAD`` clears
the mark and continues it.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from pregelkit.cli._commands import _require_thread, _resume_command
from pregelkit.cli._db import open_database
from pregelkit.cli._render import _print_json

__all__ = ["cmd_cancel", "register"]

CANCELLED = "cancelled"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``cancel`` to the ``pregelkit`` subcommands."""
    p = sub.add_parser(
        "cancel",
        parents=[common],
        help="cancel a thread: its run stops, and it runs again only after `resume`",
        description="Mark THREAD cancelled. Its run, in any process, starts no new task, "
        "saves what finished and stops; no run of THREAD starts until "
        "`pregelkit resume THREAD`.",
    )
    p.add_argument("thread", metavar="THREAD")
    p.set_defaults(func=cmd_cancel)


def cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint.runs import handle_of_thread

    with open_database(args.db, create=False) as db:
        # a queued run (wf.submit) is cancelled in the queue: before it has
        # started it has no checkpoint yet; a running one also gets the mark
        handle = handle_of_thread(db.saver, args.thread)
        if handle is None or handle.cancel() != "cancelled":
            _require_thread(db, args.thread)
            db.saver.put_thread_control(args.thread, CANCELLED)
    hint = _resume_command(args, args.thread, None)
    if args.json:
        _print_json({"event": "cancelled", "thread_id": args.thread, "resume": hint}, out)
    else:
        out.write(
            f"cancelled: thread {args.thread}. A run of it stops at its next task; "
            f"continue it later with: {hint}\n"
        )
    return 0
