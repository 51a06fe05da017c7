"""Issue 29's features attacked as a hostile user would: wrong types and
values at the edges, and where schedules, queues and retention meet. Each
test here was a break (a crash, a poisoned row, SQLite and PostgreSQL
disagreeing) before its fix; SQLite and PostgreSQL each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import InvalidScheduleError
from pregelkit.func import entrypoint
from pregelkit.testing import FakeClock


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(connection string, saver) of an empty database."""
    if request.param == "sqlite":
        url = str(tmp_path / "a.db")
        with SqliteSaver.from_conn_string(url) as sqlite:
            sqlite.setup()
            yield url, sqlite
    else:
        url = request.getfixturevalue("postgres_database")("pregelkit_attacks")
        with PostgresSaver.from_conn_string(url) as pg:
            pg.setup()
            yield url, pg


@pytest.fixture
def saver(db: tuple[str, Any]) -> Any:
    return db[1]


def _echo(saver: Any) -> Any:
    @entrypoint(checkpointer=saver)
    def echo(value: Any) -> Any:
        return value

    return echo


def test_priority_is_bounded_alike_on_both_databases(saver: Any) -> None:
    """A priority past 32 bits was stored by SQLite and refused by
    PostgreSQL with its own ``integer out of range`` (2**70: SQLite's
    OverflowError): both now refuse it before the database, naming the
    bound; the bound itself is taken."""
    echo = _echo(saver)
    for priority in (2**31, -(2**31) - 1, 2**70):
        with pytest.raises(ValueError, match="priority must be between"):
            echo.submit(1, {"configurable": {"thread_id": f"p{priority}"}}, priority=priority)
    for priority in (2**31 - 1, -(2**31)):
        echo.submit(1, {"configurable": {"thread_id": f"p{priority}"}}, priority=priority)


def test_a_schedule_past_the_calendar_is_refused_and_lists(saver: Any) -> None:
    """``every=timedelta(days=999999999)`` was stored with a next slot past
    the year 9999, and from then on ``schedules(saver)`` (so ``pregelkit
    schedules``) failed for every schedule with ``year 2739877 is out of
    range``; a cron schedule starting on 9999-12-30 listed, and its next
    fire times failed with croniter's OverflowError. Now a schedule that
    would never fire is refused, and one whose slots run out at the
    calendar's end lists them up to there."""
    echo = _echo(saver)
    with pytest.raises(InvalidScheduleError, match="never fires"):
        echo.schedule("far", every=timedelta(days=999_999_999))
    with pytest.raises(InvalidScheduleError, match="never fires"):
        echo.schedule("late", cron="0 0 * * *", start_at=datetime(9999, 12, 31, 1, tzinfo=UTC))
    echo.schedule("end", cron="0 0 * * *", start_at=datetime(9999, 12, 30, tzinfo=UTC))
    echo.schedule("end2", every=timedelta(days=1), start_at=datetime(9999, 12, 30, tzinfo=UTC))
    (end, end2) = durable.schedules(saver)
    last = [datetime(9999, 12, 30, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)]
    assert end.next_fire_times() == last
    assert end2.next_fire_times() == last


def test_a_debounced_submit_that_finds_its_thread_busy_replaces_nothing(saver: Any) -> None:
    """A debounced submit whose thread already has an active run returns
    that run (a thread has one active run at a time), and it used to cancel
    the key's pending debounced run first anyway: that run's ``result()``
    then named a replacing run that was never queued, and the key had no
    run left to start. Now the pending one stays."""
    echo = _echo(saver)
    durable.declare_queue(saver, durable.Queue("q"))
    with FakeClock(100.0) as clock:
        busy = echo.submit(0, {"configurable": {"thread_id": "busy"}})
        pending = echo.submit(
            1, {"configurable": {"thread_id": "a"}}, queue="q", key="k", debounce=5
        )
        again = echo.submit(
            2, {"configurable": {"thread_id": "busy"}}, queue="q", key="k", debounce=5
        )
        assert again.run_id == busy.run_id
        assert pending.status() == "queued"
        clock.advance(6)
        assert pending.record().not_before == 105.0


def test_a_run_queued_while_a_prune_deletes_its_thread_survives(
    postgres_database: Any,
) -> None:
    """PostgreSQL (READ COMMITTED): ``delete_threads_after`` judged the
    thread ended, then deleted its runs by thread id; a run submitted to the
    thread in between (committed before the delete) went with them, its
    handle's record gone. The delete now removes only ended runs, so the
    new run stays and a worker runs it. (SQLite's BEGIN IMMEDIATE
    serializes the two.)"""
    from pregelkit.checkpoint import _retention
    from pregelkit.worker import Worker

    url = postgres_database("pregelkit_attacks_race")
    with PostgresSaver.from_conn_string(url) as pg, PostgresSaver.from_conn_string(url) as other:
        pg.setup()
        echo = _echo(pg)
        cfg = {"configurable": {"thread_id": "t"}}
        echo.submit(1, cfg)
        assert Worker([echo], pg).run_until_idle() == 1
        cut = _retention.Cutoffs(None, None, None, None, time.time() + 1000)
        late: list[Any] = []

        def racing(d: Any) -> Any:
            plan = _retention._delete_thread(d, thread_id="t", cut=cut, dry_run=False)
            value = yield next(plan)  # the thread's state: ended
            late.append(_echo(other).submit(2, cfg))
            while True:
                try:
                    effect = plan.send(value)
                except StopIteration as done:
                    return done.value
                value = yield effect

        pg.run_queue(racing, "prune a thread")
        (handle,) = late
        assert handle.status() == "queued"
        assert Worker([echo], pg).run_until_idle() == 1
        assert handle.result(timeout=30) == 2


def test_a_schedule_id_is_bounded(saver: Any) -> None:
    """A schedule id of 2,680 random characters was declared on
    PostgreSQL, and then every firing of the workflows' schedules failed
    (its slot's thread id, 30 characters longer, passed the btree index's
    2,704 bytes): one schedule stopped all of them on every worker. Ids are
    at most 200 characters, as queue names."""
    echo = _echo(saver)
    with pytest.raises(InvalidScheduleError, match="at most 200 characters"):
        echo.schedule("x" * 201, every=timedelta(minutes=1))
    assert echo.schedule("x" * 200, every=timedelta(minutes=1)).schedule_id == "x" * 200


def test_the_machines_local_timezone_is_refused(saver: Any) -> None:
    """``timezone="localtime"`` was taken (zoneinfo reads it from
    /etc/localtime): each worker would read the cron fields in its own
    machine's zone, and one without the file could not fire it at all."""
    with pytest.raises(InvalidScheduleError, match="name the zone"):
        _echo(saver).schedule("local", every=timedelta(minutes=1), timezone="localtime")


def test_pregelkit_schedules_lists_where_croniter_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """An operator's machine without croniter: ``pregelkit schedules`` (and
    ``--json``, and ``pause``) failed with an internal error and a
    traceback on the first cron schedule (``pause`` after pausing it), for
    the next fire times after the stored one. Now they show the stored next
    slot and say why no more; ``resume``, which computes a cron slot, is an
    error naming the install."""
    import json
    import sys
    import threading

    from pregelkit.checkpoint import _slots
    from pregelkit.cli import main

    path = str(tmp_path / "ops.db")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        echo = _echo(saver)
        with FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC)):
            echo.schedule("nightly", cron="0 3 * * *")
            echo.schedule("often", every=timedelta(minutes=5))
    monkeypatch.setitem(sys.modules, "croniter", None)
    monkeypatch.setattr(_slots, "_walkers", threading.local())
    capfd.readouterr()
    assert main(["schedules", "--db", path, "--wide"]) == 0
    out = capfd.readouterr().out
    assert "2026-11-30 03:00:00 UTC  " in out and "pregelkit[schedules]" in out
    assert main(["schedules", "--db", path, "--json"]) == 0
    nightly, often = (json.loads(line) for line in capfd.readouterr().out.splitlines())
    assert nightly["next_fire_times"] == ["2026-11-30T03:00:00Z"]
    assert len(often["next_fire_times"]) == 3
    assert main(["schedules", "pause", "nightly", "--db", path]) == 0
    assert main(["schedules", "resume", "nightly", "--db", path]) == 2
    assert "pregelkit[schedules]" in capfd.readouterr().err


def test_command_line_durations_and_priorities(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``--older-than 6M`` read as 6 minutes (the unit was lowercased), so
    a prune meant to keep six months kept each thread's latest checkpoint
    only: ``M`` is now refused, saying so. ``pregelkit submit --priority``
    past 32 bits was an internal error with a traceback: now a usage error."""
    import argparse

    from pregelkit.cli import main
    from pregelkit.cli._options import duration

    with pytest.raises(argparse.ArgumentTypeError, match="months are no unit"):
        duration("6M")
    assert duration("6m") == 360 and duration("2H") == 7200
    path = str(tmp_path / "p.db")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
    capfd.readouterr()
    assert main(["prune", "--db", path, "--older-than", "6M"]) == 2
    assert "months are no unit" in capfd.readouterr().err
    code = main(["submit", "fleet_flows:chain", "--input", "1", "--thread", "t", "--db", path,
                 "--priority", str(2**31)])  # fmt: skip
    err = capfd.readouterr().err
    assert code == 2 and "--priority is between" in err and "Traceback" not in err


def test_keep_checkpoints_is_bounded(saver: Any) -> None:
    """``RetentionPolicy(keep_checkpoints=2**63)`` was taken, and the prune
    failed in the database (SQLite: OverflowError converting it)."""
    from pregelkit.durable import RetentionPolicy, prune

    with pytest.raises(ValueError, match="at most 2147483647"):
        RetentionPolicy(keep_checkpoints=2**63)
    _echo(saver).invoke(1, {"configurable": {"thread_id": "t"}})
    assert prune(saver, RetentionPolicy(keep_checkpoints=2**31 - 1)).threads_deleted == 0


@pytest.mark.parametrize("cron", ["R * * * *", "0 r * * *", "R(0-29) 3 * * *", "0 0 * * 1,R"])
def test_a_random_cron_field_is_refused(saver: Any, cron: str) -> None:
    """croniter reads ``R`` as a random value, drawn in each process: ``R *
    * * *`` was taken, and each worker computed its own minute (three
    processes listed 22:48, 22:25, 22:54), so each fired its own slots."""
    with pytest.raises(InvalidScheduleError, match="random"):
        _echo(saver).schedule("random", cron=cron)
    assert _echo(saver).schedule("names", cron="0 3 * mar-apr fri").cron == "0 3 * mar-apr fri"


def test_schedules_queues_and_prunes_together(saver: Any) -> None:
    """The three parts at once, each minute for ten: a schedule fires, a
    limited queue takes submits (each dedup id twice), a worker serves
    both, and a prune that deletes ended threads and runs at once goes
    between. Every slot runs once on its own thread, a dedup id stands for
    its active run, and once that run ended (and was pruned) queues anew."""
    from pregelkit.checkpoint.runs import list_runs
    from pregelkit.durable import RetentionPolicy, prune
    from pregelkit.worker import Worker

    echo = _echo(saver)
    queue = durable.Queue("q", concurrency=1, rate_limit=(3, 60))
    policy = RetentionPolicy(ended_runs_max_age=0, delete_threads_after=0, keep_checkpoints=1)
    slots: list[str] = []
    with FakeClock(datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)) as clock:
        echo.schedule("minutely", every=timedelta(minutes=1))
        durable.declare_queue(saver, queue)
        worker = Worker([echo], saver, queues=[queue])
        for minute in range(10):
            clock.advance(61)  # past the rate window of the last minute's starts
            for n in range(3):
                first = echo.submit(n, {"configurable": {"thread_id": f"m{minute}-{n}"}},
                                    queue="q", dedup_id=f"d{n}")  # fmt: skip
                again = echo.submit(n, {"configurable": {"thread_id": f"x{minute}-{n}"}},
                                    queue="q", dedup_id=f"d{n}")  # fmt: skip
                assert again == first and first.thread_id == f"m{minute}-{n}"
            assert worker.run_until_idle() == 4
            runs = list_runs(saver)
            slots += [r.thread_id for r in runs if r.thread_id.startswith("schedule:")]
            assert sorted(r.thread_id for r in runs if r.queue == "q") == [
                f"m{minute}-{n}" for n in range(3)
            ]
            prune(saver, policy)
    assert len(slots) == len(set(slots)) == 10
