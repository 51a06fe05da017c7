"""The clock durable waits are judged by, one for the whole process.

A wake time is wall-clock time (seconds since the epoch), written once when
a wait starts and read by whichever process resumes the run; an in-process
wait counts the time left on the monotonic clock, so a wall clock that
jumps neither cuts it short nor stretches it. ``pregelkit.testing`` swaps
the clock for one a test moves forward by hand.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "clock", "set_clock"]


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock time, seconds since the epoch."""
        ...

    def wait(self, seconds: float, cancelled: threading.Event | None = None) -> bool:
        """Block for up to ``seconds`` of this clock's time; True if
        ``cancelled`` was set meanwhile."""
        ...

    def notify(self) -> None:
        """Something a waiter may be waiting for happened (a fake clock's
        waiters look again; the system clock's have their own events)."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def wait(self, seconds: float, cancelled: threading.Event | None = None) -> bool:
        if cancelled is None:
            time.sleep(max(0.0, seconds))
            return False
        return cancelled.wait(max(0.0, seconds))

    def notify(self) -> None:
        return None


_current: list[Clock] = [SystemClock()]


def clock() -> Clock:
    return _current[0]


def set_clock(new: Clock) -> Clock:
    """Use ``new`` from now on; returns the clock it replaces."""
    old, _current[0] = _current[0], new
    return old
