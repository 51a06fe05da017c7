"""The ``pregelkit`` command: run, resume and inspect durable workflows.

Workflows are ``@entrypoint`` functions (or any ``Pregel`` graph) named as
``MODULE:NAME``, where MODULE is a dotted module name or a path to a ``.py``
file. State lives in a SQLite file (``--db``, default ``pregelkit.sqlite``) or
a PostgreSQL database (``--db postgresql://...``)::

    pregelkit run examples/quickstart.py:report '[1, 2, 3]'
    pregelkit resume THREAD '"yes"'
    pregelkit threads
    pregelkit history THREAD
    pregelkit show THREAD [CHECKPOINT]
    pregelkit delete THREAD
    pregelkit cancel THREAD

Every command prints readable tables, or JSON with ``--json``. Mistakes in
the command line or the environment (an unknown thread, an unreadable
database, an entrypoint that cannot be found) exit with status 2 and a
message saying what to do; a workflow that fails exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pregelkit.cli import _cancel
from pregelkit.cli._commands import (
    cmd_delete,
    cmd_history,
    cmd_resume,
    cmd_run,
    cmd_show,
    cmd_threads,
)
from pregelkit.cli._db import DEFAULT_DB
from pregelkit.cli._errors import CliError
from pregelkit.cli._render import _fail_line

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    default_db = os.environ.get("PREGELKIT_DB", DEFAULT_DB)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"SQLite file or postgresql:// URL (default: $PREGELKIT_DB or {DEFAULT_DB})",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    parser = argparse.ArgumentParser(
        prog="pregelkit",
        description="Run, resume and inspect durable pregelkit workflows.",
        epilog="Exit status: 0 done or waiting at an interrupt, 1 the workflow failed, "
        "2 a usage or environment error.",
    )
    parser.add_argument("--db", default=default_db, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run_opts = argparse.ArgumentParser(add_help=False)
    run_opts.add_argument("--cache", help="SQLite file for the tasks' cache (CachePolicy)")
    run_opts.add_argument(
        "--durability",
        choices=["sync", "async", "exit"],
        help="when to save: before each next step (sync), in the background (async, the "
        "default), or when the run ends (exit)",
    )
    run_opts.add_argument(
        "--traceback", action="store_true", help="print the traceback if the workflow fails"
    )

    p = sub.add_parser(
        "run",
        parents=[common, run_opts],
        help="start a workflow (or continue a thread)",
        description="Run MODULE:NAME on INPUT_JSON, printing each task's result as it "
        "finishes. Without INPUT_JSON, continue the thread given by --thread (e.g. after "
        "a crash).",
    )
    p.add_argument("entrypoint", metavar="MODULE:NAME", help="e.g. myapp.flows:report")
    p.add_argument("input", nargs="?", metavar="INPUT_JSON", help="the input, as JSON")
    p.add_argument("--thread", help="thread id (default: a new random one, printed)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "resume",
        parents=[common, run_opts],
        help="answer an interrupt, or continue a stopped run",
        description="Resume THREAD: with VALUE_JSON as the answer to its interrupt (or a "
        "JSON object of interrupt id to answer), or without it after a crash.",
    )
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("value", nargs="?", metavar="VALUE_JSON", help="the answer, as JSON")
    p.add_argument(
        "--entrypoint",
        metavar="MODULE:NAME",
        help="the workflow (default: the one `pregelkit run` recorded)",
    )
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("threads", parents=[common], help="list threads")
    p.set_defaults(func=cmd_threads)

    p = sub.add_parser("history", parents=[common], help="a thread's checkpoints, oldest first")
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--entrypoint", metavar="MODULE:NAME", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "show", parents=[common], help="a checkpoint's channel values and pending writes"
    )
    p.add_argument("thread", metavar="THREAD")
    p.add_argument(
        "checkpoint", nargs="?", metavar="CHECKPOINT", help="id or prefix (default: latest)"
    )
    p.add_argument("--entrypoint", metavar="MODULE:NAME", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("delete", parents=[common], help="delete a thread's checkpoints")
    p.add_argument("thread", metavar="THREAD")
    p.set_defaults(func=cmd_delete)
    _cancel.register(sub, common)
    return parser


def _version() -> str:
    from pregelkit import __version__

    return f"pregelkit {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        status: int = args.func(args, out)
    except CliError as exc:
        _fail_line(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        _fail_line("interrupted")
        return 130
    out.flush()
    return status
