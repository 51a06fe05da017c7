"""``pregelkit send`` and how ``runs`` and ``threads`` show runs that sleep or
wait (``pregelkit.durable``), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from pregelkit.checkpoint import _runqueue, _waits, waits
from pregelkit.checkpoint.runs import submit_run
from pregelkit.cli import main


def test_send_queues_a_message_for_recv(
    queue_db: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    url, saver = queue_db
    assert main(["send", "t", '{"ok": true}', "--db", url]) == 0
    assert "sent to thread t on the default topic" in capfd.readouterr().out
    assert main(["send", "t", "2", "--topic", "orders", "--db", url, "--json"]) == 0
    sent = json.loads(capfd.readouterr().out)
    assert sent == {"event": "sent", "thread_id": "t", "topic": "orders"}
    assert waits.take_message(saver, "t", None, "k1") == (True, {"ok": True})
    assert waits.take_message(saver, "t", "orders", "k2") == (True, 2)


def test_send_refuses_bad_json_and_big_messages(
    queue_db: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    url, saver = queue_db
    assert main(["send", "t", "yes", "--db", url]) == 2
    err = capfd.readouterr().err
    assert "JSON is not valid JSON" in err and len(err.strip().splitlines()) == 1
    big = json.dumps("x" * (waits.MAX_MESSAGE_BYTES + 10))
    assert main(["send", "t", big, "--db", url, "--json"]) == 2
    error = json.loads(capfd.readouterr().out)["error"]
    assert error["type"] == "too_large" and "1,048,576-byte limit" in error["message"]
    assert waits.take_message(saver, "t", None, "k") == (False, None)


def test_runs_and_threads_say_what_a_run_waits_for(
    queue_db: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    url, saver = queue_db
    # 2036-11-11 07:06:40 UTC
    due = 2_110_000_000.0  # in the future: not claimed meanwhile
    for thread, kind, topic, at in (
        ("s", "sleep", None, due),
        ("m", "recv", "orders", None),
        ("c", "child", "c/child/0", due),
    ):
        submit_run(saver, "w", 1, {"configurable": {"thread_id": thread}})
        (claimed,) = saver.run_queue(lambda d: _runqueue.claim(d, "me", ["w"], 1, 30), "claim")
        status = "sleeping" if kind == "sleep" else "waiting"
        lease = (claimed.run_id, claimed.fence)
        suspend = partial(
            _waits.suspend, lease=lease, status=status, kind=kind, due_at=at, topic=topic
        )
        saver.run_queue(suspend, "suspend")
    assert main(["runs", "--db", url, "--wide"]) == 0
    out = capfd.readouterr().out
    assert "sleeping" in out and "until 2036-11-11 07:06:40 UTC" in out
    assert "for a message on topic 'orders'" in out
    assert "for child thread 'c/child/0' until 2036-11-11 07:06:40 UTC" in out
    assert main(["runs", "--db", url, "--status", "waiting", "--json"]) == 0
    rows = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert {(r["thread_id"], r["wait_kind"], r["wait_topic"]) for r in rows} == {
        ("m", "recv", "orders"),
        ("c", "child", "c/child/0"),
    }
    assert main(["threads", "--db", url, "--status", "sleeping", "--json"]) == 0
    (row,) = json.loads(capfd.readouterr().out)
    assert (row["thread_id"], row["status"]) == ("s", "sleeping")
    assert row["waits_for"] == "until 2036-11-11 07:06:40 UTC"
    assert main(["threads", "--db", url, "--wide"]) == 0
    assert "waiting for a message on topic 'orders'" in capfd.readouterr().out
    # an active run: the thread cannot be deleted under it, and a cancel ends it
    assert main(["delete", "m", "--db", url]) == 2
    assert "it is waiting (for a message on topic 'orders')" in capfd.readouterr().err
    assert main(["cancel", "m", "--db", url]) == 0
    assert "while it was waiting" in capfd.readouterr().out
