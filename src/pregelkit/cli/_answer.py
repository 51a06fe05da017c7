"""Which interrupt ``pregelkit resume THREAD VALUE_JSON [--to ID]`` answers.

VALUE_JSON is always the answer itself, never a map of interrupt ids to
answers. The Python API tells the two apart by the shape of a dict's keys,
so on a command line an answer and a map would be one typo apart; here the
answer goes to the interrupt ``--to`` names, or without it to the only one
pending, and is always sent as ``{id: answer}`` so that no answer is ever
read as a map. When several are pending, or an answer without ``--to``
looks like a map of interrupt ids (the form a stale client re-sends), the
command refuses rather than picks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit.cli._commands import _load_tuples
from pregelkit.cli._errors import CliError
from pregelkit.cli._render import _short, clean
from pregelkit.cli._status import interrupts_of

if TYPE_CHECKING:
    from pregelkit.cli._db import Database
    from pregelkit.types import Interrupt

__all__ = ["pending_interrupts", "resume_map"]


def pending_interrupts(db: Database, thread_id: str) -> list[Interrupt]:
    """The interrupts the thread's latest checkpoint waits at."""
    found = _load_tuples(db, thread_id, latest=True)
    return [i for _, i in interrupts_of(found[0])] if found else []


def resume_map(
    thread_id: str,
    value: Any,
    to: str | None,
    pending: Sequence[Interrupt],
    hint: Callable[[str], str],
) -> dict[str, Any]:
    """The ``Command(resume=...)`` map that gives ``value`` to one pending
    interrupt; a ``CliError`` (exit 2) when which one is not certain.
    ``hint(id)`` is the command that answers interrupt ``id``."""
    ids = [i.id for i in pending]
    if to is not None:
        if to not in ids:
            raise CliError(
                f"thread {thread_id!r} has no pending interrupt {to!r} (answered already, or "
                f"of another thread); pending: {_listing(pending)}",
                kind="not_pending",
                thread_id=thread_id,
            )
        return {to: value}
    if len(ids) > 1:
        raise CliError(
            f"thread {thread_id!r} waits at {len(ids)} interrupts ({_listing(pending)}): "
            f"say which one VALUE_JSON answers with --to ID, e.g. {hint(ids[0])}",
            kind="ambiguous",
            thread_id=thread_id,
        )
    (only,) = ids
    if isinstance(value, dict) and value and all(_looks_like_id(k) for k in value):
        # the old form (an id map), or a map re-sent after its interrupt was
        # answered: taking it as the answer to the next question is the trap
        raise CliError(
            f"VALUE_JSON is the answer itself, and this one looks like a map of interrupt "
            f"ids: give the answer alone, e.g. {hint(only)}, or add --to {only} to send "
            f"this object as the answer (pending: {_listing(pending)})",
            thread_id=thread_id,
        )
    return {only: value}


def _looks_like_id(key: str) -> bool:
    return len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def _listing(pending: Sequence[Interrupt]) -> str:
    """Each pending interrupt's id and the start of its question, on one line."""
    if not pending:
        return "none"
    # a question is the workflow's text: its control characters are shown escaped
    return "; ".join(f"{clean(i.id)}: {clean(_short(i.value, 40))}" for i in pending)
