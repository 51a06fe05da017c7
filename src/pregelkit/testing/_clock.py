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

Workers in other processes follow it too: while it is in use the clock
writes its time to a file named by ``PREGELKIT_FAKE_CLOCK`` in this
process's environment, which a subprocess the test starts inherits (or
pass ``clock.env`` to one started with an environment of its own); each
``advance()`` rewrites the file. A retry's backoff is not waited for under
it (a clock that skips sleeps moves past it). Timeouts and leases stay on
real time: they bound real hangs and real deaths.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from datetime import datetime, timedelta
from types import TracebackType

from pregelkit._internal._clock import ENV, Clock, FileClock, clock, set_clock

__all__ = ["FakeClock"]


class FakeClock:
    """A clock a test moves with ``advance()``: durable timers, schedules,
    rate limits and debounce go by it, in this process and in processes
    started while it is in use; retry backoff is not waited for; timeouts
    and leases stay on real time (``docs/guides/testing.md``)."""

    slice = 0.002
    """Waiters look at a fake clock often: it moves when a test says so."""
    poll = 0.05
    """An idle worker under a fake clock looks at its queue this often (real
    seconds), so a run an ``advance()`` made due starts at once."""

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
        self._file: str | None = None
        self._env_before: str | None = None
        self._pid = os.getpid()

    @property
    def env(self) -> dict[str, str]:
        """The environment entry that makes a process follow this clock (it is
        in ``os.environ`` while the clock is in use, so subprocesses inherit it)."""
        if self._file is None:
            raise RuntimeError("FakeClock.env: enter the clock first (with FakeClock() as clock)")
        return {ENV: self._file}

    def now(self) -> float:
        if self._pid != os.getpid() and self._file is not None:
            return FileClock(self._file).now()  # a forked child: the test's time is the file's
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now()

    def sleeping(self, due: float) -> None:
        if self.skip_sleeps:
            with self._lock:
                self._now = max(self._now, due)
                self._publish()

    def backoff(self, seconds: float) -> float:
        self.sleeping(self.now() + seconds)
        return 0.0

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
            self._publish()

    def _publish(self) -> None:
        """Write the time for the processes that follow this clock (under the
        lock: writes land in order); a reader sees the old file or the new."""
        if self._file is None or self._pid != os.getpid():
            return
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self._file), prefix=".fakeclock-")
        with os.fdopen(fd, "w") as f:
            f.write(repr(self._now))
        os.replace(tmp, self._file)

    def __enter__(self) -> FakeClock:
        if self._before is not None:
            raise RuntimeError("this FakeClock is already in use")
        fd, self._file = tempfile.mkstemp(prefix="pregelkit-fakeclock-")
        os.close(fd)
        with self._lock:
            self._publish()
        self._env_before = os.environ.get(ENV)
        os.environ[ENV] = self._file
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
        if self._env_before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._env_before
        path, self._file = self._file, None
        if path is not None:
            os.unlink(path)
