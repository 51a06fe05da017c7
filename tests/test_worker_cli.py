"""``pregelkit submit``, ``runs``, ``cancel`` of queued runs, and ``worker``'s
refusals (in-process ``main``; serving itself, through ``pregelkit worker``
subprocesses, is exercised by test_worker_processes.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pregelkit.cli import main


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> Callable[..., Done]:
    def run(*args: str) -> Done:
        code = main(list(args))
        out, err = capfd.readouterr()
        assert "Traceback" not in err, err
        return Done(code, out, err)

    return run


def test_submit_runs_and_cancel_from_the_command_line(
    tmp_path: Path, cli: Callable[..., Done]
) -> None:
    db = str(tmp_path / "q.db")
    first = cli("submit", "fleet_flows:chain", "--input", "3", "--thread", "c1", "--db", db)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("run ") and first.stdout.rstrip().endswith(
        "of thread c1: queued"
    )
    again = cli(
        "submit", "fleet_flows:chain", "--input", "4", "--thread", "c1", "--db", db, "--json"
    )
    event = json.loads(again.stdout)
    assert event["event"] == "submitted" and event["status"] == "queued"
    assert first.stdout.split()[1] == event["run_id"]  # one run per thread while queued
    cli("submit", "fleet_flows:slow", "--input", "[0.1]", "--thread", "s1", "--db", db)

    listed = cli("runs", "--db", db, "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {r["thread_id"]: r for r in map(json.loads, listed.stdout.splitlines())}
    assert set(runs) == {"c1", "s1"}
    assert runs["c1"]["status"] == "queued" and runs["c1"]["workflow"] == "chain"
    assert "no live worker serves workflow 'chain'" in runs["c1"]["waiting"]
    table = cli("runs", "--db", db)
    assert "THREAD" in table.stdout and "no live worker serves workflow 'slow'" in table.stdout

    cancelled = cli("cancel", "c1", "--db", db)
    assert cancelled.returncode == 0, cancelled.stderr
    only = cli("runs", "--db", db, "--status", "cancelled", "--json")
    assert [json.loads(line)["thread_id"] for line in only.stdout.splitlines()] == ["c1"]
    assert cli("runs", "--db", db, "--status", "done").stdout == "no runs with status done\n"


def test_mistakes_exit_2_and_say_what_to_do(tmp_path: Path, cli: Callable[..., Done]) -> None:
    db = str(tmp_path / "q.db")
    bad = cli("worker", "fleet_flows:chain", "--db", db, "--concurrency", "0")
    assert bad.returncode == 2 and "--concurrency must be at least 1" in bad.stderr
    bad = cli("worker", "fleet_flows:chain", "fleet_flows:chain", "--db", db)
    assert bad.returncode == 2 and "same name" in bad.stderr
    bad = cli("submit", "fleet_flows:chain", "--input", "{oops", "--thread", "t", "--db", db)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr
    bad = cli("runs", "--db", db, "--status", "finished")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    secret = "postgresql://app:hunter2@127.0.0.1:1/app?connect_timeout=1"
    bad = cli("runs", "--db", secret, "--json")
    assert bad.returncode == 2
    assert "hunter2" not in bad.stdout + bad.stderr
    assert json.loads(bad.stdout)["error"]["type"] == "database"
