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


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """An argparse ``type``: a duration such as ``30s``, ``5m``, ``1.5h`` or
    ``30d``, in seconds (the one spelling of durations on the command line)."""
    value, unit = text.strip()[:-1], text.strip()[-1:]
    if unit == "M":
        raise argparse.ArgumentTypeError(
            f"{text!r}: m is minutes, and months are no unit (they would read as minutes, and "
            "a prune would keep almost nothing): say 30d for 30 days, 5m for 5 minutes"
        )
    unit = unit.lower()
    try:
        seconds = float(value) * _UNITS[unit]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: a number and a unit, s, m, h or d (30s, 5m, 2h, 30d)"
        ) from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is more than zero")
    return seconds
