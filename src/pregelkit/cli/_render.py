"""What the command line prints: tables, JSON and single cells."""

from __future__ import annotations

import contextlib
import json
import os
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


def _short(value: Any, width: int = _CELL_WIDTH) -> str:
    """One line of at most ``width`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(ts: str | None) -> str:
    if not ts:
        return "-"
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ts


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, indent: str = ""
) -> None:
    cells = [[_short(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines: list[Sequence[str]] = [headers, *cells]
    for i, line in enumerate(lines):
        text = "  ".join(cell.ljust(widths[j]) for j, cell in enumerate(line)).rstrip()
        out.write(indent + text + "\n")
        if i == 0:
            out.write(indent + "  ".join("-" * w for w in widths) + "\n")


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
    sys.stderr.write(f"pregelkit: {text}\n")


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _entry_cell(spec: str | None) -> str:
    if not spec:
        return "-"
    module, _, name = spec.rpartition(":")
    if os.path.isabs(module):
        with contextlib.suppress(ValueError):
            relative = os.path.relpath(module)
            if not relative.startswith(".."):
                module = relative
    return f"{module}:{name}"


def _interrupt_cell(values: list[Any]) -> str:
    """The interrupts' values: the first one, and how many more."""
    if not values:
        return "-"
    first = _short(values[0], 30)
    return first if len(values) == 1 else f"{first} (+{len(values) - 1})"
