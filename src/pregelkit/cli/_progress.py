"""The live progress line of ``pregelkit run`` and ``resume``: the step, the
tasks running and finished, the retries so far and the time elapsed,
redrawn in place on stderr while the run goes on.

Only when stderr is a terminal and the output is not ``--json``: a log file
or a pipe gets nothing extra. It lives on stderr so ``pregelkit run ... >
out.txt`` keeps the progress on screen and the file clean.

It reads what the run already streams (the ``debug`` stream mode: each
task's start and result, and each checkpoint, with its step) and counts
retries from the INFO record the retry loop logs before each new attempt
(``pregelkit.pregel._retry``, as LangGraph's does), so nothing in the run
itself changes for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from pregelkit.cli._render import _short, clean
from pregelkit.cli._streams import StandIn

RETRY_LOGGER = "pregelkit.pregel._retry"


class Progress:
    """A one-line status redrawn in place while a run goes on. Lines printed
    through ``line`` clear it first, so it always stays the last line."""

    DELAY = 0.3
    """Seconds before the status first shows: a quick run shows none."""

    def __init__(self, out: TextIO, status: TextIO, enabled: bool) -> None:
        self.out = out
        self.status = status
        self.enabled = enabled
        self.running: dict[str, str] = {}
        self.finished = 0
        self.retries = 0
        self.step: int | None = None
        self.started = time.monotonic()
        self._lock = threading.RLock()  # a Ctrl-C handler may print while it is held
        self.waiting: list[str] | None = None
        """Set by the first Ctrl-C: the running tasks the stop waits for."""
        self._stop = threading.Event()
        self._shown = False
        self._thread: threading.Thread | None = None
        self._width = 100
        self._counter = _RetryCounter(self)
        self._saved_level: int | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            with contextlib.suppress(OSError, ValueError):
                # a terminal that does not say its size reports 0 columns
                self._width = os.get_terminal_size(self.status.fileno()).columns or self._width
            logger = logging.getLogger(RETRY_LOGGER)
            if not logger.isEnabledFor(logging.INFO):
                self._saved_level = logger.level
                logger.setLevel(logging.INFO)
            logger.addHandler(self._counter)
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            logger = logging.getLogger(RETRY_LOGGER)
            logger.removeHandler(self._counter)
            if self._saved_level is not None:
                logger.setLevel(self._saved_level)
        with self._lock:
            self._clear()

    def debug_event(self, event: dict[str, Any]) -> None:
        """Take in one event of the run's ``debug`` stream."""
        kind, payload = event.get("type"), event.get("payload")
        with self._lock:
            if isinstance(event.get("step"), int):
                self.step = event["step"]
            if isinstance(payload, dict) and kind in ("task", "task_result"):
                self._task(payload, started=kind == "task")

    def task_event(self, payload: dict[str, Any]) -> None:
        """Take in one event of the run's ``tasks`` stream (no progress line)."""
        with self._lock:
            self._task(payload, started="result" not in payload)

    def _task(self, payload: dict[str, Any], *, started: bool) -> None:
        if started:
            self.running[payload["id"]] = payload["name"]
        elif self.running.pop(payload["id"], None) is not None:
            self.finished += 1

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def line(self, text: str) -> None:
        """Print one line of output (on ``out``) above the status."""
        self._write(self.out, text)

    def error_line(self, text: str) -> None:
        """Print one line the workflow wrote to stderr above the status."""
        self._write(self.status, text)

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            self._clear()
            stream.write(text + "\n")
            stream.flush()

    def stopping(self, waiting: list[str]) -> None:
        """Ctrl-C: from now on the status says the run is stopping."""
        with self._lock:
            self.waiting = list(waiting)

    def text(self) -> str:
        """The status as shown now."""
        if self.waiting is not None:
            waited = ", ".join(sorted({clean(name) for name in self.waiting}))
            what = f"waiting for {waited}" if waited else "saving what finished"
            return (
                f"… stopping · {what} · Ctrl-C again to stop now · "
                f"{time.monotonic() - self.started:.1f}s"
            )
        names = Counter(clean(name) for name in self.running.values())
        running = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in sorted(names.items()))
        parts = [] if self.step is None else [f"step {self.step}"]
        parts.append(f"running {running}" if running else "working")
        parts.append(f"{self.finished} task{'' if self.finished == 1 else 's'} done")
        if self.retries:
            parts.append(f"{self.retries} retr{'y' if self.retries == 1 else 'ies'}")
        parts.append(f"{time.monotonic() - self.started:.1f}s")
        return "… " + " · ".join(parts)

    def _clear(self) -> None:
        if self._shown:
            self.status.write("\r\033[K")
            self.status.flush()
            self._shown = False

    def _tick(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                if time.monotonic() - self.started < self.DELAY:
                    continue
                self.status.write("\r\033[K" + _short(self.text(), max(20, self._width - 1)))
                self.status.flush()
                self._shown = True


class _RetryCounter(logging.Handler):
    """Counts the retry loop's "retrying" records for the progress line."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self._progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.retried()


class _Lines(StandIn):
    """Stands in for ``sys.stdout`` while a workflow runs: what the workflow
    prints reaches the terminal a whole line at a time, through ``line``, so it
    never splits one of the CLI's own lines (tasks print from many threads)."""

    def __init__(self, line: Callable[[str], None], real: TextIO) -> None:
        super().__init__(real)
        self._line = line
        self._partial: dict[int, str] = {}
        self._guard = threading.Lock()

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
    """While the workflow runs, what it prints reaches the terminal a whole
    line at a time, above the status line: its stdout always, its stderr
    when the status line is shown there."""
    saved_out, saved_err = sys.stdout, sys.stderr
    lines = _Lines(progress.line, real)
    errors = _Lines(progress.error_line, saved_err)
    sys.stdout = lines
    if progress.enabled:
        sys.stderr = errors
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved_out, saved_err
        lines.drain()
        errors.drain()
