"""The fence folded into the writes it guards (``_runqueue.fenced``), on
SQLite and PostgreSQL: a leased run's checkpoint and task writes check its
lease inside their last insert, no statement of their own. A stale holder
saves nothing (not even the rows sent before the fenced one); an upsert
that keeps the row it meets is not taken for a lost lease; on PostgreSQL a
claim waits for the fenced transaction to end.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import fleet_flows
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.attempts import AttemptRecord, attempt_row
from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.errors import LeaseLostError


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _claimed(saver: Any, thread: str, lease_seconds: float = 30) -> _runqueue.Claimed:
    fleet_flows.chain.copy(checkpointer=saver).submit(1, cfg(thread))
    (claimed,) = saver.run_queue(
        lambda d: _runqueue.claim(d, "w", ["chain"], 1, lease_seconds), "claim"
    )
    return claimed


def _leased(thread: str, lease: tuple[str, int], checkpoint_id: str = "") -> dict[str, Any]:
    conf = {"thread_id": thread, "checkpoint_ns": "", "__pregelkit_lease": lease}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _attempt(thread: str, run_id: str, outcome: str | None) -> Any:
    return attempt_row(
        AttemptRecord(
            thread, "", run_id, 0, "task-1", "add", 1, 1.0,
            None if outcome is None else 2.0, outcome, None, None, 1, "host", "w",
        )
    )  # fmt: skip


def _take_over(saver: Any, first: _runqueue.Claimed) -> _runqueue.Claimed:
    time.sleep(0.3)  # the first lease (0.1 s) expires
    (second,) = saver.run_queue(lambda d: _runqueue.claim(d, "b", ["chain"], 1, 30), "claim")
    assert (second.run_id, second.fence) == (first.run_id, first.fence + 1)
    return second


def test_a_stale_checkpoint_saves_nothing_not_even_its_blobs(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    first = _claimed(saver, "s", lease_seconds=0.1)
    _take_over(saver, first)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": 1}
    checkpoint["channel_versions"] = {"x": 1}
    with pytest.raises(LeaseLostError):
        saver.put(_leased("s", (first.run_id, first.fence)), checkpoint, {}, {"x": 1})
    assert saver.get_tuple(cfg("s")) is None
    assert saver.run_queue(_count_blobs, "count") == 0


def _count_blobs(d: _runqueue.Dialect) -> _runqueue.RunPlan[int]:
    row = yield d.q("SELECT count(*) FROM pregelkit_blobs", (), "one")
    return int(row[0])


def test_stale_writes_and_attempts_save_nothing(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    first = _claimed(saver, "w", lease_seconds=0.1)
    lease = (first.run_id, first.fence)
    saved = saver.put(_leased("w", lease), empty_checkpoint(), {}, {})
    _take_over(saver, first)
    stale = _leased("w", lease, saved["configurable"]["checkpoint_id"])
    done = _attempt("w", first.run_id, "ok")
    with pytest.raises(LeaseLostError):
        saver.put_writes(stale, [("a", 1), ("b", 2)], "task-1", attempts=[done, done])
    with pytest.raises(LeaseLostError):
        saver.put_writes(stale, [("a", 1), ("b", 2)], "task-1")
    assert saver.get_tuple(cfg("w")).pending_writes == []
    assert saver.list_attempts("w") == []


def test_an_upsert_that_keeps_its_row_is_no_lost_lease(queue_db: tuple[str, Any]) -> None:
    """A task's writes saved again (a retried save) and a start record
    arriving after its end change no row: the fence is then asked on its
    own, and the lease still being ours, the save goes through."""
    _, saver = queue_db
    claimed = _claimed(saver, "k")
    lease = (claimed.run_id, claimed.fence)
    saved = saver.put(_leased("k", lease), empty_checkpoint(), {}, {})
    config = _leased("k", lease, saved["configurable"]["checkpoint_id"])
    saver.put_writes(config, [("a", 1)], "task-1")
    saver.put_writes(config, [("a", 1)], "task-1")  # kept: changes nothing
    saver.put_writes(config, [], "task-1", attempts=[_attempt("k", claimed.run_id, "ok")])
    start = _attempt("k", claimed.run_id, None)
    saver.put_writes(config, [], "task-1", attempts=[start])  # the end record stays
    assert [w[1:] for w in saver.get_tuple(cfg("k")).pending_writes] == [("a", 1)]
    assert [a.outcome for a in saver.list_attempts("k")] == ["ok"]


# SQLite serializes writers: no claim runs during a write
@pytest.mark.parametrize("queue_db", ["postgres"], indirect=True)
def test_a_block_of_saves_taken_over_before_it_ends_saves_nothing(
    queue_db: tuple[str, Any],
) -> None:
    """PostgreSQL: a grouped() block keeps a leased run's rows and sends
    them as one statement at its end, the fence a clause of it. A worker
    that took the run over meanwhile wins: the block fails with
    ``LeaseLostError`` and nothing of it is written."""
    _, saver = queue_db
    first = _claimed(saver, "c", lease_seconds=0.1)
    lease = (first.run_id, first.fence)
    saved = saver.put(_leased("c", lease), empty_checkpoint(), {}, {})
    config = _leased("c", lease, saved["configurable"]["checkpoint_id"])

    def claim() -> list[_runqueue.Claimed]:
        claimed: list[_runqueue.Claimed] = []
        taker = threading.Thread(  # another connection of the pool
            target=lambda: claimed.extend(
                saver.run_queue(lambda d: _runqueue.claim(d, "b", ["chain"], 1, 30), "claim")
            )
        )
        taker.start()
        taker.join(10)
        return claimed

    with pytest.raises(LeaseLostError), saver.grouped():
        saver.put_writes(config, [("a", 1)], "task-1")
        saver.put_writes(config, [("b", 2)], "task-2", attempts=[_attempt("c", first.run_id, "ok")])
        time.sleep(0.2)  # the lease expires while the block is open
        assert [(c.run_id, c.fence) for c in claim()] == [(first.run_id, first.fence + 1)]
    assert saver.get_tuple(cfg("c")).pending_writes == []
    assert saver.list_attempts("c") == []


@pytest.mark.parametrize("queue_db", ["postgres"], indirect=True)  # its combined statements
def test_every_statement_of_a_split_batch_is_fenced(
    queue_db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: a save with more parameters than one statement takes is
    several statements, each carrying the fence: a stale lease writes none."""
    _, saver = queue_db
    from pregelkit.checkpoint.postgres import _batch

    monkeypatch.setattr(_batch, "MOST_PARAMETERS", 20)  # two write rows a statement
    first = _claimed(saver, "m", lease_seconds=0.1)
    lease = (first.run_id, first.fence)
    saved = saver.put(_leased("m", lease), empty_checkpoint(), {}, {})
    config = _leased("m", lease, saved["configurable"]["checkpoint_id"])
    writes = [(f"c{i}", i) for i in range(7)]
    saver.put_writes(config, writes, "task-1")
    assert len(saver.get_tuple(cfg("m")).pending_writes) == 7
    _take_over(saver, first)
    with pytest.raises(LeaseLostError):
        saver.put_writes(config, writes, "task-2")
    assert len(saver.get_tuple(cfg("m")).pending_writes) == 7
