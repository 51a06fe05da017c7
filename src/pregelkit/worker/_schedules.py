"""A worker fires the schedules of the workflows it serves (no leader).

On its serving loop, at most once per ``every`` seconds (its longest idle
pause), a worker asks whether a schedule of its workflows has a slot due:
one indexed read, no transaction (``_schedules.due``). Only when one is
does it fire (``_schedules.fire``, one transaction), which queues the slots'
runs for any worker to claim. Two workers firing at once fire different
schedules (PostgreSQL: ``SKIP LOCKED``) or one after the other (SQLite),
and a slot's row is unique: each slot once.

The decisions are here once; ``check`` and ``acheck`` only drive them.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from pregelkit._internal._clock import clock
from pregelkit.checkpoint import _schedules, _slots
from pregelkit.checkpoint._runqueue import due_now

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = ["Firing", "acheck", "check"]

log = logging.getLogger("pregelkit.worker")


class Firing:
    """When a worker last asked, and the plans it asks with."""

    def __init__(self, saver: BaseCheckpointSaver[Any], names: Sequence[str], every: float) -> None:
        self.saver = saver
        self.names = list(names)
        self.every = every
        self.asked_at: float | None = None
        self.reported: set[_schedules.Failed] = set()

    def reset(self) -> None:
        """A new serving loop asks at once (``run_until_idle`` fires what is due)."""
        self.asked_at = None

    def due_plan(self) -> tuple[Any, float] | None:
        """The read to make now, and the time it judges by; ``None`` if asked
        less than ``every`` ago (real seconds: a test's clock that stands
        still must not stop the asking)."""
        mono = time.monotonic()
        if self.asked_at is not None and mono - self.asked_at < min(self.every, clock().poll):
            return None
        self.asked_at = mono
        now = due_now(None)
        return partial(_schedules.due, workflows=self.names, now=now), now

    def fire_plan(self, now: float) -> Any:
        return partial(
            _schedules.fire, workflows=self.names, now=now, dumps=self.saver.serde.dumps_typed
        )

    def fired(self, firings: tuple[list[_schedules.Fired], list[_schedules.Failed]]) -> None:
        """Log the slots fired, and each schedule this worker cannot fire
        (once per reason: it is asked again every look)."""
        fired, failed = firings
        for schedule_id, slot, run_id in fired:
            when = _slots.iso(slot)
            if run_id is None:
                log.info("schedule %s: slot %s skipped (its thread is busy)", schedule_id, when)
            else:
                log.info("schedule %s: slot %s fired (run %s)", schedule_id, when, run_id)
        for reason in failed:
            if reason not in self.reported:
                self.reported.add(reason)
                log.warning("schedule %s: this worker cannot fire it (%s)", *reason)


def check(firing: Firing) -> None:
    """Fire what is due, if it is time to ask (``Worker``'s driver). A
    failure is logged and asked again next time: firing never stops a worker."""
    asked = firing.due_plan()
    if asked is None:
        return
    plan, now = asked
    try:
        if firing.saver.run_queue(plan, "check schedules", single=True):
            firing.fired(firing.saver.run_queue(firing.fire_plan(now), "fire schedules"))
    except Exception as exc:
        log.warning("cannot fire schedules (%s); trying again", exc)


async def acheck(firing: Firing) -> None:
    """The async twin of :func:`check` (``AsyncWorker``'s driver)."""
    asked = firing.due_plan()
    if asked is None:
        return
    plan, now = asked
    try:
        if await firing.saver.arun_queue(plan, "check schedules", single=True):
            fired = await firing.saver.arun_queue(firing.fire_plan(now), "fire schedules")
            firing.fired(fired)
    except Exception as exc:
        log.warning("cannot fire schedules (%s); trying again", exc)
