"""A worker watches the cancel marks of all the runs it holds in one read
(``_runqueue.cancels``); its runs poll nothing. On SQLite and PostgreSQL,
threads and asyncio: a cancel, through the queue or by marking the thread
alone, stops exactly the run it names, promptly, while the worker's other
runs finish; a drain still reaches every run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import fleet_flows
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.runs import RunHandle
from pregelkit.errors import RunCancelledError
from pregelkit.pregel._core import perform
from pregelkit.worker import AsyncWorker, Worker


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _when(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _midway(slow: Any, handle: RunHandle) -> Callable[[], bool]:
    """The run is running and has saved a step (a cancel seen before its
    first checkpoint leaves nothing to show it stopped midway)."""
    return lambda: handle.status() == "running" and bool(slow.get_state(cfg(handle.thread_id)).next)


class _Counting:
    """Counts the runs that had their mark polled (``WATCHER``, ``awatch``)
    and the worker's cancels reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.polled = 0
        self.watches = 0
        add, awatch = perform.WATCHER.add, perform.awatch

        def polled(*args: Any) -> Any:
            self.polled += 1
            return (awatch if len(args) == 3 else add)(*args)

        monkeypatch.setattr(perform.WATCHER, "add", polled)
        monkeypatch.setattr(perform, "awatch", polled)
        cancels = _runqueue.cancels

        def counted(d: Any, run_ids: Any) -> Any:
            self.watches += 1
            return (yield from cancels(d, run_ids))

        monkeypatch.setattr(_runqueue, "cancels", counted)


@pytest.mark.parametrize("how", ["handle", "thread mark"])
def test_a_cancel_stops_only_its_run_and_runs_poll_nothing(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    _, saver = queue_db
    counting = _Counting(monkeypatch)
    slow = fleet_flows.slow.copy(checkpointer=saver)
    doomed = slow.submit([0.1] * 60, cfg("doomed"))
    others = [slow.submit([0.1] * 8, cfg(f"other{i}")) for i in range(2)]
    worker = Worker([slow], saver, concurrency=3, lease_seconds=5)
    served = threading.Thread(target=worker.run_until_idle)
    served.start()
    try:
        _when(_midway(slow, doomed))
        started = time.monotonic()
        if how == "handle":
            assert doomed.cancel() == "running"
        else:  # the mark alone, as a cancel(config) racing the claim leaves it
            saver.put_thread_control("doomed", "cancelled")
        with pytest.raises(RunCancelledError):
            doomed.result(timeout=10)
        # seen within a poll or two, then the task running ends (0.1 s)
        assert time.monotonic() - started < 1.5
        assert [h.result(timeout=10) for h in others] == [pytest.approx(0.8)] * 2
    finally:
        worker.stop()
        served.join(timeout=20)
    assert doomed.status() == "cancelled"
    assert slow.get_state(cfg("doomed")).next  # stopped midway, its steps saved
    # no run polled its mark: the worker's one read a poll covered them all
    assert counting.polled == 0
    assert counting.watches >= 5


def test_a_drain_still_reaches_every_run(queue_db: tuple[str, Any]) -> None:
    """Each run has a control of its own now: stopping the worker drains
    them all, and they go back to the queue."""
    _, saver = queue_db
    slow = fleet_flows.slow.copy(checkpointer=saver)
    handles = [slow.submit([0.1] * 40, cfg(f"d{i}")) for i in range(3)]
    worker = Worker([slow], saver, concurrency=3, lease_seconds=5)
    served = threading.Thread(target=worker.run)
    served.start()
    _when(lambda: all(_midway(slow, h)() for h in handles))
    worker.stop()
    served.join(timeout=20)
    assert not served.is_alive()
    assert [h.status() for h in handles] == ["queued"] * 3


def test_async_worker_cancels_through_its_watch(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, saver = queue_db
    counting = _Counting(monkeypatch)
    slow = fleet_flows.slow.copy(checkpointer=saver)
    doomed = slow.submit([0.1] * 60, cfg("adoomed"))
    other = slow.submit([0.1] * 6, cfg("aother"))
    worker = AsyncWorker([slow], saver, concurrency=2, lease_seconds=5)

    async def main() -> None:
        served = asyncio.create_task(worker.run_until_idle())
        while not await asyncio.to_thread(_midway(slow, doomed)):
            await asyncio.sleep(0.02)
        await asyncio.to_thread(doomed.cancel)
        await asyncio.wait_for(served, 20)

    asyncio.run(main())
    assert doomed.status() == "cancelled"
    assert other.result(timeout=1) == pytest.approx(0.6)
    assert counting.polled == 0
    assert counting.watches >= 3


def test_the_watch_reads_every_run_held_in_batches(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More runs held than one statement takes: a read per batch, each a
    statement of its own, and only the cancelled run is stopped (once)."""
    from pregelkit.worker._core import WorkerCore

    _, saver = queue_db
    monkeypatch.setattr(_runqueue, "HEARTBEAT_BATCH", 2)
    chain = fleet_flows.chain.copy(checkpointer=saver)
    handles = [chain.submit(1, cfg(f"b{i}")) for i in range(5)]
    core = WorkerCore([chain], saver, concurrency=5, lease_seconds=30, worker_id="w")
    claimed = saver.run_queue(core.claim_plan(), "claim", single=True)
    controls = {run.run_id: core.start(run)[3] for run in claimed}
    assert handles[3].cancel() == "running"
    saver.put_thread_control("b4", "cancelled")
    plans = core.cancels_plans()
    assert len(plans) == 3
    for _ in range(2):  # seen twice, stopped once
        for plan in plans:
            core.cancelled(saver.run_queue(plan, "read cancels", single=True))
    stopped = {run_id for run_id, held in core.held.items() if held.cancelled}
    assert stopped == {handles[3].run_id, handles[4].run_id}
    assert all(controls[r]._cancelled == (r in stopped) for r in controls)
