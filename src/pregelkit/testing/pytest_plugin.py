"""pregelkit's pytest plugin, registered through the ``pytest11`` entry
point: installing pregelkit gives every test the ``crash_safety`` and
``fake_clock`` fixtures.

It imports nothing of the checker until a test asks for the fixture, so a
test session that does not use it pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pregelkit.testing import CrashReport, FakeClock


@pytest.fixture
def crash_safety() -> Callable[..., CrashReport]:
    """``check_crash_safety``: ``crash_safety(wf, input, config=..., saver=...,
    durability=...)`` kills ``wf`` at every save point and resumes it; a
    failure is an ``AssertionError`` naming the save point and what differed."""
    from pregelkit.testing import check_crash_safety

    return check_crash_safety


@pytest.fixture
def fake_clock() -> Iterator[FakeClock]:
    """A ``FakeClock`` in use for the test (sleeps skipped): ``fake_clock.advance(
    timedelta(days=30))`` moves durable timers, schedules, rate limits and the
    workers the test starts in subprocesses; retry backoff is not waited for."""
    from pregelkit.testing import FakeClock

    with FakeClock() as clock:
        yield clock
