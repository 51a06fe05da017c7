"""A run's end claims the run that takes its slot (``_runqueue.finish_and_claim``:
one statement on PostgreSQL), and the worker's thread or task that ran the
one runs the other: a busy worker makes no claim of its own. On SQLite and
PostgreSQL, threads and asyncio: the end is recorded only under its lease,
the run ending is never claimed again by its own end, and a worker never
holds more runs than its concurrency.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import pytest

import fleet_flows
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.worker import AsyncWorker, Worker
from pregelkit.worker._core import WorkerCore


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _end(lease: tuple[str, int], worker: str = "w") -> Any:
    return partial(
        _runqueue.finish_and_claim,
        lease=lease,
        status="done",
        result=("json", b"1"),
        error=None,
        worker_id=worker,
        workflows=["chain"],
        lease_seconds=30,
    )


def test_an_end_is_recorded_under_its_lease_and_claims_the_next_run(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handles = [chain.submit(1, cfg(f"e{i}")) for i in range(3)]
    (first,) = saver.run_queue(lambda d: _runqueue.claim(d, "w", ["chain"], 1, 30), "claim")
    ended, second = saver.run_queue(_end((first.run_id, first.fence)), "end", single=True)
    assert ended
    assert second is not None and second.run_id == handles[1].run_id
    assert handles[0].status() == "done" and handles[1].status() == "running"
    # an end under a lease no longer the run's records nothing, and still claims
    ended, third = saver.run_queue(_end((second.run_id, second.fence - 1)), "end", single=True)
    assert not ended
    assert third is not None and third.run_id == handles[2].run_id
    assert handles[1].status() == "running"
    ended, none = saver.run_queue(_end((third.run_id, third.fence)), "end", single=True)
    assert ended and none is None
    assert handles[2].status() == "done"


def test_a_run_whose_lease_expired_is_not_claimed_by_its_own_end(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    handle = fleet_flows.chain.copy(checkpointer=saver).submit(1, cfg("x"))
    (run,) = saver.run_queue(lambda d: _runqueue.claim(d, "w", ["chain"], 1, 0.1), "claim")
    time.sleep(0.3)  # expired, but nobody took it: the end is still ours to record
    ended, claimed = saver.run_queue(_end((run.run_id, run.fence)), "end", single=True)
    assert ended and claimed is None
    record = handle.record()
    assert (record.status, record.attempts) == ("done", 1)


class _Counted:
    """Claims and ends made, and the most runs held at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.claims = 0
        self.ends = 0
        self.most = 0
        claim, end, start = _runqueue.claim, _runqueue.finish_and_claim, WorkerCore.start

        def counted_claim(*args: Any, **kwargs: Any) -> Any:
            self.claims += 1
            return (yield from claim(*args, **kwargs))

        def counted_end(*args: Any, **kwargs: Any) -> Any:
            self.ends += 1
            return (yield from end(*args, **kwargs))

        def counted_start(core: WorkerCore, claimed: Any) -> Any:
            started = start(core, claimed)
            self.most = max(self.most, len(core.held))
            return started

        monkeypatch.setattr(_runqueue, "claim", counted_claim)
        monkeypatch.setattr(_runqueue, "finish_and_claim", counted_end)
        monkeypatch.setattr(WorkerCore, "start", counted_start)


def test_a_busy_worker_claims_with_the_ends_of_its_runs(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, saver = queue_db
    counted = _Counted(monkeypatch)
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handles = [chain.submit(2, cfg(f"b{i}")) for i in range(8)]
    worker = Worker([fleet_flows.chain], saver, concurrency=2, lease_seconds=5)
    assert worker.run_until_idle() == 8
    assert [h.result(timeout=5) for h in handles] == [1] * 8
    assert counted.ends == 8
    # the first claim, and those after an end found the queue empty
    assert counted.claims <= 4
    assert counted.most <= 2


def test_an_async_worker_claims_with_the_ends_of_its_runs(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, arun: Any
) -> None:
    url, _ = queue_db
    counted = _Counted(monkeypatch)

    @task
    async def one(x: int) -> int:
        return x + 1

    @entrypoint()
    async def adder(x: int) -> int:
        return await one(x)

    async def main() -> None:
        if url.startswith("postgresql://"):
            opened: Any = AsyncPostgresSaver.from_conn_string(url)
        else:
            opened = AsyncSqliteSaver.from_conn_string(url)
        async with opened as saver:
            wf = adder.copy(checkpointer=saver)
            handles = [await wf.asubmit(i, cfg(f"a{i}")) for i in range(8)]
            worker = AsyncWorker([adder], saver, concurrency=2, lease_seconds=5)
            assert await worker.run_until_idle() == 8
            assert [await h.aresult(timeout=5) for h in handles] == list(range(1, 9))

    arun(main())
    assert counted.ends == 8
    assert counted.claims <= 4
    assert counted.most <= 2


def test_a_stopping_worker_ends_its_runs_without_claiming(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, saver = queue_db
    counted = _Counted(monkeypatch)
    chain = fleet_flows.chain.copy(checkpointer=saver)
    first = chain.submit(2, cfg("s0"))
    waiting = chain.submit(2, cfg("s1"))
    core = WorkerCore([chain], saver, concurrency=1, lease_seconds=5, worker_id="w")
    (claimed,) = saver.run_queue(core.claim_plan(), "claim", single=True)
    core.start(claimed)
    core.stop()
    outcome = core.outcome(claimed, 1, None)
    assert not outcome.refills
    assert outcome.plan is not None
    saver.run_queue(outcome.plan, "end", single=True)
    assert core.recorded(outcome, None) is None
    assert first.status() == "done" and waiting.status() == "queued"
    assert counted.ends == 0


def test_a_failed_end_gives_its_slot_back(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording the end failed: nothing was claimed with it, and the slot
    held for the next run is free for the serving loop's claim."""
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    chain.submit(2, cfg("f0"))
    core = WorkerCore([chain], saver, concurrency=1, lease_seconds=5, worker_id="w")
    (claimed,) = saver.run_queue(core.claim_plan(), "claim", single=True)
    core.start(claimed)
    outcome = core.outcome(claimed, 1, None)
    assert outcome.refills and core.claim_plan() is None  # the slot is held for the next run
    assert core.recorded(outcome, None) is None
    assert core.claim_plan() is not None


def test_a_run_claimed_with_an_end_that_cannot_start_is_not_held(
    queue_db: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Its input or config cannot be read (a serializer that does not match
    the one that queued it): logged, not held (its lease lapses), and the
    slot is free again."""
    _, saver = queue_db
    chain = fleet_flows.chain.copy(checkpointer=saver)
    chain.submit(2, cfg("ok"))
    bad = chain.submit(2, cfg("bad"))
    sql = "UPDATE pregelkit_runs SET config_type = 'no such type' WHERE run_id = ?"
    saver.run_queue(lambda d: (yield d.q(sql, (bad.run_id,))), "spoil")
    core = WorkerCore([chain], saver, concurrency=1, lease_seconds=5, worker_id="w")
    (claimed,) = saver.run_queue(core.claim_plan(), "claim", single=True)
    core.start(claimed)
    outcome = core.outcome(claimed, 1, None)
    answer = saver.run_queue(outcome.plan, "end", single=True)
    assert answer[1] is not None and answer[1].run_id == bad.run_id
    assert core.recorded(outcome, answer) is None
    assert "cannot start it" in caplog.text
    assert core.held == {} and core.claim_plan() is not None
