"""A schedule's slots and which due ones fire (``checkpoint/_slots.py``):
cron wall times through DST changes, ``every`` anchored, catchup, and the
errors a bad schedule gets before anything is stored. No database."""

from __future__ import annotations

import itertools
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from pregelkit.checkpoint._slots import CATCHUP_ALL_LIMIT, Spec, check_cron, due_slots, iso, zone
from pregelkit.errors import InvalidScheduleError

NY = ZoneInfo("America/New_York")


def _at(*parts: int, tz: ZoneInfo = NY, fold: int = 0) -> float:
    return datetime(*parts, tzinfo=tz, fold=fold).timestamp()  # type: ignore[misc]


def _local(at: float) -> str:
    return datetime.fromtimestamp(at, NY).strftime("%m-%d %H:%M %Z")


def _walk(spec: Spec, start: float, count: int) -> list[str]:
    return [_local(slot) for slot in spec.after(start, count)]


def test_a_daily_slot_the_spring_forward_skips_fires_once_at_the_change() -> None:
    # 2026-03-08: New York goes from 02:00 EST to 03:00 EDT; 02:30 does not exist
    spec = Spec("30 2 * * *", None, "America/New_York", None, None)
    assert _walk(spec, _at(2026, 3, 6, 12), 4) == [
        "03-07 02:30 EST",
        "03-08 03:00 EDT",
        "03-09 02:30 EDT",
        "03-10 02:30 EDT",
    ]


def test_a_daily_slot_in_the_repeated_hour_fires_once_at_its_first_occurrence() -> None:
    # 2026-11-01: New York goes from 02:00 EDT back to 01:00 EST; 01:30 happens twice
    spec = Spec("30 1 * * *", None, "America/New_York", None, None)
    slots = spec.after(_at(2026, 10, 31, 12), 3)
    assert [_local(s) for s in slots] == ["11-01 01:30 EDT", "11-02 01:30 EST", "11-03 01:30 EST"]
    # asked from inside the repeated hour's second pass, it does not fire again
    second_pass = _at(2026, 11, 1, 1, 10, fold=1)
    assert _local(spec.next_slot(second_pass) or 0) == "11-02 01:30 EST"
    assert spec.prev_slot(second_pass) == slots[0]


def test_quarter_hours_through_both_changes_never_repeat_an_instant() -> None:
    spec = Spec("*/15 * * * *", None, "America/New_York", None, None)
    spring = spec.after(_at(2026, 3, 8, 1, 30), 5)
    assert [_local(s) for s in spring] == [
        "03-08 01:45 EST",
        "03-08 03:00 EDT",
        "03-08 03:15 EDT",
        "03-08 03:30 EDT",
        "03-08 03:45 EDT",
    ]
    fall = spec.after(_at(2026, 11, 1, 1, 30), 3)
    # the repeated hour's wall times fired on its first pass: not again
    assert [_local(s) for s in fall] == ["11-01 01:45 EDT", "11-01 02:00 EST", "11-01 02:15 EST"]
    # around both changes the slots strictly increase, 15 minutes apart
    # but across a change
    for start in (_at(2026, 3, 7), _at(2026, 10, 31)):
        days = spec.after(start, 4 * 24 * 3)
        gaps = {b - a for a, b in itertools.pairwise(days)}
        assert gaps == {900.0, 3600.0 + 900.0} or gaps == {900.0}


def test_every_is_anchored_at_start_at_or_the_epoch() -> None:
    hourly = Spec(None, 3600.0, "UTC", None, None)
    now = datetime(2026, 11, 29, 10, 17, tzinfo=UTC).timestamp()
    assert iso(hourly.next_slot(now) or 0) == "2026-11-29T11:00:00Z"
    assert iso(hourly.prev_slot(now) or 0) == "2026-11-29T10:00:00Z"
    start = datetime(2026, 11, 29, 10, 5, tzinfo=UTC).timestamp()
    anchored = Spec(None, 3600.0, "UTC", start, start + 3 * 3600)
    assert [iso(s) for s in anchored.after(0, 10)] == [
        "2026-11-29T10:05:00Z",
        "2026-11-29T11:05:00Z",
        "2026-11-29T12:05:00Z",
        "2026-11-29T13:05:00Z",
    ]
    assert anchored.prev_slot(start - 1) is None
    assert anchored.next_slot(start + 3 * 3600) is None


def test_catchup_fires_on_time_slots_and_the_missed_ones_it_says() -> None:
    minutely = Spec(None, 60.0, "UTC", None, None)
    next_at = 600 * 60.0
    # a check 10.5 minutes after next_at: the slot 30 s ago is on time (grace
    # 60 s), the 10 before it missed
    now = next_at + 10 * 60 + 30
    on_time, after = now - 30, now + 30
    assert due_slots(minutely, next_at, now, "skip") == ([on_time], after)
    assert due_slots(minutely, next_at, now, "latest") == ([on_time - 60, on_time], after)
    fired, then = due_slots(minutely, next_at, now, "all")
    assert fired == [next_at + 60 * k for k in range(11)] and then == after
    # on time (less than grace late): always fires, whatever catchup
    assert due_slots(minutely, next_at, next_at + 59, "skip") == ([next_at], next_at + 60)
    assert due_slots(minutely, next_at, next_at - 1, "all") == ([], next_at)


def test_catchup_all_is_bounded_and_each_check_fires_a_batch() -> None:
    every_second = Spec(None, 1.0, "UTC", None, None)
    now = 10_000.0
    fired, after = due_slots(every_second, 0.0, now, "all", limit=10**6)
    # the limit of missed ones, and 5 on time (grace 5 s)
    assert len(fired) == CATCHUP_ALL_LIMIT + 5
    assert fired[-1] == now and after == now + 1
    batch, after = due_slots(every_second, 0.0, now, "all")
    assert len(batch) == 100 and after == batch[-1] + 1


@pytest.mark.parametrize(
    ("expr", "field"),
    [
        ("61 * * * *", "minute"),
        ("0 25 * * *", "hour"),
        ("0 0 32 * *", "day of month"),
        ("0 0 * 13 *", "month"),
        ("0 0 * * fri-mon2", "day of week"),
    ],
)
def test_a_bad_cron_field_is_named(expr: str, field: str) -> None:
    with pytest.raises(InvalidScheduleError, match=f"the {field} field"):
        check_cron(expr)


def test_cron_takes_five_fields_or_a_macro() -> None:
    with pytest.raises(InvalidScheduleError, match="has 6 fields; it takes 5: minute hour"):
        check_cron("0 0 3 * * *")
    with pytest.raises(InvalidScheduleError, match="unknown macro"):
        check_cron("@reboot")
    assert check_cron("  @Daily ") == "@daily"
    assert check_cron("0  3 * *   mon-fri") == "0 3 * * mon-fri"


def test_an_unknown_timezone_is_refused_with_the_closest_names() -> None:
    with pytest.raises(InvalidScheduleError, match="did you mean 'Europe/Berlin'"):
        zone("Europe/Berln")
    with pytest.raises(InvalidScheduleError, match="unknown timezone"):
        zone("../etc/passwd")


def test_cron_without_croniter_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "croniter", None)
    with pytest.raises(ImportError, match=r"pip install 'pregelkit\[schedules\]'"):
        check_cron("0 3 * * *")
    # an interval needs nothing
    assert Spec(None, 60.0, "UTC", None, None).next_slot(0) == 60.0


def test_a_cron_that_never_matches_is_refused() -> None:
    with pytest.raises(InvalidScheduleError, match="matches no date"):
        check_cron("0 0 30 2 *")


def test_a_grace_of_the_interval_clamped_to_5_and_60_seconds() -> None:
    daily = Spec(None, 86400.0, "UTC", None, None)
    assert due_slots(daily, 86400.0, 86400.0 + 59, "skip")[0] == [86400.0]
    assert due_slots(daily, 86400.0, 86400.0 + 60, "skip")[0] == []
    every_second = Spec(None, 1.0, "UTC", None, None)
    assert due_slots(every_second, 100.0, 104.5, "skip")[0] == [100.0, 101, 102, 103, 104]
    assert due_slots(every_second, 100.0, 105.5, "skip")[0] == [101.0, 102, 103, 104, 105]
