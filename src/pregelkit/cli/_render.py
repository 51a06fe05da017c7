"""What the command line prints: tables, JSON and single cells."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from pregelkit.cli._view import StoredObject, Unloaded

_CELL_WIDTH = 48


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: containers recursively, anything else by repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if type(value).__name__ == "Interrupt" and hasattr(value, "id"):
        return {"id": value.id, "value": _jsonable(value.value)}
    if isinstance(value, (StoredObject, Unloaded)):
        return _jsonable(value.as_data())
    return repr(value)


def clean(text: str) -> str:
    """``text`` safe to print: control characters (a task named with an
    escape sequence, an error message with newlines) shown escaped, never
    sent to the terminal as they are."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shell_word(word: str) -> str:
    """``word`` quoted for a POSIX shell, safe to print: a word with control
    characters is written ``$'...'`` with them escaped (bash and zsh read
    that back as the same word), never sent to the terminal as they are."""
    if clean(word) == word:
        return shlex.quote(word)
    escaped = "".join(
        c if c.isprintable() and c not in "\\'" else ("\\" + c if c in "\\'" else _escape(c))
        for c in word
    )
    return f"$'{escaped}'"


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x80:  # bash reads a higher \\xHH as a byte, not as the character
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shell_join(words: Sequence[str]) -> str:
    """A printable command line of ``words`` (see ``shell_word``)."""
    return " ".join(shell_word(w) for w in words)


def one_line(value: Any) -> str:
    """``value`` as one line to print: a string as it is, anything else by
    ``repr``; runs of whitespace become one space, control characters are
    escaped (``clean``)."""
    text = value if isinstance(value, str) else repr(value)
    return clean(" ".join(text.split()))


def _short(value: Any, width: int | None = _CELL_WIDTH) -> str:
    """``one_line(value)``, cut to at most ``width`` characters (``None``: whole)."""
    text = one_line(value)
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _when(ts: str | None) -> str:
    if not ts:
        return "-"
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:  # not a time: shown as stored, escaped
        return clean(ts)


def _print_json(data: Any, out: TextIO) -> None:
    out.write(json.dumps(_jsonable(data), ensure_ascii=False) + "\n")
    out.flush()


def _print_error(out: TextIO, kind: str, message: str, thread_id: str | None, **extra: Any) -> None:
    """An error under ``--json``: ``{"error": {"type", "message", "thread_id"?, ...}}``."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if thread_id is not None:
        error["thread_id"] = thread_id
    _print_json({"error": {**error, **extra}}, out)


def _fail_line(text: str) -> None:
    """A message on stderr, its lines escaped (it may quote a thread id or an
    exception's text)."""
    lines = "\n".join(clean(line) for line in text.split("\n"))
    sys.stderr.write(f"pregelkit: {lines}\n")


def _cell(value: Any) -> str:
    return "-" if value is None else clean(str(value))


def _entry_cell(spec: str | None) -> str:
    if not spec:
        return "-"
    module, _, name = spec.rpartition(":")
    if os.path.isabs(module):
        with contextlib.suppress(ValueError):
            relative = os.path.relpath(module)
            if not relative.startswith(".."):
                module = relative
    return clean(f"{module}:{name}")


def _interrupt_cell(values: list[Any], width: int | None = 30) -> str:
    """The interrupts' values: the first one (cut to ``width``), and how many more."""
    if not values:
        return "-"
    first = _short(values[0], width)
    return first if len(values) == 1 else f"{first} (+{len(values) - 1})"
