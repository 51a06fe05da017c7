"""Tools for testing durable workflows before they ship.

- ``check_crash_safety`` and ``effect``: kill a workflow at every save
  point, resume it, and check the resume (``_crash``); the pytest fixture
  ``crash_safety`` (``pytest_plugin``) does the same in a test.
- ``FakeClock``: a clock you control, for durable timers, schedules, rate
  limits and retry backoff, here and in the workers a test starts
  (``_clock``); the pytest fixture ``fake_clock`` is one in use.
- ``replay_check``: would this code resume the threads in flight? A deploy
  gate (``_replay``; ``pregelkit replay-check`` on the command line). It
  loads the engine, as the crash checker does: both are imported on first
  use, so importing ``FakeClock`` or ``effect`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pregelkit.testing._clock import FakeClock
from pregelkit.testing._crashlog import effect

if TYPE_CHECKING:
    from pregelkit.testing._crash import CrashReport, CrashSafetyError, check_crash_safety
    from pregelkit.testing._replay import ReplayReport, ThreadCheck, replay_check

__all__ = [
    "CrashReport",
    "CrashSafetyError",
    "FakeClock",
    "ReplayReport",
    "ThreadCheck",
    "check_crash_safety",
    "effect",
    "replay_check",
]

_LAZY = {
    "CrashReport": "_crash",
    "CrashSafetyError": "_crash",
    "check_crash_safety": "_crash",
    "ReplayReport": "_replay",
    "ThreadCheck": "_replay",
    "replay_check": "_replay",
}
"""Loaded on first use: they load the engine, FakeClock and effect do not."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
