"""Blocking waits of the main thread, made in slices so that Ctrl-C is seen.

A SIGINT sent to the process (``kill``, a terminal's Ctrl-C while other
threads run) may be taken by any thread. Python's handler there only flags
it for the main thread, which runs the Python-level handler (raising
``KeyboardInterrupt``) at its next bytecode: a main thread blocked in a lock
or event wait with no timeout never gets there, and a run stopping on a
first Ctrl-C would never see the second one that walks away from its tasks.
Waking every ``SLICE`` seconds lets it check; other threads wait whole.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable

__all__ = ["on_main_thread", "wait_sliced"]

MAIN = threading.main_thread().ident
SLICE = 0.2
"""Seconds the main thread blocks at most before it looks for a signal."""


def on_main_thread() -> bool:
    return _thread.get_ident() == MAIN


def wait_sliced(wait: Callable[[float], bool], timeout: float | None) -> bool:
    """``wait(seconds)`` (a lock's acquire, an event's wait) again and again
    until it returns True or ``timeout`` passes (None: no limit); for the
    main thread (other threads wait whole)."""
    deadline = None if timeout is None else time.monotonic() + max(timeout, 0)
    while True:
        left = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
        if wait(max(left, 0)):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
