"""Stream parts in the database: a run queued with stream modes has each
part its worker's run emits written to ``pregelkit_stream_parts`` (sync
``Worker`` and ``AsyncWorker``, SQLite and PostgreSQL), in the order
emitted, ids increasing; a run queued without them writes none."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pregelkit import AsyncWorker, Worker
from pregelkit._internal._constants import CONFIG_KEY_STREAM_MODES
from pregelkit.checkpoint import _parts
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.runs import asubmit_run, submit_run
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task

MODES = ["values", "updates", "custom", "tasks", "checkpoints", "debug"]


@task
def double(x: int) -> int:
    return 2 * x


@entrypoint()
def chat(inputs: dict[str, Any]) -> dict[str, Any]:
    write = get_stream_writer()
    for i in range(3):
        write({"i": i})
    return {"n": double(inputs["n"]).result()}


@task
async def adouble(x: int) -> int:
    return 2 * x


@entrypoint()
async def achat(inputs: dict[str, Any]) -> dict[str, Any]:
    write = get_stream_writer()
    for i in range(3):
        write({"i": i})
    return {"n": await adouble(inputs["n"])}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "q.db")
    else:
        yield request.getfixturevalue("postgres_database")("pregelkit_stream_parts")


def _config(thread: str, modes: list[str] | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    if modes is not None:
        conf[CONFIG_KEY_STREAM_MODES] = modes
    return {"configurable": conf}


def _check(saver: Any, parts: list[_parts.Stored], name: str, task: str) -> None:
    ids = [p[0] for p in parts]
    assert ids == sorted(set(ids))
    got = [(p[1], saver.serde.loads_typed((p[3], p[4]))) for p in parts]
    assert [d for m, d in got if m == "custom"] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [d for m, d in got if m == "values"] == [{"n": 4}]
    assert [d for m, d in got if m == "updates"] == [{task: 4}, {name: {"n": 4}}]
    assert {m for m, _ in got} == set(MODES)


def test_a_worker_writes_the_parts_of_the_modes_asked(url: str) -> None:
    opened: Any = (
        PostgresSaver.from_conn_string(url)
        if url.startswith("postgresql://")
        else SqliteSaver.from_conn_string(url)
    )
    with opened as saver:
        saver.setup()
        streamed = submit_run(saver, "chat", {"n": 2}, _config("t1", MODES))
        plain = submit_run(saver, "chat", {"n": 2}, _config("t2", None))
        Worker([chat], saver).run_until_idle()
        assert streamed.result() == plain.result() == {"n": 4}
        status, parts = saver.run_queue(lambda d: _parts.tail(d, streamed.run_id, 0), "read")
        assert status == "done"
        _check(saver, parts, "chat", "double")
        assert saver.run_queue(lambda d: _parts.tail(d, plain.run_id, 0), "read")[1] == []
        # read on from a part: the rest, none repeated
        after = parts[4][0]
        rest = saver.run_queue(lambda d: _parts.tail(d, streamed.run_id, after), "read")[1]
        assert rest == parts[5:]


def test_an_async_worker_writes_them_too(url: str) -> None:
    async def main() -> None:
        opened: Any = (
            AsyncPostgresSaver.from_conn_string(url)
            if url.startswith("postgresql://")
            else AsyncSqliteSaver.from_conn_string(url)
        )
        async with opened as saver:
            await saver.setup()
            streamed = await asubmit_run(saver, "achat", {"n": 2}, _config("t1", MODES))
            await AsyncWorker([achat], saver).run_until_idle()
            assert await streamed.aresult() == {"n": 4}
            status, parts = await saver.arun_queue(
                lambda d: _parts.tail(d, streamed.run_id, 0), "read"
            )
            assert status == "done"
            _check(saver, parts, "achat", "adouble")

    asyncio.run(main())
