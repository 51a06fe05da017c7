"""The clock durable waits are judged by, one for the whole process.

A wake time is wall-clock time (seconds since the epoch), written once when
a wait starts and read by whichever process resumes the run; an in-process
wait counts the time left on the monotonic clock, so a wall clock that
jumps neither cuts it short nor stretches it. ``pregelkit.testing`` swaps
in a clock a test moves forward by hand.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "clock", "set_clock"]


class Clock(Protocol):
    slice: float
    """The longest real-time pause of a waiter between two looks at the clock."""

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


class SystemClock:
    slice = 0.2

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleeping(self, due: float) -> None:
        return None


_current: list[Clock] = [SystemClock()]


def clock() -> Clock:
    return _current[0]


def set_clock(new: Clock) -> Clock:
    """Use ``new`` from now on; returns the clock it replaces."""
    old, _current[0] = _current[0], new
    return old
