"""Tools for testing durable workflows before they ship.

- ``check_crash_safety`` and ``effect``: kill a workflow at every save
  point, resume it, and check the resume (``_crash``); the pytest fixture
  ``crash_safety`` (``pytest_plugin``) does the same in a test.
- ``FakeClock``: a clock you control, for durable timers, schedules and
  workers (``_clock``).
"""

from __future__ import annotations

from pregelkit.testing._clock import FakeClock
from pregelkit.testing._crash import CrashReport, CrashSafetyError, check_crash_safety
from pregelkit.testing._crashlog import effect

__all__ = ["CrashReport", "CrashSafetyError", "FakeClock", "check_crash_safety", "effect"]
