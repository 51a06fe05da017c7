"""``pregelkit serve``'s run lifecycle driven by LangGraph's own client,
sync and async, on SQLite and PostgreSQL: stateless runs (background,
wait, stream) on a temporary thread deleted once the run ends
(``on_completion="delete"``, the default) or kept (``"keep"``), a client
that goes away in the middle of a stateless wait (``on_disconnect``), and
``runs.delete``; attacked with unknown runs, another key's runs, a
stateless run that fails and one that stops at an interrupt."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from test_serve import FLOWS, UNKNOWN_RUN, Server

# one workflow under several graph ids: a test finds its temporary thread by
# the graph id its metadata records (no other test runs that graph)
GRAPHS = {
    "echo": "echo",
    "ask": "ask",
    "boom": "boom",
    "slow": "slow",
    "slow_continue": "slow",
    "slow_cancel": "slow",
    "slow_gone": "slow",
}
KEYS = ("k1", "k2")


def _config(tmp: Path) -> Path:
    path = tmp / "pregelkit.json"
    path.write_text(json.dumps({"graphs": {g: f"{FLOWS}:{f}" for g, f in GRAPHS.items()}}))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("stateless")
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_stateless")
    keys = [arg for k in KEYS for arg in ("--auth-key", k)]
    args = ["--config", str(_config(tmp)), "--db", db, "--concurrency", "4", *keys]
    srv = Server(args, tmp)
    yield srv
    srv.stop()


def _client(server: Server, key: str | None = "k1", **kwargs: Any) -> Any:
    return get_sync_client(url=server.url, api_key=key, **kwargs)


def _until(check: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


def _gone(client: Any, thread_id: str) -> bool:
    try:
        client.threads.get(thread_id)
    except NotFoundError:
        return True
    return False


def _the_thread_of(client: Any, graph_id: str) -> str:
    """The one thread of ``graph_id`` (a temporary thread while it lives)."""
    found: list[dict[str, Any]] = []

    def one() -> bool:
        found[:] = client.threads.search(metadata={"graph_id": graph_id})
        return len(found) == 1

    _until(one, f"one thread of {graph_id}")
    return str(found[0]["thread_id"])


def test_a_background_stateless_run_is_joined_then_its_thread_deleted(server: Server) -> None:
    client = _client(server)
    run = client.runs.create(None, "slow", input={"seconds": 1.0}, metadata={"who": "ann"})
    tid, rid = run["thread_id"], run["run_id"]
    assert uuid.UUID(tid) and run["status"] in ("pending", "running")
    assert run["metadata"] == {"who": "ann"}
    assert client.runs.get(tid, rid)["run_id"] == rid
    assert client.threads.get(tid)["status"] == "busy"  # the temporary thread, while it runs
    assert client.runs.join(tid, rid) == {"slept": 1.0}
    _until(lambda: _gone(client, tid), "the temporary thread deleted")
    with pytest.raises(NotFoundError):
        client.runs.get(tid, rid)

    kept = client.runs.create(None, "echo", input={"n": 2}, on_completion="keep")
    assert client.runs.join(kept["thread_id"], kept["run_id"]) == {"n": 2, "doubled": 4}
    assert client.runs.get(kept["thread_id"], kept["run_id"])["status"] == "success"
    thread = client.threads.get(kept["thread_id"])
    assert thread["values"] == {"n": 2, "doubled": 4} and thread["status"] == "idle"
    # a kept thread is an ordinary thread: it runs again
    assert client.runs.wait(kept["thread_id"], "echo", input={"n": 3})["doubled"] == 6


def test_stateless_wait_and_stream_honour_on_completion_async(server: Server) -> None:
    async def main() -> None:
        client = get_client(url=server.url, api_key="k1")
        created: list[dict[str, Any]] = []
        answer = await client.runs.wait(
            None, "echo", input={"n": 1}, on_completion="keep", on_run_created=created.append
        )
        assert answer == {"n": 1, "doubled": 2}
        kept = created.pop()["thread_id"]
        assert (await client.threads.get(kept))["values"] == answer

        await client.runs.wait(None, "echo", input={"n": 1}, on_run_created=created.append)
        with pytest.raises(NotFoundError):  # deleted before the answer
            await client.threads.get(created.pop()["thread_id"])

        parts = [
            p
            async for p in client.runs.stream(
                None, "echo", input={"n": 4}, on_completion="keep", on_run_created=created.append
            )
        ]
        assert [p.event for p in parts][-2:] == ["values", "end"]
        assert parts[-2].data == {"n": 4, "doubled": 8}
        assert (await client.threads.get(created.pop()["thread_id"]))["values"]["doubled"] == 8
        [p async for p in client.runs.stream(None, "echo", input={}, on_run_created=created.append)]
        with pytest.raises(NotFoundError):
            await client.threads.get(created.pop()["thread_id"])

        run = await client.runs.create(None, "slow", input={"seconds": 0.5})
        assert await client.runs.join(run["thread_id"], run["run_id"]) == {"slept": 0.5}
        with pytest.raises(UnprocessableEntityError, match="on_completion"):
            await client.runs.create(None, "echo", input={}, on_completion="later")  # type: ignore[arg-type]

    asyncio.run(main())


def test_a_client_gone_from_a_stateless_wait(server: Server) -> None:
    """``on_disconnect="continue"``: the run finishes; ``"cancel"``: it stops."""
    client = _client(server)
    impatient = _client(server, timeout=httpx.Timeout(1.0))
    with pytest.raises(httpx.ReadTimeout):
        impatient.runs.wait(
            None,
            "slow_continue",
            input={"seconds": 2.0},
            on_disconnect="continue",
            on_completion="keep",
        )
    tid = _the_thread_of(client, "slow_continue")
    assert client.runs.join(tid, client.runs.list(tid)[0]["run_id"]) == {"slept": 2.0}
    assert [r["status"] for r in client.runs.list(tid)] == ["success"]

    with pytest.raises(httpx.ReadTimeout):
        impatient.runs.wait(
            None, "slow_cancel", input={"seconds": 60}, on_disconnect="cancel", on_completion="keep"
        )
    tid = _the_thread_of(client, "slow_cancel")
    _until(lambda: client.runs.list(tid)[0]["status"] == "interrupted", "the run cancelled")

    # on a thread too, when asked (there the default is "continue")
    tid = client.threads.create()["thread_id"]
    with pytest.raises(httpx.ReadTimeout):
        impatient.runs.wait(tid, "slow", input={"seconds": 60}, on_disconnect="cancel")
    _until(
        lambda: client.runs.list(tid)[0]["status"] == "interrupted", "the thread's run cancelled"
    )

    # the default: cancelled, and its temporary thread deleted once it stopped
    with pytest.raises(httpx.ReadTimeout):
        impatient.runs.wait(None, "slow_gone", input={"seconds": 60})
    tid = _the_thread_of(client, "slow_gone")
    _until(lambda: _gone(client, tid), "the cancelled run's temporary thread deleted")


def test_runs_delete(server: Server) -> None:
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    assert client.runs.wait(tid, "slow", input={"seconds": 0.1}) == {"slept": 0.1}
    [first] = client.runs.list(tid)
    running = client.runs.create(tid, "slow", input={"seconds": 60})
    enqueued = client.runs.create(tid, "slow", input={"seconds": 0})
    for active in (running, enqueued):
        with pytest.raises(ConflictError, match="cancel it first"):
            client.runs.delete(tid, active["run_id"])
    client.runs.cancel(tid, enqueued["run_id"])
    client.runs.delete(tid, enqueued["run_id"])
    client.runs.cancel(tid, running["run_id"], wait=True)
    client.runs.delete(tid, running["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(tid, running["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.delete(tid, running["run_id"])  # deleted already
    client.runs.delete(tid, first["run_id"])
    assert client.runs.list(tid) == []
    # the run's record is gone; what it saved stays
    assert client.threads.get_state(tid)["values"] == {"slept": 0.1}
    assert client.threads.get(tid)["status"] == "idle"

    with pytest.raises(NotFoundError):
        client.runs.delete(tid, UNKNOWN_RUN)
    with pytest.raises(UnprocessableEntityError, match="run_id must be a UUID"):
        client.runs.delete(tid, "not-a-run")
    other = client.threads.create()["thread_id"]
    run = client.runs.create(other, "echo", input={})
    client.runs.join(other, run["run_id"])
    with pytest.raises(NotFoundError):  # a run is deleted through its own thread only
        client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):  # nor by another key
        _client(server, "k2").runs.delete(other, run["run_id"])
    assert client.runs.get(other, run["run_id"])["status"] == "success"


def test_a_temporary_thread_outlives_no_server_restart(tmp_path: Path) -> None:
    """A server stopped while a background stateless run runs hands the run
    back; the next server finishes it, and its sweep deletes the thread."""
    args = ["--config", str(_config(tmp_path)), "--db", str(tmp_path / "restart.sqlite")]
    first = Server(args, tmp_path)
    run = _client(first, None).runs.create(None, "slow", input={"seconds": 2.0})
    _until(lambda: _client(first, None).runs.get(run["thread_id"], run["run_id"])["status"]
           == "running", "the run started")  # fmt: skip
    first.stop()
    second = Server(args, tmp_path)
    try:
        client = _client(second, None)
        _until(lambda: _gone(client, run["thread_id"]), "the thread deleted by the next server")
        assert client.threads.search(metadata={"graph_id": "slow"}) == []
    finally:
        second.stop()


def test_another_key_never_sees_a_stateless_run(server: Server) -> None:
    ann, bob = _client(server, "k1"), _client(server, "k2")
    run = ann.runs.create(None, "slow", input={"seconds": 1.0}, on_completion="keep")
    tid, rid = run["thread_id"], run["run_id"]
    for call in (bob.runs.get, bob.runs.join, bob.runs.cancel, bob.runs.delete):
        # join's reconnecting request raises httpx's own error, not the SDK's
        with pytest.raises((NotFoundError, httpx.HTTPStatusError), match=r"404|not found"):
            call(tid, rid)
    with pytest.raises(NotFoundError):
        bob.threads.get(tid)
    assert ann.runs.join(tid, rid) == {"slept": 1.0}


def test_a_stateless_run_that_fails(server: Server) -> None:
    client = _client(server)
    created: list[dict[str, Any]] = []
    with pytest.raises(Exception, match="ValueError: boom: bad"):
        client.runs.wait(None, "boom", input={"why": "bad"}, on_run_created=created.append)
    raw = httpx.post(
        server.url + "/runs/wait",
        json={"assistant_id": "boom", "input": {"why": "raw"}},
        headers={"x-api-key": "k1"},
        timeout=30,
    )
    assert raw.status_code == 200
    assert raw.json() == {"__error__": {"error": "ValueError", "message": "boom: raw"}}
    assert _gone(client, created.pop()["thread_id"])

    run = client.runs.create(None, "boom", input={"why": "later"})
    time.sleep(1.5)  # it failed at once, and a sweep passed: its thread waits for the join
    answer = client.runs.join(run["thread_id"], run["run_id"])
    assert answer == {"__error__": {"error": "ValueError", "message": "boom: later"}}
    _until(lambda: _gone(client, run["thread_id"]), "the failed run's thread deleted")


def test_a_stateless_run_that_stops_at_an_interrupt(server: Server) -> None:
    """Its temporary thread goes like any ended run's, so the interrupt can
    be answered only on a thread kept with ``on_completion="keep"``."""
    client = _client(server)
    created: list[dict[str, Any]] = []
    stopped = client.runs.wait(None, "ask", input={"what": "memo"}, on_run_created=created.append)
    [pending] = stopped["__interrupt__"]
    assert pending["value"] == {"question": "publish memo?"}
    assert _gone(client, created.pop()["thread_id"])

    stopped = client.runs.wait(
        None, "ask", input={"what": "memo"}, on_completion="keep", on_run_created=created.append
    )
    tid = created.pop()["thread_id"]
    assert client.threads.get(tid)["status"] == "interrupted"
    resumed = client.runs.wait(tid, "ask", command={"resume": "yes"})
    assert resumed == {"what": "memo", "answer": "yes"}


def test_after_seconds_holds_a_run_back(server: Server) -> None:
    client = _client(server)
    started = time.monotonic()
    run = client.runs.create(None, "echo", input={"n": 1}, after_seconds=1.5)
    tid, rid = run["thread_id"], run["run_id"]
    assert client.runs.get(tid, rid)["status"] == "pending"
    assert client.threads.get(tid)["status"] == "busy"
    assert client.runs.join(tid, rid) == {"n": 1, "doubled": 2}
    assert time.monotonic() - started >= 1.5

    # cancelled before its time, it never runs
    tid = client.threads.create()["thread_id"]
    later = client.runs.create(tid, "slow", input={"seconds": 0}, after_seconds=600)
    client.runs.cancel(tid, later["run_id"], wait=True)
    assert client.runs.get(tid, later["run_id"])["status"] == "interrupted"
    assert client.threads.get_state(tid)["values"] == {}

    # enqueued behind a run, it waits for that run and for its time
    first = client.runs.create(tid, "slow", input={"seconds": 0.3})
    created = time.monotonic()
    held = client.runs.create(tid, "slow", input={"seconds": 0.1}, after_seconds=1.0)
    assert client.runs.get(tid, held["run_id"])["status"] == "pending"
    assert client.runs.join(tid, held["run_id"]) == {"slept": 0.1}
    assert time.monotonic() - created >= 1.0
    assert client.runs.get(tid, first["run_id"])["status"] == "success"

    async def main() -> None:
        aclient = get_client(url=server.url, api_key="k1")
        waited = await aclient.runs.wait(None, "echo", input={"n": 2}, after_seconds=0.2)
        assert waited == {"n": 2, "doubled": 4}
        for bad in (-1, 10**9, "soon"):
            with pytest.raises(UnprocessableEntityError, match="after_seconds"):
                await aclient.runs.create(None, "echo", input={}, after_seconds=bad)  # type: ignore[arg-type]

    asyncio.run(main())
