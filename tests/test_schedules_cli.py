"""``pregelkit schedules``: the table with next fire times, pause, resume,
delete and trigger, and the errors an operator's typo gets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.runs import list_runs
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.cli import main
from pregelkit.func import entrypoint
from pregelkit.testing import FakeClock

START = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)


def _cli(capfd: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(list(words))
    captured = capfd.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def db(tmp_path: Path) -> Any:
    path = str(tmp_path / "app.db")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()

        @entrypoint(checkpointer=saver)
        def report(value: Any) -> Any:
            return value

        with FakeClock(START):
            report.schedule("nightly", cron="0 3 * * *", timezone="Europe/Berlin")
            report.schedule("often", every=timedelta(minutes=5), input=[1])
        yield path, saver


def test_the_table_shows_each_schedule_with_its_next_three_fire_times(
    db: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    path, _ = db
    with FakeClock(START):
        code, out, _ = _cli(capfd, "schedules", "--db", path, "--wide")
    assert code == 0
    header, _, nightly, often = out.splitlines()
    assert header.split() == ["ID", "WORKFLOW", "SPEC", "TZ", "STATE", "NEXT", "FIRE", "TIMES",
                              "LAST", "FIRED"]  # fmt: skip
    assert "0 3 * * *" in nightly and "Europe/Berlin" in nightly
    assert "2026-11-30 03:00:00 CET, 2026-12-01 03:00:00 CET, 2026-12-02 03:00:00 CET" in nightly
    assert "every 5m" in often
    assert "2026-11-29 12:05:00 UTC, 2026-11-29 12:10:00 UTC, 2026-11-29 12:15:00 UTC" in often
    code, out, _ = _cli(capfd, "schedules", "list", "--db", path, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["schedule_id"] for r in rows] == ["nightly", "often"]
    assert rows[0]["next_fire_times"][0] == "2026-11-30T02:00:00Z"


def test_pause_resume_trigger_and_delete(db: Any, capfd: pytest.CaptureFixture[str]) -> None:
    path, saver = db
    code, out, _ = _cli(capfd, "schedules", "pause", "often", "--db", path)
    assert (code, out) == (0, "schedule often paused\n")
    _, out, _ = _cli(capfd, "schedules", "--db", path)
    assert "paused" in out.splitlines()[-1]
    code, out, _ = _cli(capfd, "schedules", "resume", "often", "--db", path)
    assert code == 0 and out.startswith("schedule often resumed; next fire at ")
    code, out, _ = _cli(capfd, "schedules", "trigger", "often", "--db", path, "--json")
    event = json.loads(out)
    assert event["event"] == "trigger" and event["thread_id"].startswith("schedule:often:trigger:")
    assert [r.thread_id for r in list_runs(saver)] == [event["thread_id"]]
    code, out, _ = _cli(capfd, "schedules", "delete", "often", "--db", path)
    assert (code, out) == (0, "schedule often deleted (runs it queued still run)\n")
    assert [s.schedule_id for s in durable.schedules(saver)] == ["nightly"]


def test_mistakes_exit_2_saying_what_to_do(db: Any, capfd: pytest.CaptureFixture[str]) -> None:
    path, _ = db
    code, _, err = _cli(capfd, "schedules", "pause", "nigthly", "--db", path)
    assert code == 2 and "no schedule 'nigthly'" in err and "schedules list" in err
    code, out, _ = _cli(capfd, "schedules", "trigger", "x", "--db", path, "--json")
    assert code == 2 and json.loads(out)["error"]["type"] == "unknown_schedule"
    code, _, err = _cli(capfd, "schedules", "resume", "--db", path)
    assert code == 2 and "needs the schedule's ID" in err
    code, _, err = _cli(capfd, "schedules", "list", "nightly", "--db", path)
    assert code == 2 and "takes no ID" in err
    code, _, err = _cli(capfd, "schedules", "stop", "nightly", "--db", path)
    assert code == 2 and "invalid choice: 'stop'" in err


def test_a_schedule_no_worker_fires_is_shown_overdue(
    db: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    path, _ = db
    with FakeClock(START + timedelta(minutes=10)):
        _, out, _ = _cli(capfd, "schedules", "--db", path, "--wide")
    lines = out.splitlines()
    assert "overdue" in lines[3] and "active" in lines[2]  # often is; nightly is not due yet
    hint = "no worker fires 'report''s schedules: start one: pregelkit worker MODULE:report"
    assert lines[4] == f"{hint} --db {path}"
