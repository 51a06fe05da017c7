"""``pregelkit replay-check --db URL MODULE:NAME [--thread ID ...] [--since 7d]``:
the deploy gate (``pregelkit.testing.replay_check``). It replays the threads
in flight against the code named, reading the database and writing nothing,
and exits 1 when a resume of any of them would fail."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from pregelkit.cli._commands import _require_thread
from pregelkit.cli._db import open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command, duration
from pregelkit.cli._render import _print_json
from pregelkit.cli._target import load_target

if TYPE_CHECKING:
    from pregelkit.testing._replay import ReplayReport, ThreadCheck

__all__ = ["cmd_replay_check", "register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``replay-check`` to the ``pregelkit`` subcommands."""
    p = add_command(
        sub,
        "replay-check",
        cmd_replay_check,
        [common],
        help="check that this code resumes the threads in flight",
        description="Replay every thread in flight (interrupted, failed, crashed, "
        "sleeping, waiting) against MODULE:NAME as it is now: recorded results are served, "
        "no task body runs, nothing is written. Reports, per thread, ok or the call where "
        "a resume would raise NondeterminismError (recorded call, new call) and whether "
        "`if patched(...)` around the change resolves it. The entrypoint's own body runs.",
    )
    p.epilog = (
        "Exit status: 0 every thread would resume, 1 a thread would fail, 2 a usage or "
        "database error."
    )
    p.add_argument("entrypoint", metavar="MODULE:NAME", help="the code to deploy")
    p.add_argument(
        "--thread",
        action="append",
        metavar="ID",
        help="check only this thread (repeatable; default: every thread in flight)",
    )
    p.add_argument(
        "--since",
        type=duration,
        metavar="DURATION",
        help="only threads saved within this long (e.g. 7d)",
    )


def cmd_replay_check(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.testing import replay_check

    target = load_target(args.entrypoint)
    if getattr(target.graph, "__wrapped__", None) is None:
        raise CliError(
            f"{args.entrypoint} is not an @entrypoint workflow: replay-check replays "
            "entrypoints (a graph's pending nodes are task bodies, which it must not run)",
            kind="usage",
        )
    with open_database(args.db, create=False) as db:
        for thread_id in args.thread or ():
            _require_thread(db, thread_id)
        # listed by id (a get_tuple each): the cost grows with the threads, not their history
        threads = args.thread or db.threads()
        report = replay_check(target.graph, db.saver, threads=threads, since=args.since)
    if args.json:
        _print_json(_document(report), out)
    else:
        _print_text(report, out)
    return 0 if report.ok else 1


def _document(report: ReplayReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "checked": len(report.threads),
        "failed": len(report.failures),
        "skipped": report.skipped,
        "seconds": round(report.seconds, 3),
        "threads": [t.as_dict() for t in report.threads],
    }


def _print_text(report: ReplayReport, out: TextIO) -> None:
    for check in report.failures:
        out.write(_failure_line(check))
    summary = (
        f"{len(report.threads)} thread(s) in flight checked, {len(report.failures)} would "
        f"fail, {report.skipped} skipped (finished or older), {report.seconds:.1f} s"
    )
    out.write(("ok: " if report.ok else "FAILED: ") + summary + "\n")


def _failure_line(check: ThreadCheck) -> str:
    if check.status != "mismatch":
        return f"{check.thread_id}: error: {check.stopped_at}\n"
    if check.patched_fixes:
        fix = 'guard the new code with `if patched("..."):` to keep this thread on the old path'
    else:
        fix = (
            "the recorded patched() marker is no longer checked: keep the `if patched(...)`, "
            "or replace it with `deprecate_patch(...)`, until this thread ends"
        )
    return (
        f"{check.thread_id}: mismatch at call #{check.position} of {check.parent!r}: "
        f"recorded {check.recorded}, now {check.new}; {fix}\n"
    )
