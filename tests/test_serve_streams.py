"""``pregelkit serve``'s streams driven by LangGraph's own client, sync and
async, on SQLite and PostgreSQL: each stream mode, a failed run's
``error``, an interrupt and its answer, a dropped stream resumed with
``join_stream(last_event_id=...)`` with no part lost or repeated, and a
stream joined on a second server process sharing PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError

from test_serve import FLOWS, Server

GRAPHS = ("echo", "ask", "boom", "talk")
ALL_MODES = ["values", "updates", "custom", "tasks", "checkpoints", "debug"]


def _config(tmp: Path) -> Path:
    path = tmp / "pregelkit.json"
    path.write_text(json.dumps({"graphs": {g: f"{FLOWS}:{g}" for g in GRAPHS}}))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str, Path]]:
    tmp = tmp_path_factory.mktemp("streams")
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_streams")
    srv = Server(["--config", str(_config(tmp)), "--db", db, "--concurrency", "4"], tmp)
    yield srv, db, tmp
    srv.stop()


@pytest.fixture
def server(served: tuple[Server, str, Path]) -> Server:
    return served[0]


def _ids(parts: list[Any]) -> list[int]:
    return [int(p.id) for p in parts if p.event not in ("metadata", "end", "error")]


def test_each_mode_in_langgraphs_shapes(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    created: list[Any] = []
    parts = list(
        client.runs.stream(
            tid, "echo", input={"n": 3}, stream_mode=ALL_MODES, on_run_created=created.append
        )
    )
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    run_id = parts[0].data["run_id"]
    assert created[0]["run_id"] == run_id and created[0]["thread_id"] == tid
    ids = _ids(parts)
    assert ids == sorted(set(ids))
    by = {mode: [p.data for p in parts if p.event == mode] for mode in ALL_MODES}
    assert by["values"] == [{"n": 3, "doubled": 6}]
    assert by["updates"] == [{"double": 6}, {"echo": {"n": 3, "doubled": 6}}]
    assert [t["name"] for t in by["tasks"]] == ["echo", "double", "double", "echo"]
    assert by["tasks"][-1]["result"] == {"__end__": {"n": 3, "doubled": 6}}
    assert by["checkpoints"][-1]["values"] == {"n": 3, "doubled": 6}
    assert {d["type"] for d in by["debug"]} == {"checkpoint", "task", "task_result"}
    assert client.runs.get(tid, run_id)["status"] == "success"
    # modes asked one by one, as a string
    custom = list(client.runs.stream(None, "talk", input={"n": 3}, stream_mode="custom"))
    assert [p.data for p in custom if p.event == "custom"] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [p.event for p in custom] == ["metadata", "custom", "custom", "custom", "end"]


def test_a_failed_run_streams_its_error(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    parts = list(client.runs.stream(None, "boom", input={"why": "bad input"}))
    assert [p.event for p in parts] == ["metadata", "error", "end"]
    assert parts[1].data == {"error": "ValueError", "message": "boom: bad input"}


def test_an_interrupt_then_its_answer(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    asked = list(client.runs.stream(tid, "ask", input={"what": "q3"}, stream_mode="updates"))
    [interrupt] = [p.data["__interrupt__"] for p in asked if p.event == "updates"]
    assert interrupt[0]["value"] == {"question": "publish q3?"} and interrupt[0]["id"]
    assert client.threads.get(tid)["status"] == "interrupted"
    answered = list(
        client.runs.stream(tid, "ask", command={"resume": "yes"}, stream_mode=["values"])
    )
    assert [p.data for p in answered if p.event == "values"][-1] == {"what": "q3", "answer": "yes"}
    assert client.threads.get(tid)["status"] == "idle"


def test_a_dropped_stream_resumes_with_no_part_lost_or_repeated(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    got: list[Any] = []
    for part in client.runs.stream(
        tid, "talk", input={"n": 20, "pause": 0.03}, stream_mode="custom", stream_resumable=True
    ):
        got.append(part)
        if len(got) == 6:
            break  # the client goes away; the run goes on
    run_id, last = got[0].data["run_id"], got[-1].id
    # the parts came as the run emitted them, not at its end
    assert client.runs.get(tid, run_id)["status"] == "running"
    rest = list(client.runs.join_stream(tid, run_id, last_event_id=last))
    assert rest[0].event == "metadata" and rest[-1].event == "end"
    said = [p.data["i"] for p in got + rest if p.event == "custom"]
    assert said == list(range(20))
    # from the first part again ("-1"), and only some modes
    again = list(client.runs.join_stream(tid, run_id, last_event_id="-1", stream_mode="custom"))
    assert [p.data["i"] for p in again if p.event == "custom"] == list(range(20))
    # no id: from now on (the run has ended: nothing more to say)
    now = list(client.runs.join_stream(tid, run_id))
    assert [p.event for p in now] == ["metadata", "end"]
    # threads.join_stream: the thread's latest run
    joined = list(client.threads.join_stream(tid, last_event_id="-1"))
    assert [p.data["i"] for p in joined if p.event == "custom"] == list(range(20))


def test_the_async_client_resumes_too(server: Server) -> None:
    async def main() -> None:
        client = get_client(url=server.url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            tid,
            "talk",
            input={"n": 12, "pause": 0.03},
            stream_mode=["custom", "values"],
            stream_resumable=True,
        )
        got: list[Any] = []
        async for part in client.runs.join_stream(tid, run["run_id"], last_event_id="-1"):
            got.append(part)
            if len(got) == 4:
                break
        rest = [
            p async for p in client.runs.join_stream(tid, run["run_id"], last_event_id=got[-1].id)
        ]
        said = [p.data["i"] for p in got + rest if p.event == "custom"]
        assert said == list(range(12))
        assert [p.data for p in rest if p.event == "values"] == [{"said": 12}]
        streamed = [p async for p in client.runs.stream(None, "echo", input={"n": 1})]
        assert [p.event for p in streamed] == ["metadata", "values", "end"]

    asyncio.run(main())


def test_a_mode_not_served_is_a_422(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    with pytest.raises(UnprocessableEntityError):
        list(client.runs.stream(None, "echo", input={}, stream_mode="messages-tuple"))


@pytest.mark.parametrize("served", ["postgres"], indirect=True)  # servers share PostgreSQL
def test_a_stream_joined_on_a_second_server_sharing_postgres(
    served: tuple[Server, str, Path],
) -> None:
    first, db, tmp = served
    second = Server(["--config", str(_config(tmp)), "--db", db, "--no-workers"], tmp)
    try:
        client = get_sync_client(url=first.url, api_key=None)
        other = get_sync_client(url=second.url, api_key=None)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(
            tid, "talk", input={"n": 10, "pause": 0.05}, stream_mode="custom", stream_resumable=True
        )
        parts = list(other.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
        assert [p.data["i"] for p in parts if p.event == "custom"] == list(range(10))
        assert parts[-1].event == "end"
    finally:
        second.stop()


def test_the_client_reconnects_by_itself_when_the_server_restarts(tmp_path: Path) -> None:
    """SIGTERM cuts the stream (no ``end``, not a clean close); the client
    reconnects to the ``Location`` with its last event id once a server is
    back on the address, and gets the rest. The run, handed back by the
    stopping server, is finished by the new one from its last checkpoint:
    what it does again it says again (new ids), so every part comes at
    least once, in order after the restart. Here the new server finishes
    the run before the client reads on: a stream that had closed cleanly
    would make the client ask the run's status, see it ended and stop
    without the parts it missed."""
    config = ["--config", str(_config(tmp_path)), "--db", str(tmp_path / "s.sqlite")]
    first = Server(config, tmp_path)
    client = get_sync_client(url=first.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    said: list[int] = []
    events: list[str] = []
    second: Server | None = None
    try:
        for part in client.runs.stream(
            tid,
            "talk",
            input={"n": 30, "pause": 0.05},
            stream_mode="custom",
            stream_resumable=True,
        ):
            events.append(part.event)
            if part.event == "custom":
                said.append(part.data["i"])
                if len(said) == 5 and second is None:
                    _, err = first.stop()
                    assert "ERROR" not in err and "cut 1 open stream" in err
                    second = Server(config, tmp_path, port=first.port)
                    other = get_sync_client(url=second.url, api_key=None)
                    run_id = client.runs.list(tid)[0]["run_id"]
                    assert other.runs.join(tid, run_id)["said"] == 30
        assert events[-1] == "end"
        assert said[:5] == list(range(5)) and sorted(set(said)) == list(range(30))
        assert said[-1] == 29
        assert client.runs.list(tid)[0]["status"] == "success"
    finally:
        if second is not None:
            second.stop()


def test_a_stateless_stream_dropped_cancels_its_run(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    created: list[Any] = []
    stream = client.runs.stream(
        None,
        "talk",
        input={"n": 100, "pause": 0.05},
        stream_mode="custom",
        on_completion="keep",  # its run stays to be read (else its thread goes once it stops)
        on_run_created=created.append,
    )
    for part in stream:
        if part.event == "custom":
            break  # on_disconnect defaults to 'cancel' for a stateless run
    stream.close()
    tid, rid = created[0]["thread_id"], created[0]["run_id"]
    deadline = time.monotonic() + 20
    while client.runs.get(tid, rid)["status"] not in ("interrupted", "error", "success"):
        assert time.monotonic() < deadline, "the run was not cancelled"
        time.sleep(0.1)
    assert client.runs.get(tid, rid)["status"] == "interrupted"
