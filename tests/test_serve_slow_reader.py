"""A stateless stream that its client reads slowly keeps every part: the
server's sweep of ended temporary threads (every second) must not delete
the thread, and with it the parts, of a run whose stream a request of the
same server is still sending. Seen in ``benchmarks/serve_streams.py``: of
200 stateless streams at once on a busy machine, a few ended with no
``updates`` event. Here the client stops reading after the first part
while the run ends and the sweep passes; the parts not yet sent wait in
the database, behind a socket the client does not empty. On PostgreSQL a
second server process sweeps the same database meanwhile."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from langgraph_sdk import get_sync_client

from test_serve import Server

BULKY = """
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint

@entrypoint()
def bulky(inputs: dict) -> dict:
    say = get_stream_writer()
    for i in range(int(inputs["n"])):
        say({"i": i, "pad": "x" * int(inputs["size"])})
    return {"n": inputs["n"]}
"""
# 16 MB of parts: more than the sockets between server and client hold
PARTS, SIZE = 2000, 8192
PAUSE = 3.0
"""Seconds the client stops reading: the run ends and the sweep passes."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("slow_reader")
    (tmp / "bulky.py").write_text(BULKY)
    (tmp / "pregelkit.json").write_text(json.dumps({"graphs": {"bulky": "bulky.py:bulky"}}))
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_slow_reader")
    srv = Server(["--config", "pregelkit.json", "--db", db], tmp)
    # on PostgreSQL a second server shares the database: its sweep cannot
    # see the first one's requests, and must leave their threads alone too
    other = None
    if request.param == "postgres":
        other = Server(["--config", "pregelkit.json", "--db", db, "--no-workers"], tmp)
    yield srv
    srv.stop()
    if other is not None:
        other.stop()


def test_a_stateless_stream_read_slowly_keeps_its_parts(server: Server) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    got = []
    events = client.runs.stream(
        None, "bulky", input={"n": PARTS, "size": SIZE}, stream_mode="custom"
    )
    for part in events:
        if part.event == "custom":
            got.append(part.data["i"])
            if len(got) == 1:
                time.sleep(PAUSE)
    assert got == list(range(PARTS))
