"""How a subcommand is declared, and the options the listing commands
(``threads``, ``history``, ``show``, ``runs``) share, so they read and behave
the same everywhere."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

P = TypeVar("P", bound=argparse.ArgumentParser)


def add_command(
    sub: Any,
    name: str,
    run: Callable[[argparse.Namespace, TextIO], int],
    parents: list[argparse.ArgumentParser],
    help: str,
    description: str | None = None,
    *,
    thread: bool = False,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` to ``sub`` (the ``pregelkit`` subparsers),
    run by ``run``; ``thread``: it acts on one thread, whose id is its first
    argument (``THREAD``)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, parents=parents, help=help, description=description
    )
    if thread:
        parser.add_argument("thread", metavar="THREAD")
    parser.set_defaults(func=run)
    return parser


def table_options(tables: P) -> P:
    """``tables`` (a parent parser) with the options of commands that print
    tables: ``--wide``."""
    tables.add_argument(
        "--wide",
        action="store_true",
        help="show whole values (a table on a terminal is cut to fit its width)",
    )
    return tables


def add_filters(
    parser: argparse.ArgumentParser, noun: str, statuses: Sequence[str], limit: int | None
) -> None:
    """``--status`` (one of ``statuses``) and ``--limit N`` (default ``limit``, ``None``: all)."""
    parser.add_argument(
        "--status",
        choices=statuses,
        metavar="STATUS",
        help=f"only {noun} in this status: {', '.join(statuses)}",
    )
    default = "all" if limit is None else str(limit)
    parser.add_argument(
        "--limit",
        type=int,
        default=limit,
        metavar="N",
        help=f"at most N {noun}, the most recent first (default: {default})",
    )
