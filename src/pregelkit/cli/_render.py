"""What the command line prints: tables, JSON, single cells, the progress line
shown while a run goes on, and the wrapper that keeps a workflow's own prints
whole lines."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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


class Progress:
    """A one-line status (running tasks, elapsed time) redrawn in place while a
    run goes on; only on a terminal. Lines printed through ``line`` clear it
    first, so the status always stays the last line."""

    DELAY = 0.3
    """Seconds before the status first shows."""

    def __init__(self, out: TextIO, enabled: bool) -> None:
        self.out = out
        self.enabled = enabled
        self.running: dict[str, str] = {}
        self.finished = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._shown = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()

    def task_event(self, event: dict[str, Any]) -> None:
        with self._lock:
            if "input" in event:
                self.running[event["id"]] = event["name"]
            elif self.running.pop(event["id"], None) is not None:
                self.finished += 1

    def line(self, text: str) -> None:
        with self._lock:
            self._clear()
            self.out.write(text + "\n")
            self.out.flush()

    def _clear(self) -> None:
        if self._shown:
            self.out.write("\r\033[K")
            self._shown = False

    def _tick(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                names = sorted(set(self.running.values()))
                elapsed = time.monotonic() - self.started
                if elapsed < self.DELAY:
                    continue  # a quick run shows no status at all
                status = f"running {', '.join(names)}" if names else "working"
                done = f"{self.finished} task{'' if self.finished == 1 else 's'} done"
                text = f"… {status} ({done}, {elapsed:.1f}s)"
                self.out.write("\r\033[K" + _short(text, 100))
                self.out.flush()
                self._shown = True


class _Lines(io.TextIOBase):
    """Stands in for ``sys.stdout`` while a workflow runs: what the workflow
    prints reaches the terminal a whole line at a time, through ``line``, so it
    never splits one of the CLI's own lines (tasks print from many threads)."""

    def __init__(self, line: Callable[[str], None], real: TextIO) -> None:
        self._line = line
        self._real = real
        self._partial: dict[int, str] = {}
        self._guard = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._real, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._real.isatty()

    def write(self, text: str) -> int:
        ident = threading.get_ident()
        with self._guard:
            *lines, rest = (self._partial.pop(ident, "") + text).split("\n")
            if rest:
                self._partial[ident] = rest
        for line in lines:
            self._line(line)
        return len(text)

    def drain(self) -> None:
        """Write out what was printed without a final newline."""
        with self._guard:
            rest = list(self._partial.values())
            self._partial.clear()
        for line in rest:
            self._line(line)


@contextlib.contextmanager
def _whole_lines(progress: Progress, real: TextIO) -> Iterator[None]:
    saved = sys.stdout
    lines = _Lines(progress.line, real)
    sys.stdout = lines
    try:
        yield
    finally:
        sys.stdout = saved
        lines.drain()


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
