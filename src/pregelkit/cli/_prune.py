"""``pregelkit prune --db URL [--older-than 30d] [--keep-latest] [--dry-run]``:
apply a retention policy once (``pregelkit.durable.prune``), with a progress
bar on a terminal and a summary of the rows and bytes removed per table.

The prune runs in short transactions, so workers may keep running; Ctrl-C
stops it between two of them, leaving a consistent database that the same
command finishes later.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from pregelkit.cli._db import open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command, duration
from pregelkit.cli._render import _print_json

if TYPE_CHECKING:
    from pregelkit.checkpoint._retention import Counts
    from pregelkit.checkpoint.retention import PruneReport

__all__ = ["cmd_prune", "register"]

INTERRUPTED = 130


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``prune`` to the ``pregelkit`` subcommands."""
    p = add_command(
        sub,
        "prune",
        cmd_prune,
        [common],
        help="drop old checkpoint history and ended runs",
        description="Drop history the database no longer needs, in short transactions "
        "(safe while workers run). --older-than drops checkpoints, attempt records and "
        "ended runs older than that; --keep-latest keeps only each thread's latest "
        "checkpoint. Never removed: what a thread needs to go on (its latest checkpoint, "
        "pending writes, an active or interrupted run, a checkpoint a queued run forks "
        "from). Whole threads are never deleted here: use Worker(retention="
        "RetentionPolicy(delete_threads_after=...)) or pregelkit.durable.prune.",
    )
    p.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="drop history older than this: a number and s, m, h or d (e.g. 30d)",
    )
    p.add_argument(
        "--keep-latest", action="store_true", help="keep only each thread's latest checkpoint"
    )
    p.add_argument("--dry-run", action="store_true", help="report what would go; delete nothing")


def cmd_prune(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint import _retention
    from pregelkit.checkpoint.retention import (
        PruneReport,
        RetentionPolicy,
        prune_job,
        run_steps,
    )

    if args.older_than is None and not args.keep_latest:
        raise CliError(
            "say what to prune: --older-than DURATION (e.g. 30d), --keep-latest, or both",
            kind="usage",
        )
    policy = RetentionPolicy(
        keep_checkpoints=1 if args.keep_latest else None,
        max_age=args.older_than,
        ended_runs_max_age=args.older_than,
    )
    so_far: list[Counts] = []
    with open_database(args.db, create=False, inspect=True) as db:
        saver = db.saver
        total = saver.run_queue(_retention.count_checkpoints, "count checkpoints")
        with _bar(total, show=not args.json and sys.stderr.isatty()) as advance:

            def progress(counts: Counts) -> None:
                so_far[:] = [counts]
                advance(counts.scanned)

            try:
                with _stop_between() as between:
                    job = prune_job(saver, policy, args.dry_run, progress)
                    counts = run_steps(saver, job, between)
            except KeyboardInterrupt:
                _summary(out, args, PruneReport.of(so_far[0], args.dry_run) if so_far else None)
                return INTERRUPTED
    _summary(out, args, PruneReport.of(counts, args.dry_run), done=True)
    return 0


@contextmanager
def _stop_between() -> Iterator[Callable[[], None]]:
    """Ctrl-C stops the prune between two transactions: the first one is
    noted and raised by the check run after each transaction (raised at any
    bytecode, it could land while the saver's connection is being taken and
    leave it marked as held); a second one stops at once."""
    asked: list[bool] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(True)

    def between() -> None:
        if asked:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handle)
    except ValueError:  # not the main thread: Python delivers no signal here
        yield lambda: None
        return
    try:
        yield between
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _bar(total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr over the checkpoint rows scanned;
    nothing when stderr is not a terminal (or with ``--json``)."""
    if not show:
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("checkpoints scanned", total=total)
        yield lambda done: bar.update(task, completed=min(done, total))


def _summary(
    out: TextIO, args: argparse.Namespace, report: PruneReport | None, done: bool = False
) -> None:
    from pregelkit.checkpoint._retention import TABLES

    if args.json:
        data: dict[str, Any] = {"event": "pruned" if done else "interrupted"}
        if report is not None:
            data.update(
                dry_run=report.dry_run,
                rows=dict(report.rows),
                bytes=dict(report.bytes),
                threads_deleted=report.threads_deleted,
            )
        _print_json(data, out)
        return
    if report is not None:
        for table in TABLES:
            if report.rows[table]:
                rows, size = report.rows[table], report.bytes[table]
                out.write(f"  {table:<16}{rows:>12,} rows {size:>14,} bytes\n")
        out.write(f"{report}\n")
    if not done:
        out.write(
            "interrupted between two transactions: the database is consistent; "
            "run the same command again to finish\n"
        )
