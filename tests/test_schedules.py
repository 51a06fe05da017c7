"""Schedules on SQLite and PostgreSQL (``wf.schedule``, ``durable.schedules``,
workers firing slots), driven by ``FakeClock``: no test waits for a slot.

Each slot fires once: by whichever worker looks first, through a slot row
with a unique key, whatever else happens (two workers at once, a clock that
goes back, the schedule declared again, paused, deleted)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint import _schedules, _slots
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.runs import list_runs
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import InvalidScheduleError, ScheduleNotFoundError
from pregelkit.func import entrypoint
from pregelkit.testing import FakeClock
from pregelkit.worker import AsyncWorker, Worker

START = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(connection string, saver) of an empty database."""
    if request.param == "sqlite":
        url = str(tmp_path / "s.db")
        with SqliteSaver.from_conn_string(url) as sqlite:
            sqlite.setup()
            yield url, sqlite
    else:
        url = request.getfixturevalue("postgres_database")("pregelkit_schedules")
        with PostgresSaver.from_conn_string(url) as pg:
            pg.setup()
            yield url, pg


@pytest.fixture
def saver(db: tuple[str, Any]) -> Any:
    return db[1]


def _ticker(saver: Any, seen: list[tuple[Any, str, str]]) -> Any:
    @entrypoint(checkpointer=saver)
    def tick(value: Any, config: Any) -> Any:
        conf = config["configurable"]
        seen.append((value, conf["schedule_id"], conf["scheduled_at"]))
        return value

    return tick


def _slots_fired(saver: Any) -> list[tuple[str, str]]:
    rows = saver.run_queue(
        lambda d: _one(d, "SELECT schedule_id, thread_id FROM pregelkit_schedule_slots"),
        "test",
    )
    return sorted((str(a), str(b)) for a, b in rows)


def _one(d: Any, sql: str) -> Any:
    rows = yield d.q(sql, (), "all")
    return rows


def test_a_worker_fires_each_slot_once_with_its_config(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        made = tick.schedule("t", every=MINUTE)
        assert made.next_at == datetime(2026, 11, 29, 12, 1, tzinfo=UTC)
        worker = Worker([tick], saver)
        assert worker.run_until_idle() == 0
        clock.advance(31)
        assert worker.run_until_idle() == 1
        assert worker.run_until_idle() == 0
        clock.advance(60)
        assert worker.run_until_idle() == 1
    # no input: each run gets its slot time
    assert seen == [
        ("2026-11-29T12:01:00Z", "t", "2026-11-29T12:01:00Z"),
        ("2026-11-29T12:02:00Z", "t", "2026-11-29T12:02:00Z"),
    ]
    assert [thread for _, thread in _slots_fired(saver)] == [
        "schedule:t:2026-11-29T12:01:00Z",
        "schedule:t:2026-11-29T12:02:00Z",
    ]
    (listed,) = durable.schedules(saver)
    assert listed.last_slot_at == datetime(2026, 11, 29, 12, 2, tzinfo=UTC)
    assert listed.next_fire_times(2) == [
        datetime(2026, 11, 29, 12, 3, tzinfo=UTC),
        datetime(2026, 11, 29, 12, 4, tzinfo=UTC),
    ]


def test_an_async_worker_fires_a_cron_schedule_with_its_input(saver: Any, arun: Any) -> None:
    seen: list[tuple[Any, str, str]] = []

    @entrypoint(checkpointer=saver)
    async def atick(value: Any, config: Any) -> Any:
        conf = config["configurable"]
        seen.append((value, conf["schedule_id"], conf["scheduled_at"]))
        return value

    async def main() -> None:
        with FakeClock(START) as clock:
            made = await atick.aschedule(
                "nightly", cron="0 3 * * *", timezone="Europe/Berlin", input={"n": 1}
            )
            # 03:00 in Berlin is 02:00 UTC in winter
            assert made.next_at == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
            clock.advance(timedelta(hours=14))
            assert await AsyncWorker([atick], saver).run_until_idle() == 1
            assert [s.schedule_id for s in await durable.aschedules(saver)] == ["nightly"]

    arun(main())
    assert seen == [({"n": 1}, "nightly", "2026-11-30T02:00:00Z")]


@pytest.mark.parametrize(
    ("catchup", "fired"),
    [
        ("skip", ["12:31:00"]),
        ("latest", ["12:30:00", "12:31:00"]),
        ("all", [f"12:{m:02}:00" for m in range(1, 32)]),
    ],
)
def test_slots_missed_while_no_worker_ran_follow_catchup(
    saver: Any, catchup: str, fired: list[str]
) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        tick.schedule("t", every=MINUTE, catchup=catchup)
        clock.advance(timedelta(minutes=30, seconds=50))  # 12:31:20: 12:31 is on time
        Worker([tick], saver).run_until_idle()
    assert sorted(at[11:19] for _, _, at in seen) == fired


def test_declaring_again_keeps_pause_and_next_slot_unless_the_slots_changed(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        first = tick.schedule("t", every=MINUTE, input=1)
        paused = first.pause()
        assert paused.paused and paused.next_fire_times() == []
        clock.advance(10)
        # a deploy declares it again: still paused, same next slot, new input
        again = tick.schedule("t", every=MINUTE, input=2)
        assert again.paused and again.next_at == first.next_at and again.input == 2
        clock.advance(300)
        Worker([tick], saver).run_until_idle()
        assert seen == []
        resumed = again.resume()
        # the slots while paused are not caught up: from the next one after now
        assert resumed.next_at == datetime(2026, 11, 29, 12, 6, tzinfo=UTC)
        clock.advance(30)
        Worker([tick], saver).run_until_idle()
        assert [v for v, _, _ in seen] == [2]
        # a new interval: its first slot after now
        changed = tick.schedule("t", every=timedelta(minutes=10), input=3)
        assert changed.next_at == datetime(2026, 11, 29, 12, 10, tzinfo=UTC)
    assert len(durable.schedules(saver)) == 1


def test_a_clock_that_goes_back_fires_no_slot_twice(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        tick.schedule("t", every=MINUTE, catchup="all")
        clock.advance(timedelta(minutes=3))
        Worker([tick], saver).run_until_idle()
    assert len(seen) == 3
    # this worker's clock is 5 minutes behind: nothing is due for it yet
    with FakeClock(START - timedelta(minutes=5)) as clock:
        Worker([tick], saver).run_until_idle()
        assert len(seen) == 3
        # moved back by hand to its first slot (an edit of its row): the
        # slots it fired are not fired again, the next one is
        first = (START + timedelta(seconds=30)).timestamp()
        saver.run_queue(
            lambda d: _exec(d, f"UPDATE pregelkit_schedules SET next_at = {first}"),
            "test",
            single=True,
        )
        clock.advance(timedelta(minutes=9))  # 12:04:30
        Worker([tick], saver).run_until_idle()
    assert sorted(at[11:19] for _, _, at in seen) == [
        "12:01:00",
        "12:02:00",
        "12:03:00",
        "12:04:00",
    ]


def _exec(d: Any, sql: str) -> Any:
    yield d.q(sql, ())


def test_workers_firing_at_once_fire_each_slot_once(saver: Any) -> None:
    tick = _ticker(saver, [])
    dumps = saver.serde.dumps_typed
    with FakeClock(START) as clock:
        for n in range(5):
            tick.schedule(f"s{n}", every=timedelta(seconds=1), catchup="all")
        clock.advance(20)
        now = clock.now()
    fired: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def fire() -> None:
        plan = partial(_schedules.fire, workflows=["tick"], now=now, dumps=dumps, limit=2)
        barrier.wait()
        for _ in range(10):
            try:
                fired.extend(saver.run_queue(plan, "fire")[0])
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    slots = [(schedule, slot) for schedule, slot, _ in fired]
    assert len(slots) == len(set(slots)) == 5 * 20
    runs = list_runs(saver, limit=1000)
    assert len(runs) == 100 and len({r.thread_id for r in runs}) == 100


def test_pause_resume_delete_and_trigger(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        made = tick.schedule("t", every=timedelta(hours=1), input="x").pause()
        handle = made.trigger()  # paused or not
        assert handle.thread_id == "schedule:t:trigger:2026-11-29T12:00:30Z"
        Worker([tick], saver).run_until_idle()
        assert handle.result(timeout=30) == "x"
        assert seen == [("x", "t", "2026-11-29T12:00:30Z")]
        made.delete()
        assert durable.schedules(saver) == []
        with pytest.raises(ScheduleNotFoundError, match="no schedule 't'"):
            made.resume()
        with pytest.raises(ScheduleNotFoundError):
            made.trigger()
        clock.advance(timedelta(hours=2))
        Worker([tick], saver).run_until_idle()
    assert len(seen) == 1


def test_runs_queued_before_a_delete_still_run(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        made = tick.schedule("t", every=MINUTE)
        clock.advance(40)
        now = clock.now()
        fired, _ = saver.run_queue(
            partial(_schedules.fire, workflows=["tick"], now=now, dumps=saver.serde.dumps_typed),
            "fire",
        )
        assert len(fired) == 1
        made.delete()
        Worker([tick], saver).run_until_idle()
    assert len(seen) == 1


def test_a_schedule_of_another_workflow_and_bad_arguments_are_refused(saver: Any) -> None:
    tick = _ticker(saver, [])

    @entrypoint(checkpointer=saver)
    def other(value: Any) -> Any:
        return value

    tick.schedule("t", every=MINUTE)
    with pytest.raises(InvalidScheduleError, match="belongs to workflow 'tick', not 'other'"):
        other.schedule("t", every=MINUTE)
    bad: list[tuple[dict[str, Any], str]] = [
        ({}, "one of cron="),
        ({"cron": "* * * * *", "every": MINUTE}, "one of cron="),
        ({"every": timedelta(milliseconds=10)}, "at least a second"),
        ({"every": "5m"}, "takes a timedelta"),
        ({"cron": "0 3 * * *", "timezone": "Europe/Berln"}, "did you mean 'Europe/Berlin'"),
        ({"cron": "0 3 * * *", "catchup": "some"}, "catchup must be one of"),
        ({"cron": "0 3 * 13 *"}, "the month field '13'"),
        ({"every": MINUTE, "start_at": START, "end_at": START}, "end_at"),
        ({"every": MINUTE, "start_at": "tomorrow"}, "takes a datetime"),
        ({"every": MINUTE, "input": threading.Lock()}, "cannot be serialized"),
    ]
    for kwargs, message in bad:
        with pytest.raises(InvalidScheduleError, match=message):
            tick.schedule("u", **kwargs)
    with pytest.raises(InvalidScheduleError, match="non-empty string"):
        tick.schedule("  ", every=MINUTE)
    assert [s.schedule_id for s in durable.schedules(saver)] == ["t"]


def test_end_at_stops_the_schedule_and_start_at_anchors_it(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    start = START + timedelta(seconds=5)  # 12:00:35
    with FakeClock(START) as clock:
        made = tick.schedule(
            "t", every=MINUTE, start_at=start, end_at=start + 2 * MINUTE, catchup="all"
        )
        assert made.next_fire_times(5) == [start, start + MINUTE, start + 2 * MINUTE]
        clock.advance(timedelta(hours=1))
        Worker([tick], saver).run_until_idle()
    assert len(seen) == 3
    (ended,) = durable.schedules(saver)
    assert ended.next_at is None and ended.next_fire_times() == []


@pytest.mark.parametrize(
    ("cron", "day", "fired_at"),
    [
        # spring forward: 02:30 does not exist on 2026-03-08; it fires at 03:00
        # EDT (07:00 UTC), then at 02:30 EDT (06:30 UTC)
        ("30 2 * * *", datetime(2026, 3, 7, 12, tzinfo=UTC), ["08T07:00", "09T06:30", "10T06:30"]),
        # fall back: 01:30 happens twice on 2026-11-01; it fires once, at the
        # first (EDT, 05:30 UTC), then at 01:30 EST (06:30 UTC)
        (
            "30 1 * * *",
            datetime(2026, 10, 31, 12, tzinfo=UTC),
            ["01T05:30", "02T06:30", "03T06:30"],
        ),
    ],
)
def test_a_worker_fires_through_dst_changes_by_the_timezones_rules(
    saver: Any, cron: str, day: datetime, fired_at: list[str]
) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(day) as clock:
        tick.schedule("ny", cron=cron, timezone="America/New_York")
        worker = Worker([tick], saver)
        for _ in range(3 * 24 * 4):  # three days, a look every 15 minutes
            clock.advance(timedelta(minutes=15))
            worker.run_until_idle()
    assert [at[8:16] for _, _, at in seen] == fired_at  # UTC


def test_a_worker_fires_only_its_own_workflows_schedules(saver: Any) -> None:
    tick = _ticker(saver, [])

    @entrypoint(checkpointer=saver)
    def other(value: Any) -> Any:
        return value

    with FakeClock(START) as clock:
        tick.schedule("t", every=MINUTE)
        clock.advance(timedelta(minutes=2))
        Worker([other], saver).run_until_idle()
        assert _slots_fired(saver) == []
        Worker([tick], saver).run_until_idle()
        assert len(_slots_fired(saver)) == 1


def test_a_schedule_this_worker_cannot_compute_does_not_block_the_others(
    saver: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:
        tick.schedule("cron", cron="* * * * *")
        tick.schedule("every", every=MINUTE)
        clock.advance(40)
        # this worker's environment has no croniter (installed where it was declared)
        monkeypatch.setitem(sys.modules, "croniter", None)
        monkeypatch.setattr(_slots, "_walkers", threading.local())  # nor parsed expressions
        Worker([tick], saver).run_until_idle()
        Worker([tick], saver).run_until_idle()
        assert [sid for _, sid, _ in seen] == ["every"]
        warned = [r.getMessage() for r in caplog.records if "cannot fire" in r.getMessage()]
        assert len(warned) == 2 and "pregelkit[schedules]" in warned[0]  # once per worker
        monkeypatch.delitem(sys.modules, "croniter")
        Worker([tick], saver).run_until_idle()
    assert sorted(sid for _, sid, _ in seen) == ["cron", "every"]


# SQLite serializes a delete and a firing (BEGIN IMMEDIATE): nothing to pass by
@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_a_firing_passes_by_a_schedule_being_deleted(db: tuple[str, Any]) -> None:
    url, saver = db
    import psycopg

    tick = _ticker(saver, [])
    with FakeClock(START) as clock:
        tick.schedule("t", every=MINUTE)
        clock.advance(40)
        now = clock.now()
    fire = partial(_schedules.fire, workflows=["tick"], now=now, dumps=saver.serde.dumps_typed)
    with psycopg.connect(url) as other:
        # a delete in progress holds the row: a firing passes it by, neither
        # waiting for it nor firing a schedule that is going away
        other.execute("DELETE FROM pregelkit_schedules WHERE schedule_id = 't'")
        assert saver.run_queue(fire, "fire") == ([], [])
        other.rollback()
    # the delete was rolled back: the slot fires now, once
    fired, _ = saver.run_queue(fire, "fire")
    assert [(sid, slot) for sid, slot, _ in fired] == [("t", START.timestamp() + 30)]
    assert saver.run_queue(fire, "fire") == ([], [])


def test_the_async_twins_on_async_savers(db: tuple[str, Any], arun: Any) -> None:
    from crash_workflow import open_async_saver

    url, _ = db

    async def main() -> None:
        async with open_async_saver(url) as asaver:

            @entrypoint(checkpointer=asaver)
            async def atick(value: Any) -> Any:
                return value

            with FakeClock(START) as clock:
                made = await atick.aschedule("a", every=MINUTE, input="v")
                paused = await made.apause()
                assert paused.paused
                handle = await paused.atrigger()
                assert (await paused.aresume()).next_at == made.next_at
                clock.advance(40)
                assert await AsyncWorker([atick], asaver).run_until_idle() == 2
                assert await handle.aresult() == "v"
                (listed,) = await durable.aschedules(asaver, "atick")
                assert listed.last_slot_at == made.next_at
                await listed.adelete()
                assert await durable.aschedules(asaver) == []
                with pytest.raises(ScheduleNotFoundError):
                    await listed.adelete()

    arun(main())


def test_a_new_timezone_or_cron_takes_effect_from_now(saver: Any) -> None:
    seen: list[tuple[Any, str, str]] = []
    tick = _ticker(saver, seen)
    with FakeClock(START) as clock:  # 12:00:30 UTC
        made = tick.schedule("t", cron="0 13 * * *", timezone="UTC", input="utc")
        assert made.next_at == datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
        # 13:00 in Tokyo (UTC+9) is 04:00 UTC: today's is past, tomorrow's is next
        moved = tick.schedule("t", cron="0 13 * * *", timezone="Asia/Tokyo", input="tokyo")
        assert moved.next_at == datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
        clock.advance(timedelta(hours=2))  # past 13:00 UTC: the old slot does not fire
        Worker([tick], saver).run_until_idle()
        assert seen == []
        again = tick.schedule("t", cron="*/30 * * * *", timezone="Asia/Tokyo", input="often")
        assert again.next_at == datetime(2026, 11, 29, 14, 30, tzinfo=UTC)
        clock.advance(timedelta(minutes=30))
        Worker([tick], saver).run_until_idle()
    assert seen == [("often", "t", "2026-11-29T14:30:00Z")]


def test_a_saver_without_a_run_queue_or_no_saver_is_refused() -> None:
    from pregelkit.checkpoint.memory import InMemorySaver

    @entrypoint(checkpointer=InMemorySaver())
    def in_memory(value: Any) -> Any:
        return value

    with pytest.raises(TypeError, match="InMemorySaver keeps no run queue"):
        in_memory.schedule("a", every=MINUTE)
    with pytest.raises(TypeError, match="SqliteSaver or PostgresSaver"):
        durable.schedules(InMemorySaver())

    @entrypoint()
    def unsaved(value: Any) -> Any:
        return value

    with pytest.raises(ValueError, match="has no checkpointer"):
        unsaved.schedule("a", every=MINUTE)
