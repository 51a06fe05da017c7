"""``pregelkit serve``'s crons driven by LangGraph's own client, sync and
async, on SQLite and PostgreSQL: create, create_for_thread, search, count,
update and delete, each cron seen only by its API key, and firings on the
fleet's schedules: a thread cron's runs on its thread one at a time (a
firing that finds the last one running is skipped), a stateless cron's each
on a new thread. The server runs under a ``FakeClock`` (its
``PREGELKIT_FAKE_CLOCK`` reaches the server's process and its in-process
worker), so a firing five minutes away comes at ``advance()``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from pregelkit.checkpoint.runs import RunHandle, RunRecord, list_runs
from pregelkit.cli._db import open_database
from pregelkit.testing import FakeClock
from test_serve import FLOWS, Server

GRAPHS = ("echo", "slow")
START = datetime(2031, 3, 4, 5, 1, 30, tzinfo=UTC)
"""The fake clock's start: the next ``*/5`` slot is 05:05."""
KEY, OTHER = "k1", "k2"


class Served:
    """The server, its database and the clock it goes by."""

    def __init__(self, server: Server, db: str, clock: FakeClock) -> None:
        self.server, self.db, self.clock = server, db, clock
        self.url = server.url

    def fire(self, cron: dict[str, Any]) -> None:
        """Move the clock a second past the cron's next firing."""
        due = datetime.fromisoformat(cron["next_run_date"]).timestamp()
        self.clock.advance(timedelta(seconds=max(due - self.clock.now(), 0) + 1))

    def runs_of(self, thread_prefix: str) -> list[RunRecord]:
        with open_database(self.db, create=False) as db:
            return [r for r in list_runs(db.saver) if r.thread_id.startswith(thread_prefix)]

    def result(self, run: RunRecord) -> Any:
        with open_database(self.db, create=False) as db:
            return RunHandle(db.saver, run.run_id, run.thread_id).result(timeout=30)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("crons")
    config = tmp / "pregelkit.json"
    config.write_text(json.dumps({"graphs": {g: f"{FLOWS}:{g}" for g in GRAPHS}}))
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_crons")
    # entered first: the server's process inherits PREGELKIT_FAKE_CLOCK
    with FakeClock(START, skip_sleeps=False) as clock:
        args = ["--config", str(config), "--db", db, "--auth-key", KEY, "--auth-key", OTHER]
        srv = Server(args, Path(tmp))
        try:
            yield Served(srv, db, clock)
        finally:
            srv.stop()


def _until(condition: Callable[[], Any], seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def test_a_thread_cron_fires_on_its_thread_one_run_at_a_time(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=KEY)
    assert client.http.get("/info")["flags"]["crons"] is True
    tid = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        tid, "echo", schedule="*/5 * * * *", input={"n": 2}, metadata={"team": "ops"}
    )
    assert uuid.UUID(cron["cron_id"]) and cron["thread_id"] == tid
    assert cron["assistant_id"] == client.assistants.get("echo")["assistant_id"]
    assert cron["schedule"] == "*/5 * * * *" and cron["enabled"] is True
    assert cron["metadata"] == {"team": "ops"} and cron["payload"]["input"] == {"n": 2}
    slot = datetime.fromisoformat(cron["next_run_date"])
    assert slot.minute % 5 == 0 and slot.second == 0 and slot.timestamp() > served.clock.now()
    assert client.crons.search(thread_id=tid) == [cron]

    served.fire(cron)
    [run] = _until(lambda: [r for r in client.runs.list(tid) if r["status"] == "success"])
    assert run["assistant_id"] == cron["assistant_id"]
    assert client.threads.get_state(tid)["values"] == {"n": 2, "doubled": 4}
    [after] = client.crons.search(thread_id=tid)
    assert datetime.fromisoformat(after["next_run_date"]) == slot + timedelta(minutes=5)

    # a slow run still running at the next firing: that firing is skipped
    busy = client.threads.create()["thread_id"]
    slow = client.crons.create_for_thread(busy, "slow", schedule="* * * * *", input={"seconds": 3})
    served.fire(slow)
    _until(lambda: client.runs.list(busy))
    [waiting] = client.crons.search(thread_id=busy)
    served.fire(waiting)
    _until(
        lambda: client.crons.search(thread_id=busy)[0]["next_run_date"] != waiting["next_run_date"]
    )
    [first] = client.runs.list(busy)
    assert first["status"] in ("pending", "running")  # the skipped slot queued nothing
    assert client.runs.join(busy, first["run_id"]) == {"slept": 3.0}
    served.fire(client.crons.search(thread_id=busy)[0])
    _until(lambda: len(client.runs.list(busy)) == 2)

    client.crons.delete(slow["cron_id"])
    client.threads.delete(tid)  # its cron goes with it
    assert client.crons.search(assistant_id="echo") == []
    with pytest.raises(NotFoundError):
        client.crons.delete(cron["cron_id"])


def test_a_stateless_cron_runs_each_firing_on_a_new_thread(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=KEY)
    cron = client.crons.create("echo", schedule="*/5 * * * *", input={"n": 3})
    assert cron["thread_id"] is None and cron["on_run_completed"] == "delete"
    prefix = f"schedule:{cron['cron_id']}:"
    served.fire(cron)
    [first] = _until(lambda: served.runs_of(prefix))
    assert served.result(first) == {"n": 3, "doubled": 6}
    served.fire(client.crons.search()[0])
    runs = _until(lambda: (found := served.runs_of(prefix)) and len(found) == 2 and found)
    assert len({r.thread_id for r in runs}) == 2
    client.crons.delete(cron["cron_id"])
    served.clock.advance(timedelta(minutes=5))
    time.sleep(0.3)  # a worker looks every 0.05 s under a fake clock: nothing fires now
    assert len(served.runs_of(prefix)) == 2


def test_search_count_update_and_each_key_sees_only_its_crons(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=KEY)
    other = get_sync_client(url=served.url, api_key=OTHER)
    tid = client.threads.create()["thread_id"]
    on_thread = client.crons.create_for_thread(tid, "echo", schedule="0 * * * *", input={})
    daily = client.crons.create("echo", schedule="0 3 * * *", metadata={"kind": "daily"})
    ids = {on_thread["cron_id"], daily["cron_id"]}
    assert {c["cron_id"] for c in client.crons.search(assistant_id="echo")} == ids
    assert client.crons.count(assistant_id="echo") == 2
    assert client.crons.count(metadata={"kind": "daily"}) == 1
    assert client.crons.search(thread_id=tid, select=["cron_id"]) == [
        {"cron_id": on_thread["cron_id"]}
    ]
    newest_first = client.crons.search(sort_by="created_at", sort_order="desc", limit=1)
    assert [c["cron_id"] for c in newest_first] == [daily["cron_id"]]
    assert client.crons.search(sort_by="created_at", sort_order="asc", offset=1) == newest_first

    paused = client.crons.update(daily["cron_id"], schedule="30 4 * * *", enabled=False)
    assert paused["enabled"] is False and paused["next_run_date"] is None
    assert paused["schedule"] == "30 4 * * *" and client.crons.search(enabled=False) == [paused]
    resumed = client.crons.update(daily["cron_id"], enabled=True, timezone="Europe/Berlin")
    at = datetime.fromisoformat(resumed["next_run_date"]).astimezone()
    assert (at.hour, at.minute) in ((2, 30), (3, 30)) and resumed["timezone"] == "Europe/Berlin"

    # another key sees none of them, and cannot touch them
    assert other.crons.search() == [] and other.crons.count() == 0
    with pytest.raises(NotFoundError):
        other.crons.delete(daily["cron_id"])
    with pytest.raises(NotFoundError):
        other.crons.update(daily["cron_id"], enabled=False)
    with pytest.raises(NotFoundError):
        other.crons.create_for_thread(tid, "echo", schedule="0 * * * *")

    with pytest.raises(UnprocessableEntityError, match=r"'\*/5 \* \* \*'.*4 fields"):
        client.crons.create("echo", schedule="*/5 * * *")
    with pytest.raises(UnprocessableEntityError, match="Mars/Olympus"):
        client.crons.create("echo", schedule="0 3 * * *", timezone="Mars/Olympus")
    with pytest.raises(NotFoundError, match="assistant"):
        client.crons.create("no-such-graph", schedule="0 3 * * *")
    with pytest.raises(NotFoundError, match="thread"):
        client.crons.create_for_thread(str(uuid.uuid4()), "echo", schedule="0 3 * * *")
    with pytest.raises(UnprocessableEntityError, match="skipped"):
        client.crons.create_for_thread(
            tid, "echo", schedule="0 3 * * *", multitask_strategy="enqueue"
        )
    assert client.crons.count() == 2  # a refused cron left nothing behind
    for cron_id in ids:
        client.crons.delete(cron_id)
    assert client.crons.count() == 0


def test_async_client_creates_fires_and_deletes_a_cron(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=KEY)
        tid = (await client.threads.create())["thread_id"]
        cron = await client.crons.create_for_thread(
            tid, "echo", schedule="*/5 * * * *", input={"n": 5}
        )
        assert await client.crons.search(thread_id=tid) == [cron]
        assert await client.crons.count(thread_id=tid) == 1
        served.fire(cron)
        deadline = time.monotonic() + 30
        while not [r for r in await client.runs.list(tid) if r["status"] == "success"]:
            assert time.monotonic() < deadline, "the cron did not fire"
            await asyncio.sleep(0.05)
        assert (await client.threads.get_state(tid))["values"] == {"n": 5, "doubled": 10}
        updated = await client.crons.update(cron["cron_id"], input={"n": 6})
        assert updated["payload"]["input"] == {"n": 6}
        await client.crons.delete(cron["cron_id"])
        assert await client.crons.search(thread_id=tid) == []

    asyncio.run(scenario())
