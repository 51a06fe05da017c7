"""The clock durable waits are judged by, one for the whole process.

A wake time is wall-clock time (seconds since the epoch), written once when
a wait starts and read by whichever process resumes the run; an in-process
wait counts the time left on the monotonic clock, so a wall clock that
jumps neither cuts it short nor stretches it. ``pregelkit.testing`` swaps
in a clock a test moves forward by hand.

A process started with ``PREGELKIT_FAKE_CLOCK=PATH`` in its environment
(a worker a test starts while a ``FakeClock`` is in use) goes by the time
written in that file: the test's ``advance()`` rewrites it, so the
worker's due checks, schedules and rate limits move with the test.

Timeouts and leases never go by this clock: they bound real hangs and real
deaths (``docs/guides/testing.md``, "A clock you control").
"""

from __future__ import annotations

import math
import os
import time
from typing import Protocol

__all__ = ["ENV", "Clock", "FileClock", "SystemClock", "clock", "set_clock"]

ENV = "PREGELKIT_FAKE_CLOCK"
"""The environment variable naming the file a worker process reads its
time from (written by ``pregelkit.testing.FakeClock``)."""


class Clock(Protocol):
    slice: float
    """The longest real-time pause of a waiter between two looks at the clock."""

    poll: float
    """The longest real-time pause of an idle worker between two looks at
    its queue and schedules: short under a test's clock, so that a run an
    ``advance()`` made due starts at once."""

    def now(self) -> float:
        """Wall-clock time, seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (in-process waits count on it)."""
        ...

    def sleeping(self, due: float) -> None:
        """An in-process sleep starts that ends at ``due`` (a test clock may
        jump there at once)."""
        ...

    def backoff(self, seconds: float) -> float:
        """A retry waits ``seconds`` before its next attempt: the real
        seconds to pause (a test clock pauses none)."""
        ...


class SystemClock:
    slice = 0.2
    poll = math.inf

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleeping(self, due: float) -> None:
        return None

    def backoff(self, seconds: float) -> float:
        return seconds


class FileClock:
    """The time a test wrote to ``path``, read at every look: the clock of
    a process a test started under its ``FakeClock``. It never moves the
    time itself (the test owns it): sleeps wait for the test's advance,
    retries do not wait."""

    slice = 0.01
    poll = 0.05

    def __init__(self, path: str) -> None:
        self.path = path
        self.now()  # a missing or unreadable file is said at start, not at the first wait

    def now(self) -> float:
        try:
            with open(self.path, "rb") as f:
                return float(f.read())
        except (OSError, ValueError) as exc:
            raise RuntimeError(
                f"{ENV}={self.path!r}: cannot read the fake time from it ({exc}); this "
                "process was started under a FakeClock that has ended, or the variable "
                f"is left over: unset {ENV} outside tests"
            ) from exc

    def monotonic(self) -> float:
        return self.now()

    def sleeping(self, due: float) -> None:
        return None

    def backoff(self, seconds: float) -> float:
        return 0.0


def _from_env() -> Clock:
    path = os.environ.get(ENV)
    return SystemClock() if not path else FileClock(path)


_current: list[Clock] = [_from_env()]


def clock() -> Clock:
    return _current[0]


def set_clock(new: Clock) -> Clock:
    """Use ``new`` from now on; returns the clock it replaces."""
    old, _current[0] = _current[0], new
    return old
