"""``pregelkit serve``'s command line. The server itself is the optional
``server`` extra (``pregelkit.server``), loaded only when the command runs:
the rest of the CLI, and ``pregelkit serve --help``, work without it."""

from __future__ import annotations

import argparse
import importlib
from typing import Any, TextIO

from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command

MAX_BODY = 10 * 1024 * 1024
STOP_TIMEOUT = 10.0
"""Seconds a stopping server waits for open requests: without a bound, one
client sending its body a byte at a time kept SIGTERM from ever ending it
(and an orchestrator's SIGKILL then skipped the workers' hand-back)."""


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = add_command(
        sub,
        "serve",
        cmd_serve,
        [common],
        help="serve workflows over LangGraph's server API",
        description="Serve MODULE:NAME (or the graphs of --config pregelkit.json or "
        "langgraph.json) over the HTTP API of LangGraph's server, the part the langgraph-sdk "
        "client uses, with in-process workers running the runs (unless --no-workers). "
        "Needs the server extra: pip install 'pregelkit[server]'.",
    )
    p.add_argument("target", nargs="?", metavar="MODULE:NAME", help="the workflow to serve")
    p.add_argument("--config", metavar="FILE", help="pregelkit.json or langgraph.json")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=2024, help="port (2024, as LangGraph's dev server)")
    p.add_argument(
        "--auth-key",
        action="append",
        metavar="KEY",
        help="an accepted x-api-key (repeatable; also $PREGELKIT_API_KEY, comma-separated); "
        "required to listen beyond localhost",
    )
    p.add_argument(
        "--no-workers",
        action="store_true",
        help="run no workers here: `pregelkit worker` processes run the queued runs",
    )
    p.add_argument(
        "--static",
        metavar="DIR",
        help="also serve the files of DIR at /ui/ (a web page calling this API on its own "
        "origin; the files need no key, the API still does)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="in-process runs at a time (8), for the sync and the async workflows each",
    )
    p.add_argument(
        "--max-body", type=int, default=MAX_BODY, metavar="BYTES",
        help=f"largest request body accepted (default {MAX_BODY})",
    )  # fmt: skip
    p.add_argument(
        "--stop-timeout", type=float, default=STOP_TIMEOUT, metavar="SECONDS",
        help="how long a stopping server waits for the requests still open (a runs.wait, a "
        f"slow upload) before it cuts them and stops its workers (default {STOP_TIMEOUT:g})",
    )  # fmt: skip


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    try:
        command = importlib.import_module("pregelkit.server._command")
    except ImportError as exc:
        raise CliError(
            f"pregelkit serve needs the server extra ({exc}): pip install 'pregelkit[server]'",
            kind="install",
        ) from None
    status: int = command.cmd_serve(args, out)
    return status
