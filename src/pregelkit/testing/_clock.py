"""``FakeClock``: a clock for testing workflows that wait (``pregelkit.durable``).

It replaces the clock durable timers are judged by, in this
process, for as long as it is entered::

    with FakeClock() as clock:
        reminder.invoke(order, config)   # its sleep(3 days) returns at once
        assert clock.now() >= start + 3 * 86400

By default a ``sleep`` moves the fake clock to its wake time at once (as
Temporal's test server skips time). ``FakeClock(skip_sleeps=False)`` keeps
time still until ``advance()``: a run waiting in place goes on when the
clock passes its wake time, and a worker resumes a suspended run that the
advanced clock made due (workers judge due times by this clock too).
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timedelta
from types import TracebackType

from pregelkit._internal._clock import Clock, clock, set_clock

__all__ = ["FakeClock"]


class FakeClock:
    slice = 0.002
    """Waiters look at a fake clock often: it moves when a test says so."""

    def __init__(self, start: datetime | float | None = None, *, skip_sleeps: bool = True) -> None:
        if isinstance(start, datetime):
            if start.tzinfo is None:
                raise ValueError("FakeClock(start=...) takes an aware datetime")
            start = start.timestamp()
        elif start is not None and (isinstance(start, bool) or not isinstance(start, int | float)):
            raise TypeError(
                f"FakeClock(start=...) takes a datetime or seconds, got {type(start).__name__}"
            )
        elif start is not None and not math.isfinite(start):
            raise ValueError(f"FakeClock(start=...) takes a finite time, got {start!r}")
        self._now = time.time() if start is None else float(start)
        self._lock = threading.Lock()
        self.skip_sleeps = skip_sleeps
        self._before: Clock | None = None

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now()

    def sleeping(self, due: float) -> None:
        if self.skip_sleeps:
            with self._lock:
                self._now = max(self._now, due)

    def advance(self, by: float | timedelta) -> None:
        """Move the clock forward by ``by`` (seconds or a timedelta)."""
        seconds = by.total_seconds() if isinstance(by, timedelta) else by
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds < math.inf
        ):
            raise ValueError(f"advance() takes finite seconds >= 0 or a timedelta, got {by!r}")
        with self._lock:
            self._now += float(seconds)

    def __enter__(self) -> FakeClock:
        if self._before is not None:
            raise RuntimeError("this FakeClock is already in use")
        self._before = set_clock(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._before is None:
            raise RuntimeError("this FakeClock is not in use: it was exited already")
        if clock() is not self:
            raise RuntimeError(
                "FakeClocks are exited in the reverse order they were entered: another "
                "one entered after this one is still in use"
            )
        set_clock(self._before)
        self._before = None
