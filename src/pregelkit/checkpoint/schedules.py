"""Schedules: ``wf.schedule(...)`` records one in the checkpointer's
database, ``schedules(saver)`` lists them as :class:`Schedule` objects
(pause, resume, delete, trigger), and the workers serving the workflow fire
its slots (``_schedules.fire``), each exactly once, with no leader.

The decisions (which slots, catchup, DST) are in ``_slots``; the SQL in
``_schedules``. See docs/guides/fleet.md, "Schedules".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from pregelkit.checkpoint import _schedules, _slots
from pregelkit.checkpoint._runqueue import due_now
from pregelkit.checkpoint._slots import CATCHUP, Spec
from pregelkit.checkpoint.base import no_run_queue
from pregelkit.checkpoint.runs import RunHandle
from pregelkit.errors import InvalidScheduleError

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = ["Schedule", "adeclare_schedule", "aschedules", "declare_schedule", "schedules"]


MAX_ID = 200
"""The longest schedule id (as queue names): its slots' runs' thread ids
are ``schedule:<id>:<slot>``."""


def _when(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True)
class Schedule:
    """A schedule as the database holds it. Times are aware UTC datetimes:
    ``next_at`` is the next slot to fire (``None``: none left, past
    ``end_at``), ``last_slot_at`` the last slot fired. ``every`` or ``cron``
    says when it fires, ``timezone`` how a cron expression's wall times are
    read. ``input``: what each run is given (``None``: its slot time as an
    ISO 8601 UTC string). ``thread_id``: the one thread its runs go on, one
    at a time (``None``: each slot on a thread of its own). The methods act
    on the database (``a``-prefixed: async twins) and return the schedule as
    it is then."""

    schedule_id: str
    workflow: str
    cron: str | None
    every: timedelta | None
    timezone: str
    catchup: str
    start_at: datetime | None
    end_at: datetime | None
    paused: bool
    next_at: datetime | None
    last_slot_at: datetime | None
    created_at: datetime
    updated_at: datetime
    input: Any = field(default=None, repr=False)
    saver: BaseCheckpointSaver[Any] | None = field(default=None, repr=False, compare=False)
    thread_id: str | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], saver: BaseCheckpointSaver[Any]) -> Schedule:
        (schedule_id, workflow, cron, every, timezone, catchup, start_at, end_at) = row[:8]
        paused, next_at, last_slot_at, created_at, updated_at, itype, ivalue, thread = row[8:16]
        return cls(
            str(schedule_id),
            str(workflow),
            cron,
            None if every is None else timedelta(seconds=float(every)),
            str(timezone),
            str(catchup),
            _when(start_at),
            _when(end_at),
            bool(paused),
            _when(next_at),
            _when(last_slot_at),
            datetime.fromtimestamp(created_at, UTC),
            datetime.fromtimestamp(updated_at, UTC),
            None if itype is None else saver.serde.loads_typed((str(itype), bytes(ivalue))),
            saver,
            None if thread is None else str(thread),
        )

    @property
    def spec(self) -> str:
        """When it fires, in words: the cron expression, or ``every 5m``."""
        if self.cron is not None:
            return self.cron
        assert self.every is not None
        return f"every {_duration(self.every.total_seconds())}"

    def next_fire_times(self, count: int = 3) -> list[datetime]:
        """The next ``count`` slots it fires (none while paused)."""
        if self.paused or self.next_at is None or count <= 0:
            return []
        spec = self._spec()
        first = self.next_at.timestamp()
        return [_when_utc(first), *map(_when_utc, spec.after(first, count - 1))]

    def _spec(self) -> Spec:
        return Spec(
            self.cron,
            None if self.every is None else self.every.total_seconds(),
            self.timezone,
            None if self.start_at is None else self.start_at.timestamp(),
            None if self.end_at is None else self.end_at.timestamp(),
        )

    def _saver(self) -> BaseCheckpointSaver[Any]:
        if self.saver is None:
            raise ValueError("this Schedule was built by hand: get one from schedules(saver)")
        return self.saver

    def _act(self, plan: Callable[..., Any], op: str) -> Schedule:
        saver = self._saver()
        return Schedule.from_row(saver.run_queue(plan, op), saver)

    async def _aact(self, plan: Callable[..., Any], op: str) -> Schedule:
        saver = self._saver()
        return Schedule.from_row(await saver.arun_queue(plan, op), saver)

    def _paused(self, paused: bool) -> Callable[..., Any]:
        return partial(
            _schedules.set_paused, schedule_id=self.schedule_id, paused=paused, now=due_now(None)
        )

    def pause(self) -> Schedule:
        """Fire nothing until resumed (``trigger`` still runs it)."""
        return self._act(self._paused(True), "pause a schedule")

    async def apause(self) -> Schedule:
        return await self._aact(self._paused(True), "pause a schedule")

    def resume(self) -> Schedule:
        """Fire again from the next slot after now; the slots while it was
        paused are not caught up."""
        return self._act(self._paused(False), "resume a schedule")

    async def aresume(self) -> Schedule:
        return await self._aact(self._paused(False), "resume a schedule")

    def delete(self) -> None:
        """Forget it; runs it queued already still run."""
        self._saver().run_queue(
            partial(_schedules.delete, schedule_id=self.schedule_id), "delete a schedule"
        )

    async def adelete(self) -> None:
        await self._saver().arun_queue(
            partial(_schedules.delete, schedule_id=self.schedule_id), "delete a schedule"
        )

    def _trigger(self) -> Callable[..., Any]:
        saver = self._saver()
        return partial(
            _schedules.trigger,
            schedule_id=self.schedule_id,
            now=due_now(None),
            dumps=saver.serde.dumps_typed,
        )

    def trigger(self) -> RunHandle:
        """Queue a run now, paused or not, on a thread of its own; the
        schedule's slots are left as they were."""
        saver = self._saver()
        run_id, thread = saver.run_queue(self._trigger(), "trigger a schedule")
        return RunHandle(saver, run_id, thread)

    async def atrigger(self) -> RunHandle:
        saver = self._saver()
        run_id, thread = await saver.arun_queue(self._trigger(), "trigger a schedule")
        return RunHandle(saver, run_id, thread)


def _when_utc(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _duration(seconds: float) -> str:
    """``90`` → ``1m30s``: how a schedule's interval is shown."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    parts, left = [], int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts)


def _instant(value: Any, name: str, tz: str) -> float | None:
    """``start_at``/``end_at`` as seconds: an aware datetime as it is, a
    naive one read in the schedule's timezone."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidScheduleError(f"{name} takes a datetime, got {type(value).__name__}")
    when: datetime = value if value.tzinfo else value.replace(tzinfo=_slots.zone(tz))
    seconds = when.timestamp()
    try:  # the instant must have a UTC date too: every reading of the row makes one
        _when(seconds)
    except (ValueError, OverflowError):
        raise InvalidScheduleError(
            f"{name} {value.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from None
    return seconds


def _every(every: Any) -> float:
    seconds = every.total_seconds() if isinstance(every, timedelta) else every
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidScheduleError(f"every takes a timedelta, got {type(every).__name__}")
    if not 1 <= seconds < math.inf:
        raise InvalidScheduleError(f"every must be at least a second, got {every!r}")
    return float(seconds)


def _request(
    saver: Any,
    schedule_id: Any,
    *,
    cron: Any,
    every: Any,
    input: Any,
    timezone: Any,
    catchup: Any,
    start_at: Any,
    end_at: Any,
    thread_id: Any = None,
    slot_input: bool = True,
) -> tuple[Spec, tuple[Any, ...]]:
    """The checked schedule: its spec and the rest of its row (catchup,
    stored input). Every check happens here, before the database.
    ``slot_input=False``: ``input=None`` is stored as ``None``, each run's
    input (``pregelkit serve``'s crons: a run created with no input)."""
    if not saver.has_run_queue:
        raise no_run_queue(saver)
    if not isinstance(schedule_id, str) or not schedule_id.strip():
        raise InvalidScheduleError(
            f"a schedule id is a non-empty string (e.g. 'nightly-report'), got {schedule_id!r}"
        )
    if len(schedule_id) > MAX_ID:
        # its slots' thread ids hold it: one too long for PostgreSQL's index
        # (about 2,700 bytes) failed every firing of the fleet's schedules
        raise InvalidScheduleError(
            f"a schedule id is at most {MAX_ID} characters, got {len(schedule_id)}"
        )
    if (cron is None) == (every is None):
        raise InvalidScheduleError(
            "schedule() takes one of cron='0 3 * * *' or every=timedelta(minutes=5)"
        )
    if timezone == "localtime":
        raise InvalidScheduleError(
            "timezone 'localtime' is each machine's own zone (/etc/localtime), and workers on "
            "machines set apart would fire the schedule at different instants: name the zone, "
            "e.g. 'Europe/Berlin'"
        )
    _slots.zone(timezone)
    if catchup not in CATCHUP:
        raise InvalidScheduleError(
            f"catchup must be one of {', '.join(map(repr, CATCHUP))}, got {catchup!r}"
        )
    spec = Spec(
        None if cron is None else _slots.check_cron(cron),
        None if every is None else _every(every),
        timezone,
        _instant(start_at, "start_at", timezone),
        _instant(end_at, "end_at", timezone),
    )
    if spec.start_at is not None and spec.end_at is not None and spec.end_at <= spec.start_at:
        raise InvalidScheduleError(f"end_at ({end_at}) must be after start_at ({start_at})")
    if spec.end_at is None and spec.next_slot(due_now(None)) is None:
        raise InvalidScheduleError(
            f"schedule {schedule_id!r} never fires: its first slot is past the year 9999 "
            f"(every={every!r}, start_at={start_at!r})"
        )
    if thread_id is not None and (not isinstance(thread_id, str) or not thread_id.strip()):
        raise InvalidScheduleError(f"thread_id is a non-empty string, got {thread_id!r}")
    if input is None and slot_input:
        stored: tuple[Any, Any] = (None, None)
    else:
        try:
            stored = saver.serde.dumps_typed(input)
        except Exception as exc:
            raise InvalidScheduleError(
                f"a schedule stores its input in the database, and it cannot be serialized: {exc}"
            ) from exc
    return spec, (catchup, stored)


def _declare(saver: Any, workflow: str, schedule_id: str, **kwargs: Any) -> Callable[..., Any]:
    spec, (catchup, stored) = _request(saver, schedule_id, **kwargs)
    return partial(
        _schedules.declare,
        schedule_id=schedule_id,
        workflow=workflow,
        spec=spec,
        catchup=catchup,
        input=stored,
        now=due_now(None),
        thread_id=kwargs.get("thread_id"),
    )


def declare_schedule(
    saver: BaseCheckpointSaver[Any], workflow: str, schedule_id: str, **kwargs: Any
) -> Schedule:
    """Record (or update) a schedule of ``workflow`` (what ``wf.schedule``
    does; its keywords, and ``thread_id``, ``slot_input`` of ``_request``)."""
    plan = _declare(saver, workflow, schedule_id, **kwargs)
    return Schedule.from_row(saver.run_queue(plan, "declare a schedule"), saver)


async def adeclare_schedule(
    saver: BaseCheckpointSaver[Any], workflow: str, schedule_id: str, **kwargs: Any
) -> Schedule:
    plan = _declare(saver, workflow, schedule_id, **kwargs)
    return Schedule.from_row(await saver.arun_queue(plan, "declare a schedule"), saver)


def _listing(saver: Any, workflow: str | None) -> Callable[..., Any]:
    if not saver.has_run_queue:
        raise no_run_queue(saver)
    return partial(_schedules.list_schedules, workflow=workflow)


def schedules(saver: BaseCheckpointSaver[Any], workflow: str | None = None) -> list[Schedule]:
    """The schedules in ``saver``'s database (of one workflow, if named),
    by id."""
    rows = saver.run_queue(_listing(saver, workflow), "list schedules", single=True)
    return [Schedule.from_row(row, saver) for row in rows]


async def aschedules(
    saver: BaseCheckpointSaver[Any], workflow: str | None = None
) -> list[Schedule]:
    """The async twin of :func:`schedules`."""
    rows = await saver.arun_queue(_listing(saver, workflow), "list schedules", single=True)
    return [Schedule.from_row(row, saver) for row in rows]


def get_schedule(saver: BaseCheckpointSaver[Any], schedule_id: str) -> Schedule:
    """The schedule of that id; ``ScheduleNotFoundError`` if there is none."""
    if not saver.has_run_queue:
        raise no_run_queue(saver)
    row = saver.run_queue(partial(_schedules.get, schedule_id=schedule_id), "get a schedule")
    return Schedule.from_row(row, saver)
