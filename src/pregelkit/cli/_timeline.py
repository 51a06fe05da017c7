"""``pregelkit timeline THREAD``: which tasks a thread ran, when, for how long,
in how many attempts, which came from the cache or were replayed, and where
it stopped, read from the attempt records the savers keep.

Three views of the same records: a Gantt chart in the terminal, the
``--json`` document (schema in ``_timeline_data``) and, with ``--html FILE``,
a self-contained page to zoom, pan and hover in a browser.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any, TextIO

from pregelkit.cli._commands import _require_thread
from pregelkit.cli._db import open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command
from pregelkit.cli._render import _print_json, clean
from pregelkit.cli._secrets import Redactor

__all__ = ["cmd_timeline", "register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``timeline`` to the ``pregelkit`` subcommands."""
    p = add_command(
        sub,
        "timeline",
        cmd_timeline,
        [common],
        help="a thread's task attempts over time (chart, JSON or HTML)",
        description="Show every attempt of every task THREAD ran, run by run: when it "
        "started, how long it took and how it ended (ok, error, interrupted, cached, "
        "replayed, timeout, cancelled, or unfinished when its process died).",
        thread=True,
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML page (zoom, pan, hover for details) to FILE",
    )


def cmd_timeline(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False, inspect=True) as db:
        _require_thread(db, args.thread)
        from pregelkit.observe.timeline import load_timeline

        timeline = load_timeline(db.saver, args.thread)
        running = db.is_running(args.thread)
    now = time.time()
    if args.html is not None:
        from pregelkit.cli._timeline_data import size
        from pregelkit.cli._timeline_html import render_html

        # like everything the command prints, the page shows no password
        page = Redactor([args.db]).mask(render_html(timeline, running=running, now=now))
        _write_file(args.html, page)
        if args.json:
            _print_json(
                {
                    "event": "html",
                    "thread_id": args.thread,
                    "path": os.path.abspath(args.html),
                    "runs": len(timeline.runs),
                    "attempts": sum(len(r.attempts) for r in timeline.runs),
                },
                out,
            )
        else:
            out.write(f"wrote {clean(args.html)}: {size(timeline)} (open it in a browser)\n")
        return 0
    if args.json:
        from pregelkit.cli._timeline_data import timeline_data

        _print_json(timeline_data(timeline, running=running, now=now), out)
        return 0
    from pregelkit.cli._timeline_text import render_text

    render_text(
        timeline,
        out,
        color=out.isatty() and not os.environ.get("NO_COLOR"),
        width=shutil.get_terminal_size().columns,
        running=running,
        now=now,
    )
    return 0


def _write_file(path: str, text: str) -> None:
    """Write ``text`` whole or not at all: a page cut short by a full disk or
    Ctrl-C never replaces a good one."""
    if not path:
        raise CliError("--html needs a file name, e.g. --html timeline.html")
    if os.path.isdir(path):
        raise CliError(f"--html {path!r} is a directory: give a file name, e.g. timeline.html")
    if os.path.exists(path) and not os.path.isfile(path):
        # a pipe or a device (/dev/stdout): written into, never replaced
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise CliError(f"cannot write {path!r}: {exc.strerror or exc}") from None
        return
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".timeline-", suffix=".html", dir=folder)
    except OSError as exc:
        raise CliError(
            f"cannot write {path!r}: {exc.strerror or exc}; choose a writable folder"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise CliError(
                f"cannot write {path!r}: {exc.strerror or exc}; choose a writable folder"
            ) from None
        raise
