"""Named queues with limits (``pregelkit.durable.Queue``), enforced inside
the claim on SQLite and PostgreSQL: concurrency fleet-wide, per worker and
per key, a sliding-window rate limit (on a FakeClock), the limits read at
each claim (the latest declaration wins), a slot freed when its lease
expires, and ``finish_and_claim`` counting the slot its run leaves.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest

from pregelkit._internal._plan import Whole
from pregelkit.checkpoint import _queues, _runqueue, _waits
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.durable import Queue, declare_queue
from pregelkit.errors import RunCancelledError, UnknownQueueError
from pregelkit.func import entrypoint
from pregelkit.testing import FakeClock
from pregelkit.worker import AsyncWorker, Worker


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@entrypoint()
def job(x: Any) -> Any:
    return x


def claim(
    saver: Any,
    worker: str,
    limit: int = 10,
    queues: tuple[str, ...] = ("q",),
    known: _queues.Known | None = None,
) -> list[str]:
    taken = saver.run_queue(
        lambda d: _queues.claim(d, worker, ["job"], list(queues), limit, 30, known=known),
        "claim",
    )
    return sorted(c.thread_id for c in taken)


def _one(sql: str, params: tuple[Any, ...], fetch: Any = "one") -> Any:
    def plan(d: Any) -> Any:
        return (yield d.q(sql, params, fetch))

    return plan


def end(saver: Any, thread: str) -> None:
    run = saver.run_queue(
        _one(
            "SELECT run_id, fence FROM pregelkit_runs WHERE thread_id = ? AND status = 'running'",
            (thread,),
        ),
        "look",
    )
    saver.run_queue(
        lambda d: _runqueue.finish(d, (run[0], run[1]), "done", None, None), "end", single=True
    )


def expire(saver: Any, thread: str) -> None:
    """The thread's holder stopped renewing (SIGKILL, SIGSTOP): its lease is past."""
    saver.run_queue(
        _one(
            "UPDATE pregelkit_runs SET lease_until = lease_until - 1000 WHERE thread_id = ?",
            (thread,),
            None,
        ),
        "expire",
    )


# declarations


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"concurrency": 0}, ValueError, "runs nothing"),
        ({"concurrency": -1}, ValueError, "at least 1"),
        ({"worker_concurrency": 2**40}, ValueError, "at most"),
        ({"key_concurrency": True}, TypeError, "int or None"),
        ({"concurrency": 2.0}, TypeError, "int or None"),
        ({"rate_limit": 5}, TypeError, "(n, per_seconds)"),
        ({"rate_limit": (5, 0)}, ValueError, "per_seconds"),
        ({"rate_limit": (0, 1)}, ValueError, "at least 1"),
        ({"rate_limit": (5, float("inf"))}, ValueError, "per_seconds"),
        ({"rate_limit": (5, True)}, TypeError, "per_seconds"),
    ],
)
def test_a_queue_checks_its_limits_when_made(kwargs: Any, error: type, says: str) -> None:
    with pytest.raises(error, match=None) as info:
        Queue("q", **kwargs)
    assert says in str(info.value)


def test_a_queue_needs_a_name() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        Queue("")


def test_a_submit_to_an_undeclared_queue_names_the_declared_ones(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    wf = job.copy(checkpointer=saver)
    with pytest.raises(UnknownQueueError, match="declared queues: none"):
        wf.submit(1, cfg("a"), queue="emails")
    declare_queue(saver, Queue("sms"))
    declare_queue(saver, Queue("push", concurrency=1))
    with pytest.raises(UnknownQueueError, match="declared queues: 'push', 'sms'"):
        wf.submit(1, cfg("a"), queue="emails")
    assert saver.run_queue(lambda d: _runqueue.pending(d, ["job"], ("", "emails")), "n") == 0


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"key": "k"}, "needs queue="),
        ({"queue": "q", "debounce": 1}, "needs key="),
        ({"queue": "q", "key": "k", "debounce": -1}, "debounce"),
        ({"queue": "q", "key": "k", "debounce": True}, "debounce"),
        ({"queue": ""}, "default queue"),
        ({"queue": "q", "key": ""}, "non-empty"),
    ],
)
def test_submit_checks_its_routing_before_the_database(
    queue_db: tuple[str, Any], kwargs: Any, says: str
) -> None:
    _, saver = queue_db
    with pytest.raises((ValueError, TypeError)) as info:
        job.copy(checkpointer=saver).submit(1, cfg("a"), **kwargs)
    assert says in str(info.value)


def test_a_worker_refuses_a_queue_name_never_declared(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    worker = Worker([job], saver, queues=["nope"], lease_seconds=5)
    with pytest.raises(UnknownQueueError, match="'nope'"):
        worker.run_until_idle()


# limits in the claim


def test_concurrency_holds_fleet_wide_and_per_worker(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=3, worker_concurrency=2))
    wf = job.copy(checkpointer=saver)
    for i in range(6):
        wf.submit(i, cfg(f"t{i}"), queue="q")
    assert claim(saver, "w1") == ["t0", "t1"]  # its worker_concurrency
    assert claim(saver, "w1") == []
    assert claim(saver, "w2") == ["t2"]  # the queue's concurrency
    assert claim(saver, "w3") == []
    end(saver, "t0")
    assert claim(saver, "w3") == ["t3"]


def test_a_key_at_its_limit_does_not_hold_the_runs_behind_it(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=3, key_concurrency=1))
    wf = job.copy(checkpointer=saver)
    for i in range(5):
        wf.submit(i, cfg(f"a{i}"), queue="q", key="a")
    wf.submit(9, cfg("b0"), queue="q", key="b")
    wf.submit(9, cfg("n0"), queue="q")  # no key: counts against the queue only
    assert claim(saver, "w1") == ["a0", "b0", "n0"]
    end(saver, "b0")
    end(saver, "n0")
    assert claim(saver, "w2") == []  # key a holds its one slot
    end(saver, "a0")
    assert claim(saver, "w2", limit=1) == ["a1"]


def test_an_expired_lease_frees_its_slot(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=1))
    wf = job.copy(checkpointer=saver)
    first = wf.submit(1, cfg("a"), queue="q")
    wf.submit(2, cfg("b"), queue="q")
    assert claim(saver, "w1") == ["a"]
    assert claim(saver, "w2") == []
    expire(saver, "a")  # its worker was SIGSTOPped or killed
    # the expired run is queued work again, first in line: it takes the slot back
    assert claim(saver, "w2") == ["a"]
    assert first.record().worker == "w2"
    assert claim(saver, "w3") == []


def test_a_lower_limit_declared_while_runs_hold_slots_lets_them_finish(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=3))
    wf = job.copy(checkpointer=saver)
    for i in range(6):
        wf.submit(i, cfg(f"t{i}"), queue="q")
    assert claim(saver, "w1") == ["t0", "t1", "t2"]
    declare_queue(saver, Queue("q", concurrency=1))
    end(saver, "t0")
    assert claim(saver, "w1") == []  # two still run: over the new limit, none stopped
    end(saver, "t1")
    assert claim(saver, "w1") == []
    end(saver, "t2")
    assert claim(saver, "w1") == ["t3"]
    declare_queue(saver, Queue("q"))  # no limits any more
    assert claim(saver, "w1") == ["t4", "t5"]


def test_a_claim_built_on_limits_since_changed_takes_nothing_of_that_queue(
    queue_db: tuple[str, Any],
) -> None:
    """A worker keeps the limits it last read (``Known``) and builds its
    claim on them, so that on PostgreSQL the lock, the claim and the COMMIT
    are one query; a claim on limits that changed since takes nothing of
    that queue, and the next one is built on the new limits."""
    url, saver = queue_db
    stale_first = url.startswith("postgresql://")  # SQLite reads the limits first anyway
    known = _queues.Known()

    def again(expected: list[str]) -> None:
        got = claim(saver, "w", known=known)
        if stale_first:
            assert got == [], "a claim on stale limits took runs"
            got = claim(saver, "w", known=known)
        assert got == expected

    declare_queue(saver, Queue("q", concurrency=3))
    wf = job.copy(checkpointer=saver)
    for i in range(8):
        wf.submit(i, cfg(f"t{i}"), queue="q")
    assert claim(saver, "w", known=known) == ["t0", "t1", "t2"]
    assert known.limits == {"q": _queues.Limits("q", concurrency=3)}
    end(saver, "t0")
    declare_queue(saver, Queue("q", concurrency=4))  # higher: its first claim waits one more
    again(["t3", "t4"])
    assert known.limits == {"q": _queues.Limits("q", concurrency=4)}
    assert claim(saver, "w", known=known) == []  # at the limit, on limits it knows
    declare_queue(saver, Queue("q"))  # no limits any more
    again(["t5", "t6", "t7"])
    assert known.limits == {}
    wf.submit(8, cfg("t8"), queue="q")
    declare_queue(saver, Queue("q", concurrency=1))  # limited again, 7 running
    assert claim(saver, "w", known=known) == []
    assert claim(saver, "w", known=known) == []
    assert known.limits == {"q": _queues.Limits("q", concurrency=1)}


def _whole(then_fail: bool, yield_after: bool = False) -> Any:
    """A transaction of one ``Whole`` effect: raise the run's priority,
    then (``then_fail``) read a table that is not there."""

    def plan(d: Any) -> Any:
        raise_it = d.q("UPDATE pregelkit_runs SET priority = 99 WHERE thread_id = ?", ("w",))
        last = d.q("SELECT 1 FROM no_such_table" if then_fail else "SELECT 1", (), "one")
        got = yield Whole((raise_it, last))
        if yield_after:
            yield d.q("SELECT 1", (), "one")
        return got[1]

    return plan


def _priority(saver: Any) -> int:
    look = _one("SELECT priority FROM pregelkit_runs WHERE thread_id = ?", ("w",))
    return int(saver.run_queue(look, "look")[0])


def test_a_whole_transaction_is_all_or_nothing(queue_db: tuple[str, Any], arun: Any) -> None:
    """``Whole`` (BEGIN, the statements and COMMIT as one query on
    PostgreSQL): a failing last statement keeps nothing of the first, and
    the connection serves the next call; a plan that yields after it is a
    bug, said."""
    url, saver = queue_db
    job.copy(checkpointer=saver).submit(1, cfg("w"))
    with pytest.raises(Exception, match="no_such_table"):
        saver.run_queue(_whole(then_fail=True), "whole")
    assert _priority(saver) == 0
    assert saver.run_queue(_whole(then_fail=False), "whole") == (1,)
    assert _priority(saver) == 99
    if url.startswith("postgresql://"):
        with pytest.raises(RuntimeError, match="after its Whole effect"):
            saver.run_queue(_whole(then_fail=False, yield_after=True), "whole")

        async def on_async() -> tuple[Any, int]:
            async with AsyncPostgresSaver.from_conn_string(url) as asaver:
                with pytest.raises(Exception, match="no_such_table"):
                    await asaver.arun_queue(_whole(then_fail=True), "whole")
                look = _one("SELECT priority FROM pregelkit_runs WHERE thread_id = ?", ("w",))
                return await asaver.arun_queue(_whole(False), "whole"), (
                    await asaver.arun_queue(look, "look")
                )[0]

        assert arun(on_async()) == ((1,), 99)


def test_huge_limits_are_no_limits(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    big = 2**31 - 1
    declare_queue(saver, Queue("q", big, big, (big, 1e6), big))
    wf = job.copy(checkpointer=saver)
    for i in range(4):
        wf.submit(i, cfg(f"t{i}"), queue="q", key="k")
    assert claim(saver, "w1") == ["t0", "t1", "t2", "t3"]


def test_the_end_of_a_run_claims_into_the_slot_it_leaves(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=1))
    wf = job.copy(checkpointer=saver)
    wf.submit(1, cfg("a"), queue="q")
    wf.submit(2, cfg("b"), queue="q")
    (a,) = saver.run_queue(lambda d: _queues.claim(d, "w", ["job"], ["q"], 5, 30), "claim")

    def end_and_claim(d: Any) -> Any:
        return _queues.finish_and_claim(
            d,
            (a.run_id, a.fence),
            "done",
            None,
            None,
            worker_id="w",
            workflows=["job"],
            queues=["q"],
            lease_seconds=30,
        )

    ended, b = saver.run_queue(end_and_claim, "end")
    assert ended and b is not None and b.thread_id == "b"
    assert claim(saver, "w2") == []


def test_default_and_named_queues_are_claimed_by_priority_together(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=5))
    wf = job.copy(checkpointer=saver)
    wf.submit(1, cfg("low"))
    wf.submit(1, cfg("high"), queue="q", priority=5)
    wf.submit(1, cfg("mid"), priority=3)
    taken = saver.run_queue(lambda d: _queues.claim(d, "w", ["job"], ["q"], 2, 30), "claim")
    assert sorted(c.thread_id for c in taken) == ["high", "mid"]
    # a worker of the default queue only never takes a named queue's run
    wf.submit(1, cfg("other"), queue="q", priority=9)
    taken = saver.run_queue(lambda d: _runqueue.claim(d, "w", ["job"], 5, 30), "claim")
    assert [c.thread_id for c in taken] == ["low"]


def test_the_rate_limit_is_a_sliding_window(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", rate_limit=(2, 10)))
    wf = job.copy(checkpointer=saver)
    for i in range(6):
        wf.submit(i, cfg(f"t{i}"), queue="q")
    with FakeClock(1000.0) as clock:
        assert claim(saver, "w", limit=1) == ["t0"]
        clock.advance(6)
        assert claim(saver, "w") == ["t1"]  # one start left in [996, 1006]
        clock.advance(3.9)
        assert claim(saver, "w") == []  # 1009.9: both starts still in the window
        clock.advance(0.2)
        assert claim(saver, "w") == ["t2"]  # 1010.1: t0's start left it
        clock.advance(1016.0 - clock.now())
        assert claim(saver, "w") == ["t3"]  # 1016.0: t1's start (1006) left it, the
        assert claim(saver, "w") == []  # window being half open: (1006, 1016]
        # a run whose worker died is started again: a start like any other
        clock.advance(100)
        expire(saver, "t3")
        assert claim(saver, "w", limit=5) == ["t3", "t4"]


# racing claimers


def test_racing_claimers_never_take_more_than_the_last_slot(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=3, key_concurrency=1))
    wf = job.copy(checkpointer=saver)
    for i in range(40):
        wf.submit(i, cfg(f"t{i}"), queue="q", key=f"k{i % 8}")
    start = threading.Barrier(8)
    taken: list[str] = []
    lock = threading.Lock()

    def race(n: int) -> None:
        start.wait()
        for _ in range(3):
            got = claim(saver, f"w{n}", limit=2)
            with lock:
                taken.extend(got)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taken) == 3


# workers


def _overlap(spans: list[tuple[str, float, float]], by: Any) -> int:
    """The most spans open at once within one group."""
    most = 0
    events = sorted(
        [(start, 1, name) for name, start, _ in spans]
        + [(stop, -1, name) for name, _, stop in spans]
    )
    counts: dict[Any, int] = {}
    for _, delta, name in events:
        counts[by(name)] = counts.get(by(name), 0) + delta
        most = max(most, counts[by(name)])
    return most


@entrypoint()
def timed(x: str) -> str:
    start = time.monotonic()
    time.sleep(0.03)
    with _SPANS_LOCK:
        _SPANS.append((x, start, time.monotonic()))
    return x


_SPANS: list[tuple[str, float, float]] = []
_SPANS_LOCK = threading.Lock()


def test_workers_keep_the_queue_and_key_limits(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    _SPANS.clear()
    queue = Queue("q", concurrency=3, key_concurrency=1, worker_concurrency=2)
    wf = timed.copy(checkpointer=saver)
    workers = [Worker([timed], saver, concurrency=4, lease_seconds=5, queues=[queue])]
    workers.append(Worker([timed], saver, concurrency=4, lease_seconds=5, queues=["q"]))
    declare_queue(saver, queue)
    handles = [
        wf.submit(f"k{i % 4}:{i}", cfg(f"t{i}"), queue="q", key=f"k{i % 4}") for i in range(16)
    ]
    threads = [threading.Thread(target=w.run_until_idle) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(h.result(timeout=5) for h in handles) == sorted(
        f"k{i % 4}:{i}" for i in range(16)
    )
    assert _overlap(_SPANS, lambda name: "all") <= 3
    assert _overlap(_SPANS, lambda name: name.split(":")[0]) == 1


def test_async_workers_keep_the_queue_limits(queue_db: tuple[str, Any], arun: Any) -> None:
    url, _ = queue_db
    spans: list[tuple[str, float, float]] = []

    @entrypoint()
    async def atimed(x: str) -> str:
        start = time.monotonic()
        await asyncio.sleep(0.03)
        spans.append((x, start, time.monotonic()))
        return x

    async def main() -> list[str]:
        if url.startswith("postgresql://"):
            opened: Any = AsyncPostgresSaver.from_conn_string(url)
        else:
            opened = AsyncSqliteSaver.from_conn_string(url)
        async with opened as saver:
            wf = atimed.copy(checkpointer=saver)
            queue = Queue("aq", concurrency=2, key_concurrency=1)
            workers = [
                AsyncWorker([atimed], saver, concurrency=4, lease_seconds=5, queues=[queue])
                for _ in range(2)
            ]
            from pregelkit.durable import adeclare_queue

            await adeclare_queue(saver, queue)
            handles = [
                await wf.asubmit(f"k{i % 3}:{i}", cfg(f"a{i}"), queue="aq", key=f"k{i % 3}")
                for i in range(9)
            ]
            await asyncio.gather(*(w.run_until_idle() for w in workers))
            return [await h.aresult(timeout=5) for h in handles]

    assert sorted(arun(main())) == sorted(f"k{i % 3}:{i}" for i in range(9))
    assert _overlap(spans, lambda name: "all") <= 2
    assert _overlap(spans, lambda name: name.split(":")[0]) == 1


# dedup and debounce


def test_a_dedup_id_returns_the_active_run_and_a_new_one_after_it_ended(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q"))
    wf = job.copy(checkpointer=saver)
    first = wf.submit(1, cfg("a"), queue="q", dedup_id="order-7")
    again = wf.submit(2, cfg("b"), queue="q", dedup_id="order-7")
    assert again == first and again.thread_id == "a"
    # scoped to its queue: the default queue's order-7 is another run
    other = wf.submit(3, cfg("c"), dedup_id="order-7")
    assert other != first and wf.submit(4, cfg("d"), dedup_id="order-7") == other
    assert claim(saver, "w") == ["a", "c"]
    assert wf.submit(2, cfg("b"), queue="q", dedup_id="order-7") == first  # running
    end(saver, "a")
    after = wf.submit(2, cfg("b"), queue="q", dedup_id="order-7")
    assert after != first and after.thread_id == "b" and after.status() == "queued"


def test_a_debounce_storm_starts_only_the_newest_once_the_key_is_quiet(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q"))
    wf = job.copy(checkpointer=saver)
    with FakeClock(5000.0) as clock:
        handles = []
        for i in range(5):
            handles.append(wf.submit(i, cfg(f"d{i}"), queue="q", key="k", debounce=10))
            clock.advance(3)
        other = wf.submit(9, cfg("other"), queue="q", key="j", debounce=1)
        newest = handles[-1]
        for old, replacing in itertools.pairwise(handles):
            assert old.status() == "cancelled"
            with pytest.raises(RunCancelledError, match=replacing.run_id) as info:
                old.result(timeout=1)
            assert info.value.replaced_by == replacing.run_id
        assert newest.record().not_before == 5022.0
        clock.advance(1.1)  # 5016.1: the other key was quiet for 1 s
        assert claim(saver, "w") == ["other"]
        clock.advance(5.8)  # 5021.9: the newest waits out its quiet time
        assert claim(saver, "w") == []
        clock.advance(0.2)
        assert claim(saver, "w") == ["d4"]
        # a debounced run that started is not replaced: the next one queues
        later = wf.submit(5, cfg("d5"), queue="q", key="k", debounce=10)
        assert newest.status() == "running" and later.status() == "queued"
        del other


def test_a_debounced_submit_to_the_same_thread_replaces_its_queued_run(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=1))
    wf = job.copy(checkpointer=saver)
    with FakeClock(100.0) as clock:
        first = wf.submit(1, cfg("t"), queue="q", key="k", debounce=5)
        second = wf.submit(2, cfg("t"), queue="q", key="k", debounce=5)
        assert second != first and first.status() == "cancelled"
        clock.advance(5.1)
        assert claim(saver, "w") == ["t"]
        assert saver.run_queue(lambda d: _runqueue.pending(d, ["job"], ("q",)), "n") == 1


def test_a_run_that_sleeps_frees_its_slot_and_resumes_within_the_limit(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=1))
    wf = job.copy(checkpointer=saver)
    wf.submit(1, cfg("sleeper"), queue="q")
    wf.submit(2, cfg("b"), queue="q")
    (run,) = saver.run_queue(lambda d: _queues.claim(d, "w", ["job"], ["q"], 5, 30), "claim")
    assert run.thread_id == "sleeper"
    with FakeClock(2000.0) as clock:
        lease = (run.run_id, run.fence)
        saver.run_queue(lambda d: _waits.suspend(d, lease, "sleeping", "sleep", 2010.0, None), "s")
        assert claim(saver, "w") == ["b"]  # the sleeper holds no slot
        clock.advance(20)  # due, but b holds the queue's one slot
        assert claim(saver, "w") == []
        end(saver, "b")
        assert claim(saver, "w") == ["sleeper"]


def test_a_lapsed_lease_of_a_named_queue_is_lost_not_renewed(queue_db: tuple[str, Any]) -> None:
    """Its slot was counted free (and maybe given away) once it lapsed: a
    worker continued after SIGSTOP must not take it back by a heartbeat."""
    _, saver = queue_db
    declare_queue(saver, Queue("q", concurrency=1))
    wf = job.copy(checkpointer=saver)
    wf.submit(1, cfg("named"), queue="q")
    wf.submit(1, cfg("plain"))
    taken = saver.run_queue(lambda d: _queues.claim(d, "w", ["job"], ["q"], 5, 30), "claim")
    leases = [(c.run_id, c.fence) for c in sorted(taken, key=lambda c: c.thread_id)]
    expire(saver, "named")
    expire(saver, "plain")
    lost = saver.run_queue(lambda d: _runqueue.heartbeat(d, "w", ["job"], leases, 30), "beat")
    assert lost == {leases[0]}  # the default queue's lapsed lease renews, as before
