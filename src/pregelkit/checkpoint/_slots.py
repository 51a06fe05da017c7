"""When a schedule fires: its slots, and which of the due ones a check fires.

A schedule's *slots* are the instants it fires at, in seconds since the
epoch. ``every=`` slots are ``anchor + k * every`` (anchor: ``start_at``,
else the epoch, so ``every=timedelta(hours=1)`` fires on the hour and a
re-declared schedule keeps its phase). ``cron=`` slots are the wall-clock
times the expression matches in the schedule's timezone, turned into
instants by the zone's rules (``zoneinfo``):

- a wall time the spring-forward skips (02:30 on the day New York goes from
  02:00 to 03:00) fires once, at the change (03:00 local);
- a wall time the fall-back repeats (01:30 on the day New York goes from
  02:00 back to 01:00) fires once, at its first occurrence.

So the wall time to instant map never goes backwards, and the slots are
the distinct instants it gives. croniter reads the expression (imported only
here, when a cron schedule is made or computed); this module turns its
naive wall times into instants, so croniter's own timezone handling is not
relied on.

A due slot is *missed* when a check first sees it ``grace`` or more late,
``grace`` being the schedule's interval clamped to [5 s, 60 s]; the rest are
on time and always fire. Of the missed ones ``catchup`` says which fire:
``skip`` none, ``latest`` the latest, ``all`` each (at most
``CATCHUP_ALL_LIMIT``, the latest ones), oldest first.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pregelkit.errors import InvalidScheduleError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "CATCHUP",
    "CATCHUP_ALL_LIMIT",
    "FIRE_LIMIT",
    "Spec",
    "check_cron",
    "due_slots",
    "iso",
    "zone",
]

CATCHUP = ("skip", "latest", "all")
GRACE_SECONDS = (5.0, 60.0)
"""A due slot seen this late or later is missed: the schedule's interval,
clamped to these bounds."""
CATCHUP_ALL_LIMIT = 1000
"""``catchup="all"`` fires at most this many missed slots (the latest)."""
FIRE_LIMIT = 100
"""Slots one check fires for one schedule; the next check goes on."""
LAST_SLOT = datetime(9999, 12, 31, tzinfo=UTC).timestamp()
"""No slot is later (a datetime's range ends in 9999): past it a schedule
has no next slot, as past its ``end_at``."""
FIELDS = ("minute", "hour", "day of month", "month", "day of week")
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_RANDOM = re.compile(r"(?<![a-z])r(?![a-z])", re.IGNORECASE)
"""croniter's random value (``R``, ``R(0-29)``), not the r of a name (``fri``)."""
_SEARCH_STEPS = 10_000
"""Wall times a search walks before it gives up (a wall time maps to an
earlier instant only inside a repeated hour: a few steps at most)."""


def _croniter() -> Any:
    try:
        from croniter import croniter
    except ImportError:
        raise ImportError(
            "a cron schedule needs croniter: pip install 'pregelkit[schedules]' "
            "(or use every=timedelta(...), which needs nothing)"
        ) from None
    return croniter


def check_cron(expr: Any) -> str:
    """``expr``, stripped, if it is a 5-field cron expression or a macro
    (``@daily``); else an error naming the field that is wrong."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidScheduleError(
            f"cron must be a cron expression such as '0 3 * * *', got {expr!r}"
        )
    text: str = " ".join(expr.split())
    croniter = _croniter()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise InvalidScheduleError(f"cron {text!r}: unknown macro; one of {', '.join(MACROS)}")
        return text.lower()
    fields = text.split(" ")
    if len(fields) != len(FIELDS):
        raise InvalidScheduleError(
            f"cron {text!r} has {len(fields)} fields; it takes 5: {' '.join(FIELDS)} "
            "(e.g. '*/5 * * * *' every 5 minutes, '0 3 * * mon-fri' at 03:00 on weekdays)"
        )
    for index, name in enumerate(FIELDS):
        if _RANDOM.search(fields[index]):
            raise InvalidScheduleError(
                f"cron {text!r}: the {name} field {fields[index]!r} is random (croniter's R), "
                "drawn by each worker for itself, so each would fire at its own times: "
                "write the value"
            )
        alone = ["*"] * len(FIELDS)
        alone[index] = fields[index]
        if not croniter.is_valid(" ".join(alone)):
            raise InvalidScheduleError(
                f"cron {text!r}: the {name} field {fields[index]!r} is not valid"
            )
    if not croniter.is_valid(text):
        raise InvalidScheduleError(f"cron {text!r} is not a valid cron expression")
    try:
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except Exception:
        raise InvalidScheduleError(f"cron {text!r} matches no date (e.g. February 30th)") from None
    return text


def zone(name: Any) -> ZoneInfo:
    """The IANA timezone ``name``; an unknown one is an error naming the
    closest known names."""
    if not isinstance(name, str) or not name:
        raise InvalidScheduleError(f"timezone must be an IANA name such as 'UTC', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(name, sorted(available_timezones()), n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise InvalidScheduleError(
            f"unknown timezone {name!r}: an IANA name such as 'UTC' or 'Europe/Berlin'{hint}"
        ) from None


def iso(at: float) -> str:
    """A slot as ISO 8601 UTC (``2026-11-29T03:00:00Z``): its thread id and
    the ``scheduled_at`` its run is given."""
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Spec:
    """What decides a schedule's slots (its input and catchup do not)."""

    cron: str | None
    every: float | None
    timezone: str
    start_at: float | None
    end_at: float | None

    def next_slot(self, after: float) -> float | None:
        """The first slot after ``after`` (``None``: no more, ``end_at``)."""
        if self.start_at is not None and after < self.start_at:
            after = math.nextafter(self.start_at, -math.inf)
        slot = self._every_after(after) if self.every is not None else self._cron_after(after)
        if slot is None or slot > (LAST_SLOT if self.end_at is None else self.end_at):
            return None
        return slot

    def prev_slot(self, at: float) -> float | None:
        """The latest slot at or before ``at`` (``None``: none yet)."""
        if self.end_at is not None:
            at = min(at, self.end_at)
        if self.every is not None:
            anchor = self.start_at or 0.0
            k = math.floor((at - anchor) / self.every)
            if anchor + k * self.every > at:
                k -= 1
            return None if k < 0 and self.start_at is not None else anchor + k * self.every
        slot = self._cron_before(at)
        # the map never goes back, but a time in a repeated hour's second
        # occurrence reads as an earlier wall time: walk on to the last one
        while slot is not None:
            following = self._cron_after(slot)
            if following is None or following > at:
                break
            slot = following
        if slot is not None and self.start_at is not None and slot < self.start_at:
            return None
        return slot

    def after(self, start: float, count: int) -> list[float]:
        """Up to ``count`` slots after ``start``, in order."""
        out: list[float] = []
        slot = self.next_slot(start)
        while slot is not None and len(out) < count:
            out.append(slot)
            slot = self.next_slot(slot)
        return out

    def _every_after(self, after: float) -> float:
        assert self.every is not None
        anchor = self.start_at or 0.0
        k = max(math.floor((after - anchor) / self.every) + 1, 0)
        if anchor + k * self.every <= after:
            k += 1
        return anchor + k * self.every

    def _walls(self, start: float, backwards: bool) -> Iterator[float]:
        tz = zone(self.timezone)
        wall = datetime.fromtimestamp(start, tz).replace(tzinfo=None)
        if backwards:
            # croniter goes strictly before: a slot at `start` itself counts
            wall = wall.replace(microsecond=0) + _SECOND
        walk = _walker(str(self.cron), wall)
        step = walk.get_prev if backwards else walk.get_next
        for _ in range(_SEARCH_STEPS):
            try:
                wall = step(datetime)
            except OverflowError:  # past the year 9999 (or before 1): no slot there
                return
            yield _instant(wall, tz)

    def _cron_after(self, after: float) -> float | None:
        for slot in self._walls(after, backwards=False):
            if slot > after:
                return slot
        return None

    def _cron_before(self, at: float) -> float | None:
        for slot in self._walls(at, backwards=True):
            if slot <= at:
                return slot
        return None


def due_slots(
    spec: Spec, next_at: float, now: float, catchup: str, limit: int = FIRE_LIMIT
) -> tuple[list[float], float | None]:
    """The slots a check at ``now`` fires (``next_at``: the first not yet
    fired or skipped), and the new ``next_at``."""
    if next_at > now:
        return [], next_at
    following = spec.next_slot(next_at)
    interval = 60.0 if following is None else following - next_at
    grace = min(max(interval, GRACE_SECONDS[0]), GRACE_SECONDS[1])
    fire: list[float] = []
    slot: float | None = next_at
    latest_missed = spec.prev_slot(now - grace)
    if latest_missed is not None and latest_missed >= next_at:
        if catchup == "all":
            first = latest_missed
            # slots are a minute apart at least (cron), or `every`: fewer
            # than the limit fit since next_at unless it is that far back
            gap = 60.0 if spec.every is None else spec.every
            if latest_missed - next_at < (CATCHUP_ALL_LIMIT - 1) * gap:
                first = next_at
            for _ in range(CATCHUP_ALL_LIMIT - 1 if first > next_at else 0):
                before = spec.prev_slot(first - 0.5)  # slots are >= 1 s apart
                if before is None or before < next_at:
                    break
                first = before
            slot = first
            while slot is not None and slot <= latest_missed:
                if len(fire) == limit:
                    return fire, slot
                fire.append(slot)
                slot = spec.next_slot(slot)
        else:
            if catchup == "latest":
                fire.append(latest_missed)
            slot = spec.next_slot(latest_missed)
    while slot is not None and slot <= now:
        if len(fire) == limit:
            return fire, slot
        fire.append(slot)
        slot = spec.next_slot(slot)
    return fire, slot


_SECOND = datetime.fromtimestamp(1, UTC) - datetime.fromtimestamp(0, UTC)
_walkers = threading.local()


def _walker(expr: str, wall: datetime) -> Any:
    """A croniter of ``expr`` set at ``wall``: kept per thread and moved,
    since parsing the expression is two thirds of a step's cost (127 of
    214 us)."""
    cache: dict[str, Any] = _walkers.__dict__.setdefault("cache", {})
    walk = cache.get(expr)
    if walk is None:
        if len(cache) > 64:
            cache.clear()
        walk = cache[expr] = _croniter()(expr, wall)
    else:
        walk.set_current(wall, force=True)
    return walk


def _instant(wall: datetime, tz: ZoneInfo) -> float:
    """The instant of wall time ``wall`` in ``tz``: its first occurrence if
    it is repeated, the change itself if the change skips it."""
    at = wall.replace(tzinfo=tz).timestamp()
    if datetime.fromtimestamp(at, tz).replace(tzinfo=None) == wall:
        return at
    # skipped: the change lies between the time read with the offset after
    # it (fold=1) and with the one before (fold=0); find the first second
    # whose offset is the new one
    low, high = int(wall.replace(tzinfo=tz, fold=1).timestamp()), int(at)
    offset = datetime.fromtimestamp(high, tz).utcoffset()
    while low < high:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == offset:
            high = middle
        else:
            low = middle + 1
    return float(low)
