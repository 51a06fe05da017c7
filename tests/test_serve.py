"""``pregelkit serve`` driven by LangGraph's own client (``langgraph-sdk``),
sync and async, as a real server process (uvicorn on a free port) on SQLite
and on PostgreSQL; and hostile requests (bad JSON, wrong types, oversize
bodies, wrong keys, unknown ids), each answered with a JSON 4xx."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

FLOWS = Path(__file__).with_name("serve_flows.py")
SRC = str(Path(__file__).parents[1] / "src")
GRAPHS = ("echo", "ask", "boom", "slow")


# fixed ids: pytest-xdist workers must collect the same parameters
UNKNOWN = "5b0f7c9e-3d52-4c1e-9a57-7d1a3e6f2b10"
UNKNOWN_RUN = "1e7d2c4a-8b6f-4f0e-b3a9-2c5d6e7f8a90"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREGELKIT_API_KEY"}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _serve(args: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "serve", *args],
        cwd=cwd,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Server:
    """A ``pregelkit serve`` process, stopped (SIGTERM) when done."""

    def __init__(self, args: list[str], cwd: Path, port: int | None = None, **env: str) -> None:
        self.port = _free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = _serve([*args, "--port", str(self.port)], cwd, **env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pregelkit serve exited: {self.proc.communicate()}")
            try:
                if httpx.get(self.url + "/ok", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("pregelkit serve did not answer /ok within 30 s")

    def stop(self) -> tuple[str, str]:
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out, err


def _config(tmp: Path) -> Path:
    path = tmp / "pregelkit.json"
    path.write_text(json.dumps({"graphs": {g: f"{FLOWS}:{g}" for g in GRAPHS}}))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve")
    srv = Server(["--config", str(_config(tmp)), "--db", db, "--concurrency", "4"], tmp)
    yield srv
    srv.stop()


def test_assistants_are_the_configured_graphs_with_langgraphs_ids(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    found = client.assistants.search(limit=10)
    assert sorted(a["graph_id"] for a in found) == sorted(GRAPHS)
    echo = client.assistants.get("echo")
    # LangGraph's server: uuid5(NAMESPACE_GRAPH, graph_id) with this NAMESPACE_GRAPH
    namespace_graph = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
    assert echo["assistant_id"] == str(uuid.uuid5(namespace_graph, "echo"))
    assert client.assistants.get(echo["assistant_id"]) == echo
    assert client.assistants.search(graph_id="ask")[0]["graph_id"] == "ask"
    graph = client.assistants.get_graph("echo")
    assert {n["id"] for n in graph["nodes"]} == {"__start__", "echo", "__end__"}
    schemas = client.assistants.get_schemas("echo")
    assert schemas["graph_id"] == "echo" and schemas["input_schema"]["type"] == "object"
    with pytest.raises(NotFoundError):
        client.assistants.get("no-such-graph")


def test_threads_create_get_search_update_delete(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    mark = uuid.uuid4().hex
    thread = client.threads.create(metadata={"mark": mark, "user": "ann"})
    tid = thread["thread_id"]
    assert uuid.UUID(tid) and thread["status"] == "idle" and thread["metadata"]["mark"] == mark
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=tid)
    assert client.threads.create(thread_id=tid, if_exists="do_nothing")["thread_id"] == tid
    other = client.threads.create(metadata={"mark": mark, "user": "bob"})
    assert [t["thread_id"] for t in client.threads.search(metadata={"mark": mark})] == [
        other["thread_id"],
        tid,
    ]  # newest first
    assert [
        t["thread_id"] for t in client.threads.search(metadata={"user": "ann", "mark": mark})
    ] == [tid]
    updated = client.threads.update(tid, metadata={"user": "cy"})
    assert updated["metadata"] == {"mark": mark, "user": "cy"}
    assert client.threads.get_state(tid)["values"] == {}
    assert client.threads.get_history(tid) == []
    client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        client.threads.get(tid)


def test_runs_wait_state_history_interrupt_and_failure(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    assert client.runs.wait(tid, "echo", input={"n": 4}) == {"n": 4, "doubled": 8}
    thread = client.threads.get(tid)
    assert thread["status"] == "idle" and thread["values"] == {"n": 4, "doubled": 8}
    assert thread["metadata"]["graph_id"] == "echo"
    state = client.threads.get_state(tid)
    assert state["values"] == {"n": 4, "doubled": 8} and state["next"] == []
    history = client.threads.get_history(tid)
    assert history[0]["checkpoint"] == state["checkpoint"]
    older = history[-1]["checkpoint"]["checkpoint_id"]
    assert (
        client.threads.get_state(tid, checkpoint_id=older)["checkpoint"]["checkpoint_id"] == older
    )
    with pytest.raises(NotFoundError, match="checkpoint"):
        client.threads.get_state(tid, checkpoint_id=str(uuid.uuid4()))
    assert client.threads.get_state(tid, subgraphs=True)["values"] == state["values"]

    with pytest.raises(UnprocessableEntityError, match="names no node"):
        client.threads.update_state(tid, {"x": 1}, as_node="nope")
    with pytest.raises(NotFoundError, match="checkpoint"):
        client.threads.update_state(tid, {"x": 1}, checkpoint_id=str(uuid.uuid4()))
    client.threads.update_state(tid, {"n": 5, "doubled": 10}, as_node="echo")
    assert client.threads.get_state(tid)["values"] == {"n": 5, "doubled": 10}

    asked = client.threads.create()["thread_id"]
    stopped = client.runs.wait(asked, "ask", input={"what": "report"})
    [pending] = stopped["__interrupt__"]
    assert pending["value"] == {"question": "publish report?"}
    thread = client.threads.get(asked)
    assert thread["status"] == "interrupted"
    assert list(thread["interrupts"].values()) == [[pending]]
    resumed = client.runs.wait(asked, "ask", command={"resume": "yes"})
    assert resumed == {"what": "report", "answer": "yes"}

    failing = client.threads.create()["thread_id"]
    with pytest.raises(Exception, match="ValueError: boom: because"):
        client.runs.wait(failing, "boom", input={"why": "because"})
    answer = client.runs.wait(failing, "boom", input={"why": "again"}, raise_error=False)
    assert answer == {"__error__": {"error": "ValueError", "message": "boom: again"}}
    assert client.threads.get(failing)["status"] == "error"


def test_background_runs_get_join_reject_and_cancel(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "slow", input={"seconds": 1.0})
    assert run["status"] in ("pending", "running") and run["thread_id"] == tid
    assert client.threads.get(tid)["status"] == "busy"
    with pytest.raises(ConflictError, match="reject"):
        client.runs.create(tid, "slow", input={"seconds": 0}, multitask_strategy="reject")
    assert client.runs.join(tid, run["run_id"]) == {"slept": 1.0}
    assert client.runs.get(tid, run["run_id"])["status"] == "success"

    second = client.runs.create(tid, "slow", input={"seconds": 30})
    client.runs.cancel(tid, second["run_id"], wait=True)
    assert client.runs.get(tid, second["run_id"])["status"] == "interrupted"
    listed = client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [second["run_id"], run["run_id"]]  # newest first
    assert [r["run_id"] for r in client.runs.list(tid, status="success")] == [run["run_id"]]
    assert [r["run_id"] for r in client.runs.list(tid, limit=1, offset=1)] == [run["run_id"]]
    assert client.runs.wait(tid, "slow", input={"seconds": 0.1}) == {"slept": 0.1}

    # 'interrupt': the active run is cancelled, stops at its next task, and the new one runs
    third = client.runs.create(tid, "slow", input={"seconds": 30})
    fourth = client.runs.create(tid, "slow", input={"seconds": 0.2}, multitask_strategy="interrupt")
    assert fourth["multitask_strategy"] == "interrupt"
    assert client.runs.get(tid, third["run_id"])["status"] == "interrupted"
    assert client.runs.join(tid, fourth["run_id"]) == {"slept": 0.2}
    with pytest.raises(NotFoundError):
        client.runs.get(tid, str(uuid.uuid4()))


def test_stateless_runs_copy_and_counts(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    before = client.threads.count()
    assert client.runs.wait(None, "echo", input={"n": 5}) == {"n": 5, "doubled": 10}
    assert client.threads.count() == before  # its thread is deleted once the run ends
    mark = uuid.uuid4().hex
    tid = client.threads.create(metadata={"mark": mark})["thread_id"]
    client.runs.wait(tid, "echo", input={"n": 6})
    copied = client.threads.copy(tid)
    assert copied["thread_id"] != tid and copied["metadata"]["mark"] == mark
    assert copied["values"] == {"n": 6, "doubled": 12}
    assert len(client.threads.get_history(copied["thread_id"])) == len(
        client.threads.get_history(tid)
    )
    assert client.threads.count(metadata={"mark": mark}) == 2
    assert client.assistants.count() == len(GRAPHS)
    assert client.assistants.count(graph_id="echo") == 1


def test_store_items_and_namespaces(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    top = f"t{uuid.uuid4().hex}"
    client.store.put_item([top, "docs"], "a", {"title": "A", "n": 1})
    client.store.put_item([top, "docs"], "b", {"title": "B", "n": 2})
    client.store.put_item([top, "notes"], "c", {"title": "C", "n": 3})
    item = client.store.get_item([top, "docs"], "a")
    assert item["value"] == {"title": "A", "n": 1} and item["namespace"] == [top, "docs"]
    assert client.store.get_item([top, "docs"], "missing") is None  # as LangGraph's server
    found = client.store.search_items([top], filter={"n": {"$gte": 2}})
    assert sorted(i["key"] for i in found["items"]) == ["b", "c"]
    spaces = client.store.list_namespaces(prefix=[top])
    assert sorted(spaces["namespaces"]) == [[top, "docs"], [top, "notes"]]
    client.store.delete_item([top, "docs"], "a")
    assert client.store.get_item([top, "docs"], "a") is None


def test_the_async_client(server: Server) -> None:
    async def main() -> None:
        client = get_client(url=server.url, api_key=None)
        tid = (await client.threads.create(metadata={"async": True}))["thread_id"]
        assert await client.runs.wait(tid, "echo", input={"n": 1}) == {"n": 1, "doubled": 2}
        assert (await client.threads.get_state(tid))["values"] == {"n": 1, "doubled": 2}
        run = await client.runs.create(tid, "echo", input={"n": 2})
        assert await client.runs.join(tid, run["run_id"]) == {"n": 2, "doubled": 4}
        assert [r["run_id"] for r in await client.runs.list(tid, limit=1)] == [run["run_id"]]
        await client.threads.update(tid, metadata={"more": 1})
        found = await client.threads.search(metadata={"async": True, "more": 1})
        assert [t["thread_id"] for t in found] == [tid]
        assert await client.runs.wait(None, "echo", input={"n": 3}) == {"n": 3, "doubled": 6}
        await client.store.put_item(["async"], "k", {"v": 1})
        assert (await client.store.get_item(["async"], "k"))["value"] == {"v": 1}
        assert (await client.store.search_items(["async"]))["items"][0]["key"] == "k"
        assert [a["graph_id"] for a in await client.assistants.search(graph_id="echo")] == ["echo"]
        await client.threads.delete(tid)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)

    asyncio.run(main())


# hostile input: every answer a JSON 4xx, never a 500


def _post(server: Server, path: str, content: Any, **headers: str) -> httpx.Response:
    return httpx.post(server.url + path, content=content, headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 422, "not valid JSON"),
        (b"[1, 2]", 422, "must be a JSON object"),
        (b'{"metadata": [1]}', 422, "'metadata' must be an object"),
        (b'{"thread_id": "not-a-uuid"}', 422, "thread_id must be a UUID"),
        (b'{"if_exists": "explode"}', 422, "'if_exists' must be one of"),
        (b'{"metadata": {"a": 1}, "some_future_field": {"x": 1}}', 200, ""),
        (b"\xff\xfe", 422, "not valid JSON"),
        (b"[" * 100_000, 422, "not valid JSON"),
    ],
)
def test_a_bad_body_is_a_json_4xx(server: Server, body: bytes, status: int, says: str) -> None:
    response = _post(server, "/threads", body, **{"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert says in response.text
    assert response.headers["content-type"].startswith("application/json")


def test_oversize_bodies_are_refused_with_or_without_content_length(server: Server) -> None:
    big = b'{"metadata": {"x": "' + b"a" * (11 * 1024 * 1024) + b'"}}'
    assert _post(server, "/threads", big).status_code == 413

    def chunks() -> Iterator[bytes]:
        yield b'{"metadata": {"x": "'
        for _ in range(11):
            yield b"a" * (1024 * 1024)
        yield b'"}}'

    response = httpx.post(server.url + "/threads", content=chunks(), timeout=30)
    assert response.status_code == 413 and "larger than" in response.json()["detail"]


def test_bad_headers_and_query_parameters_are_json_4xx(server: Server) -> None:
    # a Content-Length no client library sends: uvicorn answers 400 before the app
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(b"POST /threads HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}")
        assert conn.recv(100).startswith(b"HTTP/1.1 400 ")
    tid = get_sync_client(url=server.url, api_key=None).threads.create()["thread_id"]
    for query in ("runs?limit=x", "runs?limit=-1", "runs?offset=99999999999", "runs?status=done",
                  "state?subgraphs=maybe"):  # fmt: skip
        response = httpx.get(f"{server.url}/threads/{tid}/{query}")
        assert response.status_code == 422 and response.json()["detail"], query
    response = httpx.get(f"{server.url}/store/items?namespace=a..b&key=k")
    assert response.status_code == 422 and "label" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", f"/threads/{UNKNOWN}", 404),
        ("GET", "/threads/not-a-uuid", 422),
        ("GET", f"/threads/{UNKNOWN}/state", 404),
        ("GET", f"/threads/{UNKNOWN}/runs", 404),
        ("POST", f"/threads/{UNKNOWN}/runs/wait", 422),  # no assistant_id
        ("GET", f"/threads/{UNKNOWN}/runs/{UNKNOWN_RUN}", 404),
        ("GET", "/assistants/nothing", 404),
        ("GET", "/no/such/path", 404),
        ("DELETE", "/assistants/search", 405),
    ],
)
def test_unknown_ids_and_paths_are_json_4xx(
    server: Server, method: str, path: str, status: int
) -> None:
    response = httpx.request(method, server.url + path, timeout=10)
    assert response.status_code == status, response.text
    assert "detail" in response.json()


def test_a_run_of_an_unknown_thread_or_with_an_unserved_option_is_refused(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    # runs.wait reads its answer through httpx's own raise_for_status
    with pytest.raises(httpx.HTTPStatusError, match="404 Not Found"):
        client.runs.wait(str(uuid.uuid4()), "echo", input={})
    created = client.runs.wait(str(uuid.uuid4()), "echo", input={"n": 1}, if_not_exists="create")
    assert created == {"n": 1, "doubled": 2}
    tid = client.threads.create()["thread_id"]
    for option in ({"context": {"user": "ann"}}, {"webhook": "https://example.com/hook"}):
        response = _post(
            server, f"/threads/{tid}/runs", json.dumps({"assistant_id": "echo", **option})
        )
        assert response.status_code == 422 and "not served yet" in response.json()["detail"]


def test_an_unexpected_error_is_a_json_500_and_the_connection_lives_on() -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from pregelkit.server._errors import Unexpected

    async def broken(request: Request) -> JSONResponse:
        raise RuntimeError("a bug")

    async def fine(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[Route("/broken", broken), Route("/fine", fine)],
        middleware=[Middleware(Unexpected)],
    )

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/broken")
            assert response.status_code == 500
            assert response.json() == {
                "detail": "internal error: RuntimeError (the server's log has the details)"
            }
            assert (await client.get("/fine")).json() == {"ok": True}

    asyncio.run(main())


# keys and binding


def test_api_keys(tmp_path: Path) -> None:
    config = _config(tmp_path)
    db = str(tmp_path / "keys.sqlite")
    server = Server(
        ["--config", str(config), "--db", db, "--auth-key", "k1", "--no-workers"],
        tmp_path,
        PREGELKIT_API_KEY="k2, k3",
    )
    try:
        assert httpx.get(server.url + "/ok").status_code == 200  # health checks need no key
        for headers, status in [({}, 401), ({"x-api-key": "nope"}, 401), ({"x-api-key": "k1"}, 200),
                                ({"x-api-key": "k3"}, 200)]:  # fmt: skip
            response = httpx.get(server.url + "/info", headers=headers)
            assert response.status_code == status and response.json()
        with pytest.raises(Exception, match="missing API key"):
            get_sync_client(url=server.url, api_key=None).assistants.search()
        assert get_sync_client(url=server.url, api_key="k2").assistants.search()

        # a key sees only the threads it created, and their runs
        ann, bob = (get_sync_client(url=server.url, api_key=k) for k in ("k1", "k2"))
        mine = ann.threads.create(metadata={"who": "ann"})["thread_id"]
        assert ann.threads.get(mine)["metadata"] == {"who": "ann"}
        with pytest.raises(NotFoundError):
            bob.threads.get(mine)
        with pytest.raises(NotFoundError):
            bob.threads.update(mine, metadata={"who": "bob"})
        with pytest.raises(NotFoundError):
            bob.threads.delete(mine)
        with pytest.raises(ConflictError):  # the id is taken, whoever took it
            bob.threads.create(thread_id=mine, if_exists="do_nothing")
        with pytest.raises(httpx.HTTPStatusError, match="404"):
            bob.runs.wait(mine, "echo", input={})
        assert mine not in [t["thread_id"] for t in bob.threads.search()]
        assert mine in [t["thread_id"] for t in ann.threads.search()]
        assert bob.threads.count() == 0
    finally:
        server.stop()


def test_sigterm_hands_a_running_run_back_and_the_next_server_finishes_it(
    tmp_path: Path,
) -> None:
    args = ["--config", str(_config(tmp_path)), "--db", str(tmp_path / "stop.sqlite")]
    first = Server(args, tmp_path)
    client = get_sync_client(url=first.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "slow", input={"seconds": 2.0})
    while client.runs.get(tid, run["run_id"])["status"] != "running":
        time.sleep(0.05)
    out, err = first.stop()  # exits 0 once the run's started task ended and it went back
    assert "stopped" in out
    assert f"run {run['run_id']} (thread {tid}, slow): handed back (stopping)" in err
    second = Server(args, tmp_path)
    try:
        client = get_sync_client(url=second.url, api_key=None)
        assert client.runs.join(tid, run["run_id"]) == {"slept": 2.0}
        assert client.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        second.stop()


def _refused(args: list[str], tmp: Path, **env: str) -> str:
    proc = _serve(args, tmp, **env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    return err


def test_no_key_no_network_and_config_mistakes(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    err = _refused(["--config", config, "--host", "0.0.0.0"], tmp_path)
    assert "refusing to listen on 0.0.0.0 without an API key" in err
    assert "name what to serve" in _refused([], tmp_path)
    (tmp_path / "empty.json").write_text("{}")
    assert "names no graphs" in _refused(["--config", str(tmp_path / "empty.json")], tmp_path)
    assert "no such file" in _refused([f"{tmp_path}/nope.py:wf"], tmp_path)
    with socket.socket() as taken:  # a port another program listens on
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        err = _refused(["--config", config, "--port", port], tmp_path)
    assert f"cannot listen on 127.0.0.1:{port}" in err and "another --port" in err


def test_langgraph_json_is_read_as_is_with_paths_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "lg_flows.py").write_text(FLOWS.read_text())
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {"agent": "./app/lg_flows.py:echo"},
                "env": ".env",
                "python_version": "3.11",
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = Server(
        ["--config", str(tmp_path / "langgraph.json"), "--db", str(tmp_path / "lg.sqlite")],
        elsewhere,
    )
    try:
        client = get_sync_client(url=server.url, api_key=None)
        [agent] = client.assistants.search()
        assert agent["graph_id"] == "agent"
        tid = client.threads.create()["thread_id"]
        assert client.runs.wait(tid, "agent", input={"n": 3}) == {"n": 3, "doubled": 6}
    finally:
        server.stop()


def test_import_pregelkit_never_imports_the_server() -> None:
    code = (
        "import sys, pregelkit, pregelkit.cli; "
        "print([m for m in sys.modules if m.startswith(('pregelkit.server', 'starlette'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_servers_without_workers_share_postgres_with_a_worker_process(
    tmp_path: Path, postgres_database: Callable[[str], str]
) -> None:
    """Two `pregelkit serve --no-workers` on one database and a `pregelkit
    worker` running the runs: a thread made on one server is run from the
    other, and read back on the first."""
    db = postgres_database("pregelkit_serve_fleet")
    config = str(_config(tmp_path))
    one = Server(["--config", config, "--db", db, "--no-workers"], tmp_path)
    two = Server(["--config", config, "--db", db, "--no-workers"], tmp_path)
    worker = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "worker", f"{FLOWS}:echo", "--db", db],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = (get_sync_client(url=s.url, api_key=None) for s in (one, two))
        tid = first.threads.create(metadata={"on": "one"})["thread_id"]
        assert second.runs.wait(tid, "echo", input={"n": 7}) == {"n": 7, "doubled": 14}
        thread = first.threads.get(tid)
        assert thread["values"] == {"n": 7, "doubled": 14} and thread["status"] == "idle"
    finally:
        worker.terminate()
        worker.communicate(timeout=60)
        one.stop()
        two.stop()
    assert worker.returncode == 0
