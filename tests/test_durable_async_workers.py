"""Durable waits of async workflows on an ``AsyncWorker`` (AsyncSqliteSaver
and AsyncPostgresSaver): the async twins of test_durable_workers.py. A long
``asleep`` suspends the run and frees its slot, ``arecv`` is woken by a
message or gives ``None`` at its timeout, ``aset_event`` is read by
``aget_event``, and children started with ``asubmit`` are waited for with
``aresult``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.errors import ChildWorkflowError
from pregelkit.func import entrypoint, task
from pregelkit.testing import FakeClock
from pregelkit.worker import AsyncWorker


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "q.db")
    else:
        yield request.getfixturevalue("postgres_database")("pregelkit_durable_async_workers")


@asynccontextmanager
async def _opened(url: str) -> AsyncIterator[Any]:
    opened: Any = (
        AsyncPostgresSaver.from_conn_string(url)
        if url.startswith("postgresql://")
        else AsyncSqliteSaver.from_conn_string(url)
    )
    async with opened as saver:
        await saver.setup()
        yield saver


@asynccontextmanager
async def _serving(worker: AsyncWorker) -> AsyncIterator[None]:
    serving = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 30)


async def _until(condition: Callable[[], Awaitable[bool]], seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not await condition():
            await asyncio.sleep(0.02)


def test_an_asleep_suspends_the_run_and_a_worker_resumes_it_when_due(url: str, arun: Any) -> None:
    ran: list[str] = []

    @task
    async def note(what: str) -> str:
        ran.append(what)
        return what

    @entrypoint()
    async def anapper(x: int) -> int:
        await note("before")
        await durable.asleep(3600)
        await note("after")
        return x + 1

    @entrypoint()
    async def aquick(x: int) -> int:
        return x * 2

    async def main() -> None:
        async with _opened(url) as saver:
            napper, quick = anapper.copy(checkpointer=saver), aquick.copy(checkpointer=saver)
            with FakeClock(skip_sleeps=False) as clock:
                handle = await napper.asubmit(1, _config("nap"))
                worker = AsyncWorker([napper, quick], saver, concurrency=1, lease_seconds=5)
                async with _serving(worker):
                    await _until(lambda: _is(handle, "sleeping"))
                    wait = await durable.awaiting(napper, _config("nap"))
                    assert wait is not None and (wait.status, wait.kind) == ("sleeping", "sleep")
                    # the sleeper holds no slot: a run queued now runs on the one slot
                    assert await (await quick.asubmit(4, _config("q"))).aresult(timeout=30) == 8
                    assert await handle.astatus() == "sleeping"
                    clock.advance(3601)
                    assert await handle.aresult(timeout=30) == 2

    arun(main())
    assert ran == ["before", "after"]


async def _is(handle: Any, status: str) -> bool:
    return bool(await handle.astatus() == status)


def test_a_message_wakes_an_arecv_and_an_event_is_read(url: str, arun: Any) -> None:
    @entrypoint()
    async def approver(claim: str) -> str:
        await durable.aset_event("claim", claim)
        decision = await durable.arecv(topic="decision")
        await durable.aset_event("decision", decision)
        return f"{claim}: {decision}"

    async def main() -> None:
        async with _opened(url) as saver:
            wf = approver.copy(checkpointer=saver)
            handle = await wf.asubmit("c1", _config("ap"))
            async with _serving(AsyncWorker([wf], saver, concurrency=1, lease_seconds=5)):
                await _until(lambda: _is(handle, "waiting"))
                wait = await durable.awaiting(wf, _config("ap"))
                assert wait is not None and (wait.kind, wait.topic) == ("recv", "decision")
                assert await durable.aget_event(saver, "ap", "claim") == "c1"
                assert await durable.aget_event(saver, "ap", "decision") is None
                await durable.asend(saver, "ap", "approved", topic="decision")
                assert await durable.aget_event(saver, "ap", "decision", timeout=30) == "approved"
                assert await handle.aresult(timeout=30) == "c1: approved"

    arun(main())


def test_an_arecv_timeout_on_a_worker_gives_none(url: str, arun: Any) -> None:
    @entrypoint()
    async def patient(x: int) -> Any:
        return [await durable.arecv(timeout=1.5), await durable.arecv(timeout=0)]

    async def main() -> None:
        async with _opened(url) as saver:
            wf = patient.copy(checkpointer=saver)
            handle = await wf.asubmit(0, _config("pt"))
            async with _serving(AsyncWorker([wf], saver, concurrency=1, lease_seconds=5)):
                assert await handle.aresult(timeout=30) == [None, None]

    arun(main())


def test_async_children_on_workers_and_a_failed_one(url: str, arun: Any) -> None:
    async def main() -> None:
        async with _opened(url) as saver:

            @entrypoint(checkpointer=saver)
            async def ashipment(parcel: str) -> str:
                if parcel == "lost":
                    raise LookupError("no such parcel")
                await durable.asleep(1.2)  # suspends the child too
                return f"{parcel} shipped"

            @entrypoint(checkpointer=saver)
            async def aorder(parcels: list[str]) -> list[str]:
                handles = [await ashipment.asubmit(p) for p in parcels]
                out = []
                for h in handles:
                    try:
                        out.append(await h.aresult())
                    except ChildWorkflowError as exc:
                        out.append(f"failed: {exc.error}")
                return out

            handle = await aorder.asubmit(["a", "lost", "b"], _config("ord"))
            worker = AsyncWorker([aorder, ashipment], saver, concurrency=2, lease_seconds=5)
            async with _serving(worker):
                assert await handle.aresult(timeout=60) == [
                    "a shipped",
                    "failed: LookupError: no such parcel",
                    "b shipped",
                ]

    arun(main())


def test_async_workflows_send_to_each_other_on_a_worker(url: str, arun: Any) -> None:
    @entrypoint()
    async def ping(peer: str) -> Any:
        await durable.asend(peer, "ping")
        return await durable.arecv(topic="pong", timeout=60)

    @entrypoint()
    async def pong(peer: str) -> Any:
        got = await durable.arecv(timeout=60)
        await durable.asend(peer, got + "/pong", topic="pong")
        return got

    async def main() -> None:
        async with _opened(url) as saver:
            a, b = ping.copy(checkpointer=saver), pong.copy(checkpointer=saver)
            ha = await a.asubmit("b", _config("a"))
            hb = await b.asubmit("a", _config("b"))
            async with _serving(AsyncWorker([a, b], saver, concurrency=2, lease_seconds=5)):
                assert await ha.aresult(timeout=30) == "ping/pong"
                assert await hb.aresult(timeout=30) == "ping"

    arun(main())
