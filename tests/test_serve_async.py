"""``async def`` workflows served: ``pregelkit serve`` runs them on an
``AsyncWorker`` (an async saver, an event loop in a thread of its own)
beside the ``Worker`` of its sync workflows, and ``pregelkit worker`` does
too; driven by LangGraph's client, sync and async, on SQLite and
PostgreSQL: waits, streams of custom parts and updates, an interrupt and its
answer, a cancel mid-run, and a SIGTERM that hands a run back to the next
server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client

from test_serve import FLOWS, Server, _env

ASYNC_FLOWS = Path(__file__).with_name("serve_async_flows.py")
GRAPHS = {
    "atalk": f"{ASYNC_FLOWS}:atalk",
    "aask": f"{ASYNC_FLOWS}:aask",
    "aslow": f"{ASYNC_FLOWS}:aslow",
    "echo": f"{FLOWS}:echo",  # a sync one, served beside them by the sync worker
}
TALK = [{"i": 0, "tripled": 0}, {"i": 1, "tripled": 3}, {"i": 2, "tripled": 6}]


def _config(tmp: Path) -> str:
    path = tmp / "pregelkit.json"
    path.write_text(json.dumps({"graphs": GRAPHS}))
    return str(path)


def _db(request: pytest.FixtureRequest, tmp: Path, name: str) -> str:
    if request.param == "sqlite":
        return str(tmp / f"{name}.sqlite")
    url: str = request.getfixturevalue("postgres_database")(f"pregelkit_{name}")
    return url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve_async")
    db = _db(request, tmp, "serve_async")
    srv = Server(["--config", _config(tmp), "--db", db, "--concurrency", "4"], tmp)
    yield srv
    srv.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _db(request, tmp_path, f"serve_async_{request.node.name.split('[')[0][-20:]}")


def _until_running(client: Any, tid: str, run_id: str) -> None:
    deadline = time.monotonic() + 30
    while client.runs.get(tid, run_id)["status"] != "running":
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)


def test_wait_and_stream_custom_and_updates_with_the_sync_client(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    assert client.runs.wait(tid, "atalk", input={"n": 3}) == {"total": 9}
    assert client.threads.get(tid)["values"] == {"total": 9}
    # the sync workflow runs on the sync worker, at the same time
    assert client.runs.wait(None, "echo", input={"n": 2}) == {"n": 2, "doubled": 4}
    tid = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(tid, "atalk", input={"n": 3}, stream_mode=["custom", "updates"])
    )
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    assert [p.data for p in parts if p.event == "custom"] == TALK
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates == [{"atriple": 0}, {"atriple": 3}, {"atriple": 6}, {"atalk": {"total": 9}}]
    # parts come in the order the run emitted them
    assert [p.event for p in parts[1:-1]] == ["updates", "custom"] * 3 + ["updates"]


def test_the_async_client_streams_and_answers_an_interrupt(server: Server) -> None:
    async def main() -> None:
        client = get_client(url=server.url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        talk = (await client.threads.create())["thread_id"]
        custom = [
            p.data
            async for p in client.runs.stream(talk, "atalk", input={"n": 3}, stream_mode="custom")
            if p.event == "custom"
        ]
        assert custom == TALK
        asked = [
            p.data
            async for p in client.runs.stream(
                tid, "aask", input={"what": "q1"}, stream_mode="updates"
            )
            if p.event == "updates"
        ]
        [interrupt] = [d["__interrupt__"] for d in asked if "__interrupt__" in d]
        assert interrupt[0]["value"] == {"question": "publish q1?"} and interrupt[0]["id"]
        assert (await client.threads.get(tid))["status"] == "interrupted"
        answer = await client.runs.wait(tid, "aask", command={"resume": "yes"})
        assert answer == {"answer": "yes", "tripled": 9}
        assert (await client.threads.get(tid))["status"] == "idle"

    asyncio.run(main())


def test_an_interrupt_answered_with_the_sync_client(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    asked = client.runs.wait(tid, "aask", input={"what": "q2"})
    assert asked["__interrupt__"][0]["value"] == {"question": "publish q2?"}
    answered = list(
        client.runs.stream(tid, "aask", command={"resume": "no"}, stream_mode=["values"])
    )
    assert [p.data for p in answered if p.event == "values"][-1] == {"answer": "no", "tripled": 6}


def test_a_cancel_stops_an_async_run_mid_way(server: Server) -> None:
    async def main() -> None:
        client = get_client(url=server.url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(tid, "aslow", input={"seconds": 30})
        _until_running(get_sync_client(url=server.url, api_key=None), tid, run["run_id"])
        started = time.monotonic()
        await client.runs.cancel(tid, run["run_id"], wait=True)
        assert time.monotonic() - started < 10  # at its next task, not after 30 s
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
        # the thread serves the next run
        assert await client.runs.wait(tid, "aslow", input={"seconds": 0.1}) == {"slept": 0.1}

    asyncio.run(main())


def test_sigterm_hands_an_async_run_back_and_the_next_server_finishes_it(
    db: str, tmp_path: Path
) -> None:
    args = ["--config", _config(tmp_path), "--db", db]
    first = Server(args, tmp_path)
    client = get_sync_client(url=first.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "aslow", input={"seconds": 2.0})
    _until_running(client, tid, run["run_id"])
    out, err = first.stop()  # exits 0 once the run's started task ended and it went back
    assert "stopped" in out
    assert f"run {run['run_id']} (thread {tid}, aslow): handed back (stopping)" in err
    second = Server(args, tmp_path)
    try:
        client = get_sync_client(url=second.url, api_key=None)
        assert client.runs.join(tid, run["run_id"]) == {"slept": 2.0}
        assert client.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        second.stop()


def test_pregelkit_worker_serves_async_and_sync_workflows(db: str, tmp_path: Path) -> None:
    """A server with ``--no-workers`` and a ``pregelkit worker`` given an
    async and a sync workflow: one worker of each kind, each running its own."""
    server = Server(["--config", _config(tmp_path), "--db", db, "--no-workers"], tmp_path)
    served = [GRAPHS["atalk"], GRAPHS["echo"]]
    worker = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "worker", *served, "--db", db, "--json"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = get_sync_client(url=server.url, api_key=None)
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "atalk", input={"n": 3}, stream_mode="custom"))
        assert [p.data for p in parts if p.event == "custom"] == TALK
        assert client.runs.wait(None, "echo", input={"n": 1}) == {"n": 1, "doubled": 2}
    finally:
        worker.terminate()
        out, err = worker.communicate(timeout=60)
        server.stop()
    assert worker.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    started = [e for e in events if e["event"] == "worker"]
    assert sorted(e["serves"] for e in started) == [["atalk"], ["echo"]]
    stopped = {e["worker_id"] for e in events if e["event"] == "stopped"}
    assert stopped == {e["worker_id"] for e in started}
