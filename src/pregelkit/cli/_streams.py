"""Where a command's output goes: its own lines to stdout, everything else
(the workflow's prints under ``--json``, messages, tracebacks) to stderr, all
of it with passwords masked; and a quiet exit when the reader of stdout goes
away (``pregelkit show T | head -1``)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from pregelkit.cli._secrets import Redactor

BROKEN_PIPE_STATUS = 141
"""128 + SIGPIPE: what a shell reports for a command whose reader went away
(``yes | head -1``), so ``set -o pipefail`` scripts see the usual status."""


class StandIn(io.TextIOBase):
    """A text stream put in the place of another (``sys.stdout``, say): it
    answers for that one's encoding and terminal, so what writes to it
    behaves as it would there, and changes only what ``write`` does."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._inner.isatty()


class Masked(StandIn):
    """A text stream that masks passwords in everything written through it."""

    def __init__(self, inner: TextIO, redactor: Redactor) -> None:
        super().__init__(inner)
        self._redactor = redactor

    def fileno(self) -> int:
        return self._inner.fileno()

    def write(self, text: str) -> int:
        self._inner.write(self._redactor.mask(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()


@contextlib.contextmanager
def command_streams(as_json: bool, redactor: Redactor) -> Iterator[TextIO]:
    """The stream for the command's own output; stderr masked meanwhile."""
    saved = sys.stderr
    sys.stderr = Masked(saved, redactor)
    try:
        if as_json:
            with _json_stdout() as out:
                yield Masked(out, redactor)  # type: ignore[misc]
        else:
            yield Masked(sys.stdout, redactor)  # type: ignore[misc]
    finally:
        sys.stderr = saved


@contextlib.contextmanager
def _json_stdout() -> Iterator[TextIO]:
    """The real stdout, for JSON lines only, while file descriptor 1 points at
    stderr: whatever else writes to stdout (``print`` in a task, a child
    process, a C extension) ends up on stderr."""
    sys.stdout.flush()
    try:
        real = os.dup(1)
    except OSError:  # no stdout at all: nothing to keep apart
        yield sys.stdout
        return
    os.dup2(2, 1)
    out = open(os.dup(real), "w", encoding="utf-8", closefd=True)  # noqa: SIM115
    try:
        yield out
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(real, 1)
        os.close(real)
        out.close()  # may raise BrokenPipeError: the caller exits quietly


def broken_pipe() -> int:
    """Exit quietly after stdout's reader went away: point stdout at
    /dev/null so the interpreter's last flush cannot fail again (the recipe of
    Python's ``signal`` documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return BROKEN_PIPE_STATUS
