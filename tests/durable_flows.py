"""Workflows that wait, for the durable chaos test, and the worker process
that serves them: ``python durable_flows.py sync|async DB EFFECTS``
(with tests/ on PYTHONPATH) serves the sync family on a ``Worker`` or the
async one on an ``AsyncWorker``; ``python durable_flows.py invoke DB EFFECTS
THREAD JOB`` runs one peer with ``invoke`` (its child runs in process).

A ``peer`` pairs with another thread (of either family): it sleeps past
the worker's suspend threshold, the initiator sends a ping and waits for
the pong (``recv`` without timeout), the responder waits for the ping
(``recv`` with a timeout) and answers; each then waits out a ``recv``
that times out, starts a ``kid`` (which sleeps and publishes an event) and
sends it a message (which may reach the child's thread before its
run starts) and waits for its result. Each ``effect`` appends a line to ``EFFECTS``
(``O_APPEND``: whole lines, whatever process writes) naming the thread,
the step and the lease it ran under.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from pregelkit import durable
from pregelkit.config import get_config
from pregelkit.func import entrypoint, task
from pregelkit.pregel._api import waits
from pregelkit.pregel.main import Pregel
from pregelkit.worker import AsyncWorker, Worker, current_lease

SLEEP = 1.2
"""Seconds a peer sleeps: over the 1 s past which a worker suspends a run."""
KID_SLEEP = 1.1
TIMEOUT = 1.2
"""Seconds the ``recv`` that gets nothing waits."""
LEASE = 1.0
CONCURRENCY = 4


def _append(step: str) -> None:
    lease = current_lease()
    thread = get_config()["configurable"]["thread_id"]
    line = f"{thread} {step} {lease.fence if lease else -1} {os.getpid()}\n".encode()
    fd = os.open(os.environ["DURABLE_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def expected(job: dict[str, Any], partner: dict[str, Any]) -> dict[str, Any]:
    """What ``peer``/``apeer`` returns for ``job``: the initiator gets its
    own ``k`` back plus 1000, the responder the initiator's ``k``."""
    got = job["k"] + 1000 if job["first"] else partner["k"]
    return {"got": got, "none": None, "child": job["k"] * 3}


def sync_flows(saver: Any) -> list[Pregel]:
    @task
    def effect(step: str) -> str:
        _append(step)
        return step

    @entrypoint(checkpointer=saver)
    def kid(x: int) -> int:
        effect("kid-start").result()
        hello = durable.recv(topic="hello", timeout=120)
        durable.sleep(KID_SLEEP)
        durable.set_event("kid", x)
        effect("kid-end").result()
        return x * 2 + hello

    @entrypoint(checkpointer=saver)
    def peer(job: dict[str, Any]) -> dict[str, Any]:
        effect("start").result()
        durable.sleep(SLEEP)
        if job["first"]:
            durable.send(job["partner"], job["k"], topic="ping")
            got = durable.recv(topic="pong")
        else:
            got = durable.recv(topic="ping", timeout=120)
            durable.send(job["partner"], got + 1000, topic="pong")
        effect("talked").result()
        none = durable.recv(topic="never", timeout=TIMEOUT)
        handle = kid.submit(job["k"])
        durable.send(handle.thread_id, job["k"], topic="hello")
        child = handle.result()
        durable.set_event("done", got)
        effect("end").result()
        return {"got": got, "none": none, "child": child}

    return [peer, kid]


def async_flows(saver: Any) -> list[Pregel]:
    @task
    async def effect(step: str) -> str:
        _append(step)
        return step

    @entrypoint(checkpointer=saver)
    async def akid(x: int) -> int:
        await effect("kid-start")
        hello = await durable.arecv(topic="hello", timeout=120)
        await durable.asleep(KID_SLEEP)
        await durable.aset_event("kid", x)
        await effect("kid-end")
        return x * 2 + hello

    @entrypoint(checkpointer=saver)
    async def apeer(job: dict[str, Any]) -> dict[str, Any]:
        await effect("start")
        await durable.asleep(SLEEP)
        if job["first"]:
            await durable.asend(job["partner"], job["k"], topic="ping")
            got = await durable.arecv(topic="pong")
        else:
            got = await durable.arecv(topic="ping", timeout=120)
            await durable.asend(job["partner"], got + 1000, topic="pong")
        await effect("talked")
        none = await durable.arecv(topic="never", timeout=TIMEOUT)
        handle = await akid.asubmit(job["k"])
        await durable.asend(handle.thread_id, job["k"], topic="hello")
        child = await handle.aresult()
        await durable.aset_event("done", got)
        await effect("end")
        return {"got": got, "none": none, "child": child}

    return [apeer, akid]


def _serve_sync(db: str) -> None:
    from crash_workflow import open_saver

    with open_saver(db) as saver:
        worker = Worker(sync_flows(saver), saver, concurrency=CONCURRENCY, lease_seconds=LEASE)
        signal.signal(signal.SIGTERM, lambda *_: worker.stop("SIGTERM"))
        worker.run()


async def _serve_async(db: str) -> None:
    from crash_workflow import open_async_saver

    async with open_async_saver(db) as saver:
        worker = AsyncWorker(
            async_flows(saver), saver, concurrency=CONCURRENCY, lease_seconds=LEASE
        )
        await worker.run()


def _invoke(db: str, thread: str, job: dict[str, Any], resume: bool) -> None:
    """Run ``job`` in this process (``invoke``): its waits block here and
    park the thread, which a worker takes over a second after this process
    dies. ``resume``: ``invoke(None)``, what resumes a thread whose caller
    died while it computed (nothing parked: no worker takes it over), or
    starts it again if it died before saving anything."""
    from crash_workflow import open_async_saver, open_saver

    waits.PARK_LEASE = 1.0
    config = {"configurable": {"thread_id": thread}}
    if job["wf"] == "peer":
        with open_saver(db) as saver:
            peer = sync_flows(saver)[0]
            started = resume and peer.get_state(config).next
            peer.invoke(None if started else job, config)
        return

    async def main() -> None:
        async with open_async_saver(db) as saver:
            apeer = async_flows(saver)[0]
            started = resume and (await apeer.aget_state(config)).next
            await apeer.ainvoke(None if started else job, config)

    asyncio.run(main())


if __name__ == "__main__":
    kind, db, os.environ["DURABLE_EFFECTS"] = sys.argv[1:4]
    if kind == "sync":
        _serve_sync(db)
    elif kind == "async":
        asyncio.run(_serve_async(db))
    else:
        _invoke(db, sys.argv[4], json.loads(sys.argv[5]), sys.argv[6:] == ["resume"])
