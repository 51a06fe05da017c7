"""The run queue and its workers, on SQLite and on PostgreSQL (same tests).

In-process tests cover the API (submit, handles, priorities, resume,
cancel, failures, unknown workflows, fencing at the saver); the process
tests (test_worker_processes.py) kill and pause real worker processes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import fleet_flows
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.runs import list_runs
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.errors import LeaseLostError, RunCancelledError, RunFailedError
from pregelkit.func import entrypoint, task
from pregelkit.types import Command
from pregelkit.worker import AsyncWorker, Worker


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_submit_runs_and_returns_results(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handle = chain.submit(4, cfg("t1"))
    assert handle.thread_id == "t1"
    assert handle.status() == "queued"
    again = chain.submit(99, cfg("t1"))  # idempotent while queued: same run
    assert again == handle
    worker = Worker([fleet_flows.chain], saver, concurrency=2, lease_seconds=5)
    assert worker.run_until_idle() == 1
    assert handle.status() == "done"
    assert handle.result(timeout=5) == 0 + 1 + 2 + 3
    # the run's steps were logged once each, under the first lease
    rows = fleet_flows.log_rows(queue_db[0])
    assert [(r[0], r[1], r[3]) for r in rows] == [("t1", i, 1) for i in range(4)]
    # a finished thread gets a new run when submitted again
    assert chain.submit(2, cfg("t1")) != handle


def test_higher_priority_runs_first(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    order: list[str] = []

    @entrypoint(checkpointer=saver)
    def record(name: str) -> str:
        order.append(name)
        return name

    record.submit("low", cfg("low"))
    record.submit("high", cfg("high"), priority=10)
    record.submit("mid", cfg("mid"), priority=5)
    record.submit("low2", cfg("low2"))
    assert Worker([record], saver, concurrency=1).run_until_idle() == 4
    assert order == ["high", "mid", "low", "low2"]


def test_interrupt_then_queued_resume(queue_db: tuple[str, Any], arun: Any) -> None:
    _, saver = queue_db
    ask = fleet_flows.ask.copy(checkpointer=saver)
    first = ask.submit("ship it?", cfg("q"))
    worker = Worker([ask], saver)
    worker.run_until_idle()
    assert first.status() == "interrupted"
    out = first.result()
    assert out["__interrupt__"][0].value == "ship it?"

    async def resume() -> Any:
        handle = await ask.asubmit(Command(resume="yes"), cfg("q"))
        assert await handle.astatus() == "queued"
        return handle

    second = arun(resume())
    worker.run_until_idle()
    assert arun(second.aresult(timeout=5)) == {"question": "ship it?", "answer": "yes"}
    assert first.status() == "interrupted"  # a handle keeps telling about its own run


def test_failed_run_reports_its_error(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    boom = fleet_flows.boom.copy(checkpointer=saver)
    handle = boom.submit("disk on fire", cfg("b"))
    Worker([boom], saver).run_until_idle()
    assert handle.status() == "failed"
    with pytest.raises(RunFailedError, match="ValueError: disk on fire"):
        handle.result()


def test_unknown_workflow_stays_queued_and_runs_says_why(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    handle = fleet_flows.slow.copy(checkpointer=saver).submit([0.0], cfg("orphan"))
    worker = Worker([fleet_flows.chain], saver)
    assert worker.run_until_idle() == 0
    assert handle.status() == "queued"
    (record,) = list_runs(saver, "queued")
    assert record.waiting is not None
    assert "no live worker serves workflow 'slow':" in record.waiting  # it stopped
    served = threading.Thread(target=worker.run)
    served.start()
    try:
        time.sleep(0.5)
        (record,) = list_runs(saver, "queued")
        assert record.waiting is not None
        assert "(live workers serve: chain)" in record.waiting
    finally:
        worker.stop()
        served.join(timeout=10)
    assert not served.is_alive()
    with pytest.raises(TimeoutError, match="still queued"):
        handle.result(timeout=0.1)


def test_cancel_queued_and_running(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    slow = fleet_flows.slow.copy(checkpointer=saver)
    queued = slow.submit([0.0], cfg("never"))
    assert queued.cancel() == "cancelled"
    with pytest.raises(RunCancelledError):
        queued.result()
    running = slow.submit([0.2] * 50, cfg("long"))
    worker = Worker([slow], saver, concurrency=1, lease_seconds=5)
    served = threading.Thread(target=worker.run_until_idle)
    served.start()
    deadline = time.monotonic() + 10
    # cancel once the run has saved a step (a cancel noticed before its first
    # checkpoint leaves nothing to show "stopped midway", even if correct)
    while time.monotonic() < deadline and not (
        running.status() == "running" and slow.get_state(cfg("long")).next
    ):
        time.sleep(0.02)
    assert running.cancel() == "running"
    served.join(timeout=20)
    assert not served.is_alive()
    assert running.status() == "cancelled"
    with pytest.raises(RunCancelledError):
        running.result()
    # what finished before the cancel is saved; a new submit runs the thread again
    state = slow.get_state(cfg("long"))
    assert state.next  # stopped midway
    again = slow.submit(None, cfg("long"))
    assert again.status() == "queued"


def test_fence_refuses_a_stale_holders_writes(queue_db: tuple[str, Any]) -> None:
    """The saver half of fencing, without processes: once a run is claimed
    again, a write carrying the old lease is refused and changes nothing."""
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handle = chain.submit(3, cfg("f"))
    first = saver.run_queue(
        lambda d: _runqueue.claim(d, "a", ["chain"], 1, 0.1), "claim"
    )[0]  # fmt: skip
    time.sleep(0.3)  # the lease expires
    second = saver.run_queue(lambda d: _runqueue.claim(d, "b", ["chain"], 1, 30), "claim")[0]
    assert (first.run_id, first.fence + 1) == (second.run_id, second.fence)
    stale = {
        "configurable": {
            "thread_id": "f",
            "checkpoint_ns": "",
            "checkpoint_id": "1",
            "__pregelkit_lease": (first.run_id, first.fence),
        }
    }
    with pytest.raises(LeaseLostError, match="lease"):
        saver.put_writes(stale, [("x", 1)], "task-1")
    with pytest.raises(LeaseLostError):
        saver.put_writes(stale, [("x", 1), ("y", 2)], "task-1")
    with pytest.raises(LeaseLostError), saver.grouped():  # in a block of saves too
        saver.put_writes(stale, [("x", 1)], "task-1")
    assert saver.get_tuple({"configurable": {"thread_id": "f"}}) is None
    assert handle.status() == "running"
    # the old holder cannot record an end either
    with pytest.raises(LeaseLostError):
        saver.run_queue(
            lambda d: _runqueue.finish(d, (first.run_id, first.fence), "done", None, None),
            "finish",
        )


def test_heartbeat_judges_only_the_runs_it_renewed(queue_db: tuple[str, Any]) -> None:
    """A run claimed while a heartbeat was on its way (the heartbeat read
    the runs held before the claim) is not taken for lost; a run whose lease
    another worker took is."""
    from pregelkit.worker._core import WorkerCore

    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    chain.submit(1, cfg("old"))
    core = WorkerCore([chain], saver, concurrency=4, lease_seconds=0.2, worker_id="w")
    (old,) = saver.run_queue(core.claim_plan(), "claim")
    core.start(old)
    beat = core.heartbeat_plan()  # reads the runs held now: only "old"
    time.sleep(0.4)  # old's lease expires and another worker takes it
    saver.run_queue(lambda d: _runqueue.claim(d, "other", ["chain"], 1, 30), "claim")
    chain.submit(2, cfg("new"))
    (new,) = saver.run_queue(core.claim_plan(), "claim")
    core.start(new)
    core.renewed(saver.run_queue(beat, "renew leases"))
    assert core.held[old.run_id].lost
    assert not core.held[new.run_id].lost


def test_heartbeat_renews_more_runs_than_one_statement_takes(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, saver = queue_db
    monkeypatch.setattr(_runqueue, "HEARTBEAT_BATCH", 2)
    chain = fleet_flows.chain.copy(checkpointer=saver)
    for i in range(5):
        chain.submit(1, cfg(f"b{i}"))
    claimed = saver.run_queue(lambda d: _runqueue.claim(d, "w", ["chain"], 5, 30), "claim")
    held = [(c.run_id, c.fence) for c in claimed]
    stale = (held[0][0], held[0][1] - 1)  # an older lease of a run: not renewed
    unrenewed = saver.run_queue(
        lambda d: _runqueue.heartbeat(d, "w", ["chain"], [*held, stale], 30), "renew"
    )
    assert len(held) == 5
    assert unrenewed == {stale}


def test_idle_worker_asks_less_often_and_wakes_on_work(queue_db: tuple[str, Any]) -> None:
    """An empty queue makes the pause between claims grow (within 20%
    jitter) up to a heartbeat at most; a claim that took runs resets it."""
    from pregelkit.worker._core import WorkerCore

    _, saver = queue_db
    core = WorkerCore([fleet_flows.chain], saver, concurrency=2, lease_seconds=1.5, worker_id="w")
    pauses = [core.pause(0, asked=True) for _ in range(6)]
    assert 0.16 <= pauses[0] <= 0.24
    assert 0.32 <= pauses[1] <= 0.48
    assert all(0.4 <= p <= 0.6 for p in pauses[3:])  # capped at the heartbeat (0.5 s)
    assert 0.16 <= core.pause(1, asked=True) <= 0.24
    assert 0.16 <= core.pause(0, asked=True) <= 0.24


def test_arguments_are_checked(queue_db: tuple[str, Any], tmp_path: Path) -> None:
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    with pytest.raises(ValueError, match="thread id"):
        chain.submit(1, {})
    with pytest.raises(TypeError, match="priority"):
        chain.submit(1, cfg("x"), priority="high")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot be serialized"):
        chain.submit(threading.Lock(), cfg("x"))
    with pytest.raises(ValueError, match="concurrency"):
        Worker([chain], saver, concurrency=0)
    with pytest.raises(ValueError, match="lease_seconds"):
        Worker([chain], saver, lease_seconds=0)
    with pytest.raises(TypeError, match="list of workflows"):
        Worker(chain, saver)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two workflows are named 'chain'"):
        Worker([chain, fleet_flows.chain], saver)
    with pytest.raises(TypeError, match="keeps no run queue"):
        Worker([chain], InMemorySaver())
    with pytest.raises(TypeError, match="keeps no run queue"):
        fleet_flows.chain.copy(checkpointer=InMemorySaver()).submit(1, cfg("x"))
    with pytest.raises(ValueError, match="no checkpointer"):
        fleet_flows.chain.submit(1, cfg("x"))
    with pytest.raises(ValueError, match="unknown run status"):
        list_runs(saver, "finished")


def test_worker_runs_sync_tasks_in_parallel(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db

    @task
    def nap(x: int) -> int:
        time.sleep(0.3)
        return x

    @entrypoint(checkpointer=saver)
    def napper(x: int) -> int:
        return nap(x).result()

    handles = [napper.submit(i, cfg(f"n{i}")) for i in range(4)]
    started = time.monotonic()
    Worker([napper], saver, concurrency=4).run_until_idle()
    assert [h.result() for h in handles] == [0, 1, 2, 3]
    assert time.monotonic() - started < 4 * 0.3 + 1.0  # generous: they overlapped


def test_async_worker_on_async_savers(queue_db: tuple[str, Any], arun: Any) -> None:
    url, _ = queue_db

    @task
    async def double(x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    @entrypoint()
    async def doubler(xs: list[int]) -> list[int]:
        return [await double(x) for x in xs]

    async def main() -> None:
        if url.startswith("postgresql://"):
            opened: Any = AsyncPostgresSaver.from_conn_string(url)
        else:
            opened = AsyncSqliteSaver.from_conn_string(url)
        async with opened as saver:
            wf = doubler.copy(checkpointer=saver)
            handles = [await wf.asubmit([i, i + 1], cfg(f"a{i}")) for i in range(3)]
            ask = await fleet_flows.ask.copy(checkpointer=saver).asubmit("ok?", cfg("ask"))
            worker = AsyncWorker([doubler, fleet_flows.ask], saver, concurrency=2)
            assert await worker.run_until_idle() == 4
            assert [await h.aresult(timeout=5) for h in handles] == [[0, 2], [2, 4], [4, 6]]
            assert await ask.astatus() == "interrupted"
            # run() serves until stop(), here from another task
            resumed = await fleet_flows.ask.copy(checkpointer=saver).asubmit(
                Command(resume="fine"), cfg("ask")
            )
            serving = asyncio.create_task(worker.run())
            assert await resumed.aresult(timeout=10) == {"question": "ok?", "answer": "fine"}
            worker.stop()
            await asyncio.wait_for(serving, 10)

    arun(main())
