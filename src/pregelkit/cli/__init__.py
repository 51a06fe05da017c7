"""The ``pregelkit`` command: run, resume and inspect durable workflows.

Workflows are ``@entrypoint`` functions (or any ``Pregel`` graph) named as
``MODULE:NAME``, where MODULE is a dotted module name or a path to a ``.py``
file. State lives in a SQLite file (``--db``, default ``pregelkit.sqlite``) or
a PostgreSQL database (``--db postgresql://...``)::

    pregelkit run examples/quickstart.py:report '[1, 2, 3]'
    pregelkit resume THREAD '"yes"'
    pregelkit resume THREAD '"yes"' --to INTERRUPT_ID
    pregelkit threads [--status S] [--limit N]
    pregelkit history THREAD
    pregelkit show THREAD [CHECKPOINT]
    pregelkit delete THREAD
    pregelkit cancel THREAD
    pregelkit uncancel THREAD
    pregelkit timeline THREAD [--html FILE]
    pregelkit worker MODULE:NAME ... --concurrency 8
    pregelkit submit MODULE:NAME --input JSON --thread ID
    pregelkit submit MODULE:NAME --resume JSON --thread ID
    pregelkit runs [--status S]
    pregelkit send THREAD JSON [--topic T]
    pregelkit serve MODULE:NAME [--config pregelkit.json] [--host H] [--port P]
    pregelkit lint PATH... [--format json]
    pregelkit schedules [list|pause|resume|delete|trigger] [ID]

Every command prints readable tables (fitted to the terminal, escaped;
``_table``), or JSON with ``--json`` (then stdout holds JSON alone, errors
included). Mistakes in the command line or the
environment (an unknown thread, an unreadable database, an entrypoint that
cannot be found) exit with status 2 and a message saying what to do; a
workflow that fails exits with status 1. Inspecting never imports workflow
code, and passwords in ``--db`` are never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn, TextIO

from pregelkit.cli import (
    _cancel,
    _fleet,
    _lint,
    _prune,
    _replay_check,
    _schedules,
    _send,
    _serve,
    _timeline,
)
from pregelkit.cli._commands import cmd_delete, cmd_history, cmd_show, cmd_threads
from pregelkit.cli._db import DEFAULT_DB
from pregelkit.cli._errors import CliError
from pregelkit.cli._lifecycle import THREAD_STATUSES
from pregelkit.cli._options import add_command, add_filters, table_options
from pregelkit.cli._render import _fail_line, _print_error
from pregelkit.cli._resume import cmd_resume, cmd_run
from pregelkit.cli._secrets import Redactor
from pregelkit.cli._streams import broken_pipe, command_streams

__all__ = ["main"]


class _Formatter(argparse.HelpFormatter):
    """argparse measures the commands of ``--help`` at the indent of their
    heading, then prints them one step further in: a name as long as
    ``schedules`` pushed its help onto a line of its own."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.help is argparse.SUPPRESS:
            return
        nested = self._current_indent + self._indent_increment
        for sub in self._iter_indented_subactions(action):
            width = len(self._format_action_invocation(sub)) + nested
            self._action_max_length = max(self._action_max_length, width)


class _Parser(argparse.ArgumentParser):
    """Usage mistakes become ``CliError``s, so ``--json`` reports them as JSON."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see `{self.prog} --help`)")


def _parser() -> argparse.ArgumentParser:
    default_db = os.environ.get("PREGELKIT_DB", DEFAULT_DB)
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"SQLite file or postgresql:// URL (default: $PREGELKIT_DB or {DEFAULT_DB})",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    tables = table_options(_Parser(add_help=False))
    parser = _Parser(
        prog="pregelkit",
        formatter_class=_Formatter,
        description="Run, resume and inspect durable pregelkit workflows.",
        epilog="Exit status: 0 done or waiting at an interrupt, 1 the workflow failed (or "
        "was cancelled while it ran), 2 a usage or environment error, or an action that "
        "makes no sense in the thread's state.",
    )
    # also taken after the command (`common`): listed here, where --help shows them
    parser.add_argument(
        "--db",
        default=default_db,
        help=f"SQLite file or postgresql:// URL (default: $PREGELKIT_DB or {DEFAULT_DB})",
    )
    parser.add_argument(
        "--json", action="store_true", default=False, help="print JSON (errors included)"
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run_opts = _Parser(add_help=False)
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

    p = add_command(
        sub,
        "run",
        cmd_run,
        [common, run_opts],
        help="start a workflow (or continue a thread)",
        description="Run MODULE:NAME on INPUT_JSON, printing each task's result as it "
        "finishes. Without INPUT_JSON, continue the thread given by --thread (e.g. after "
        "a crash).",
    )
    p.add_argument("entrypoint", metavar="MODULE:NAME", help="e.g. myapp.flows:report")
    p.add_argument("input", nargs="?", metavar="INPUT_JSON", help="the input, as JSON")
    p.add_argument("--thread", help="thread id (default: a new random one, printed)")

    p = add_command(
        sub,
        "resume",
        cmd_resume,
        [common, run_opts],
        help="answer an interrupt, or continue a stopped run",
        description="Resume THREAD: with VALUE_JSON as the answer to its interrupt, or "
        "without it after a crash. VALUE_JSON is always the answer itself; when several "
        "interrupts wait, --to ID says which one it answers.",
        thread=True,
    )
    p.add_argument("value", nargs="?", metavar="VALUE_JSON", help="the answer, as JSON")
    p.add_argument(
        "--to",
        metavar="ID",
        help="the id of the interrupt VALUE_JSON answers (needed when several wait; "
        "`pregelkit show THREAD` lists them)",
    )
    p.add_argument(
        "--target",
        "--entrypoint",
        dest="target",
        metavar="MODULE:NAME",
        help="the workflow, if it moved since `pregelkit run` recorded it (default: the "
        "recorded one, imported from where it was found then)",
    )

    p = add_command(sub, "threads", cmd_threads, [common, tables], help="list threads")
    add_filters(p, "threads", THREAD_STATUSES, None)
    add_command(
        sub,
        "history",
        cmd_history,
        [common, tables],
        help="a thread's checkpoints, oldest first",
        thread=True,
    )
    p = add_command(
        sub,
        "show",
        cmd_show,
        [common, tables],
        help="a checkpoint's channel values and pending writes",
        thread=True,
    )
    p.add_argument(
        "checkpoint", nargs="?", metavar="CHECKPOINT", help="id or prefix (default: latest)"
    )
    add_command(
        sub, "delete", cmd_delete, [common], help="delete a thread's checkpoints", thread=True
    )
    _cancel.register(sub, common)
    _timeline.register(sub, common)
    _fleet.register(sub, common, tables)
    _send.register(sub, common)
    _serve.register(sub, common)
    _lint.register(sub)
    _schedules.register(sub, common, tables)
    _prune.register(sub, common)
    _replay_check.register(sub, common)
    _describe(sub)
    return parser


def _describe(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """A command without a description of its own gets its one-line help,
    so ``pregelkit COMMAND --help`` always says what the command does."""
    for action in sub._choices_actions:
        parser = sub.choices[action.dest]
        if not parser.description and action.help:
            parser.description = action.help[0].upper() + action.help[1:] + "."


def _version() -> str:
    from pregelkit import __version__

    return f"pregelkit {__version__}"


def _db_locations(argv: Sequence[str]) -> list[str]:
    """Every database location the command line may name, so its password is
    masked even in errors raised before the arguments are parsed."""
    found = [os.environ.get("PREGELKIT_DB", "")]
    for i, word in enumerate(argv):
        if word == "--db" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif word.startswith("--db="):
            found.append(word[len("--db=") :])
    return [f for f in found if f]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in words
    try:
        with command_streams(as_json, Redactor(_db_locations(words))) as out:
            return _command(words, as_json, out)
    except BrokenPipeError:
        return broken_pipe()


def _require_rich() -> None:
    """Tables are laid out by rich, the ``cli`` extra: without it, say how
    to install it rather than fail halfway through a command."""
    try:
        import rich  # noqa: F401
    except ImportError:
        raise CliError(
            "the pregelkit command needs rich, which is not installed: "
            "pip install 'pregelkit[cli]'",
            kind="install",
        ) from None


def _parse(words: list[str]) -> argparse.Namespace:
    """The parsed command line. An unknown option is reported with the help
    of the command it was given to (`pregelkit threads --help`)."""
    args, unknown = _parser().parse_known_args(words)
    if unknown:
        raise CliError(
            f"unrecognized arguments: {' '.join(unknown)} (see `pregelkit {args.command} --help`)"
        )
    return args


def _command(words: list[str], as_json: bool, out: TextIO) -> int:
    try:
        args = _parse(words)  # --help and --version read without rich
        if args.command != "lint":  # the lint prints no table
            _require_rich()
        status: int = args.func(args, out)
    except CliError as exc:
        _fail_line(f"error: {exc}")
        if as_json:
            _print_error(out, exc.kind, str(exc), exc.thread_id)
        return 2
    except KeyboardInterrupt:
        _fail_line("interrupted")
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:
        from pregelkit.errors import CheckpointCorruptError

        if isinstance(exc, CheckpointCorruptError):  # stored data the saver refuses to load
            _fail_line(f"error: {exc}")
            if as_json:
                _print_error(out, "database", str(exc), None)
            return 2
        # a bug, or a failure nobody foresaw (a driver's error mid-command)
        traceback.print_exception(exc)
        _fail_line(f"internal error: {type(exc).__name__}: {exc}")
        if as_json:
            _print_error(out, "internal", f"{type(exc).__name__}: {exc}", None)
        return 1
    out.flush()
    return status
