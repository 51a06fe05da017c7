"""``pregelkit runs`` shows each declared queue's limits and what runs
against them, and says which limit holds each queued run; ``pregelkit
submit --queue --key --dedup-id --debounce`` and ``pregelkit worker
--queue`` (durations: 30s, 5m, 2h, 30d)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint import _queues, _runqueue
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.cli import main
from pregelkit.cli._options import duration
from pregelkit.durable import Queue, declare_queue


def run_cli(capfd: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capfd.readouterr()
        assert "Traceback" not in err, err
        return code, out, err

    return run


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("1.5h", 5400), ("30d", 2592000), ("2H", 7200)]
)
def test_durations_take_s_m_h_d(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["30", "5w", "m", "-1s", "0s", "infs"])
def test_a_bad_duration_says_how_to_write_one(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="duration"):
        duration(text)


def test_runs_shows_queues_and_what_holds_each_queued_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cli = run_cli(capfd)
    db = str(tmp_path / "q.db")
    with SqliteSaver.from_conn_string(db) as saver:
        saver.setup()
        declare_queue(saver, Queue("emails", concurrency=1, rate_limit=(10, 60)))
        declare_queue(saver, Queue("per-customer", key_concurrency=1))
    code, out, err = cli(
        "submit", "fleet_flows:chain", "--input", "1", "--thread", "e1", "--db", db,
        "--queue", "emails",
    )  # fmt: skip
    assert code == 0, err
    cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "e2", "--db", db,
        "--queue", "emails")  # fmt: skip
    cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "c1", "--db", db,
        "--queue", "per-customer", "--key", "acme")  # fmt: skip
    cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "c2", "--db", db,
        "--queue", "per-customer", "--key", "acme")  # fmt: skip
    cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "d1", "--db", db,
        "--queue", "per-customer", "--key", "zed", "--debounce", "1h")  # fmt: skip
    code, out, _ = cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "x", "--db", db,
        "--queue", "emails", "--dedup-id", "e-1", "--json")  # fmt: skip
    first = json.loads(out)["run_id"]
    code, out, _ = cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "y", "--db", db,
        "--queue", "emails", "--dedup-id", "e-1", "--json")  # fmt: skip
    assert json.loads(out)["run_id"] == first and json.loads(out)["thread_id"] == "x"
    with SqliteSaver.from_conn_string(db) as saver:

        def take(d: Any) -> Any:
            return _queues.claim(d, "w1", ["chain"], ["emails", "per-customer"], 2, 300)

        taken = saver.run_queue(take, "claim")
        saver.run_queue(lambda d: _runqueue.heartbeat(d, "w1", ["chain"], [], 300), "live")
        assert sorted(c.thread_id for c in taken) == ["c1", "e1"]

    code, out, err = cli("runs", "--db", db, "--wide")
    assert code == 0, err
    assert "QUEUE" in out and "LIMITS" in out
    assert "concurrency 1, 10 starts per 60s" in out and "1 per key" in out
    assert "1/10 in 60s" in out and "acme 1" in out
    assert "queue 'emails' at its concurrency (1/1 running)" in out
    assert "key 'acme' at the key_concurrency of queue 'per-customer' (1/1 running)" in out
    assert "debounced: starts at" in out
    assert "start a worker" not in out  # one serves the workflow

    code, out, _ = cli("runs", "--db", db, "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    queues = {q["queue"]: q for q in lines if q.get("event") == "queue"}
    assert queues["emails"]["running"] == 1 and queues["emails"]["rate_limit"] == [10, 60]
    runs = {r["thread_id"]: r for r in lines if "thread_id" in r}
    assert runs["c2"]["queue"] == "per-customer" and runs["c2"]["queue_key"] == "acme"


def test_submit_mistakes_name_the_options(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cli = run_cli(capfd)
    db = str(tmp_path / "q.db")
    code, _, err = cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "t",
        "--db", db, "--key", "k")  # fmt: skip
    assert code == 2 and "needs queue=" in err and "--queue" in err
    code, _, err = cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "t",
        "--db", db, "--queue", "nope")  # fmt: skip
    assert code != 0 and "queue 'nope' was never declared" in err
    code, _, err = cli("submit", "fleet_flows:chain", "--input", "1", "--thread", "t",
        "--db", db, "--queue", "nope", "--key", "k", "--debounce", "5")  # fmt: skip
    assert code == 2 and "not a duration" in err
