"""Tools for testing durable workflows before they ship.

- ``FakeClock``: a clock you control, for durable timers, schedules and
  workers (``_clock``).
"""

from __future__ import annotations

from pregelkit.testing._clock import FakeClock

__all__ = ["FakeClock"]
