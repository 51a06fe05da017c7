"""pregelkit's pytest plugin, registered through the ``pytest11`` entry
point: installing pregelkit gives every test the ``crash_safety`` fixture.

It imports nothing of the checker until a test asks for the fixture, so a
test session that does not use it pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pregelkit.testing import CrashReport


@pytest.fixture
def crash_safety() -> Callable[..., CrashReport]:
    """``check_crash_safety``: ``crash_safety(wf, input, config=..., saver=...,
    durability=...)`` kills ``wf`` at every save point and resumes it; a
    failure is an ``AssertionError`` naming the save point and what differed."""
    from pregelkit.testing import check_crash_safety

    return check_crash_safety
