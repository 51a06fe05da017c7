"""``pregelkit send THREAD JSON [--topic T]``: a message to a workflow that
waits for one (``pregelkit.durable.recv``), from a shell.

The message is stored in the database; the thread's run, if it waits on
that topic, is due at once (a worker resumes it, or the process it waits in
takes it). A thread that does not exist yet finds its messages when it does.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from pregelkit.cli._commands import _parse_json
from pregelkit.cli._db import open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command
from pregelkit.cli._render import _print_json, clean

__all__ = ["cmd_send", "register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``send`` to the ``pregelkit`` subcommands."""
    p = add_command(
        sub,
        "send",
        cmd_send,
        [common],
        help="send a message to a thread (for its recv())",
        description="Send JSON to THREAD on --topic (default: the default topic, what "
        "recv() without a topic takes). Each message is taken by exactly one recv(); "
        "a thread that does not exist yet finds it when it does.",
        thread=True,
    )
    p.add_argument("value", metavar="JSON", help="the message, as JSON")
    p.add_argument("--topic", help="the topic recv(topic=...) waits on (default: none)")


def cmd_send(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint.waits import post_message
    from pregelkit.errors import MessageTooLargeError

    value = _parse_json(args.value, "JSON")  # a typo is the first thing said
    with open_database(args.db, create=False) as db:
        try:
            post_message(db.saver, args.thread, value, args.topic)
        except MessageTooLargeError as exc:
            raise CliError(str(exc), kind="too_large", thread_id=args.thread) from None
    topic = "the default topic" if args.topic is None else f"topic {args.topic!r}"
    if args.json:
        _print_json(
            {"event": "sent", "thread_id": args.thread, "topic": args.topic},
            out,
        )
    else:
        out.write(f"sent to thread {clean(args.thread)} on {clean(topic)}\n")
    return 0
