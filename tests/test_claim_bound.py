"""A claim takes at most ``limit`` runs, whatever plan PostgreSQL picks.

The claim updates the runs its picking query returns. When that query sat
in the UPDATE's ``WHERE run_id IN (...)``, a nested-loop semi join ran it
again for each row of ``pregelkit_runs`` it compared, and each run skipped
the rows the statement had already updated (locked by itself): one claim
of one run took every queued run. PostgreSQL chose that plan by itself
with statistics taken while the table was empty (autovacuum after a mass
delete, as ``benchmarks/fleet.py`` makes between its sections). The runs
are now picked once, in a ``MATERIALIZED`` CTE (``_runqueue.PICK``).

Each case leaves such statistics behind, then claims under planner
settings: PostgreSQL's own choice, and ones that rule out every plan but
the rescanning one; one claim alone, a run's end with the claim of the
next, and claimers racing on the default queue and on named ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pregelkit.checkpoint import _queues, _runqueue
from pregelkit.checkpoint._runqueue import Claimed
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.durable import Queue, declare_queue

RESCAN = (
    # a plan the settings rule out still costs more than JIT's threshold:
    # compiling each claim would take a second
    "jit=off",
    "enable_hashagg=off",
    "enable_sort=off",
    "enable_hashjoin=off",
    "enable_mergejoin=off",
    "enable_material=off",
)
"""Settings that leave one plan for the UPDATE: a nested loop whose inner
side, the picked runs, is scanned again for each row of the outer one."""
PLANS = {
    "planner's choice": (),
    "rescan": RESCAN,
}
RUNS = 24
"""Runs per queue: '' (the default), 'open' (no limits), 'limited'."""
QUEUES = ("", "open", "limited")


@pytest.fixture(scope="module")
def database(postgres_database: Callable[[str], str]) -> str:
    dsn = postgres_database("pregelkit_claim_bound")
    with ConnectionPool(dsn, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        declare_queue(saver, Queue("open"))
        declare_queue(saver, Queue("limited", concurrency=1000, rate_limit=(100_000, 60.0)))
    return dsn


@pytest.fixture(params=list(PLANS))
def saver(database: str, request: pytest.FixtureRequest) -> Iterator[PostgresSaver]:
    """A saver whose connections plan under ``PLANS[param]``, over a table
    whose statistics say it is empty while it holds ``RUNS`` queued runs
    per queue."""
    options = " ".join(f"-c {setting}" for setting in PLANS[request.param])
    kwargs = {"autocommit": True, "options": options}
    with ConnectionPool(database, min_size=1, max_size=6, kwargs=kwargs) as pool:
        with pool.connection() as conn:
            conn.execute("DELETE FROM pregelkit_runs")
            conn.execute("DELETE FROM pregelkit_queue_starts")
            _insert(conn, "old", 300)
            conn.execute("DELETE FROM pregelkit_runs")
            conn.execute("ANALYZE pregelkit_runs")
            for queue in QUEUES:
                _insert(conn, queue or "default", RUNS, queue)
        yield PostgresSaver(pool)


def _insert(conn: Any, prefix: str, n: int, queue: str = "") -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, "
            "input_type, input, config_type, config, created_at, updated_at, queue) "
            "VALUES (%s, %s, 'w', 'queued', 0, 'json', '1', 'json', '{}', %s, 0, %s)",
            [(f"{prefix}-{i:03}", f"{prefix}-t{i}", float(i), queue) for i in range(n)],
        )


def _claim(saver: PostgresSaver, worker: str, limit: int, queues: tuple[str, ...]) -> list[Claimed]:
    if queues:
        return saver.run_queue(
            lambda d: _queues.claim(d, worker, ["w"], queues, limit, 30), "claim"
        )
    return saver.run_queue(lambda d: _runqueue.claim(d, worker, ["w"], limit, 30), "claim")


@pytest.mark.parametrize(
    "queues", [(), ("open",), ("limited",)], ids=["default", "open", "limited"]
)
def test_a_claim_of_one_takes_one_and_its_end_takes_the_next(
    saver: PostgresSaver, queues: tuple[str, ...]
) -> None:
    (first,) = _claim(saver, "me", 1, queues)
    more = {"queues": queues} if queues else {}
    finish_and_claim: Any = _queues.finish_and_claim if queues else _runqueue.finish_and_claim

    def end(d: Any) -> Any:
        return finish_and_claim(
            d, (first.run_id, first.fence), "done", None, None,
            worker_id="me", workflows=["w"], lease_seconds=30, **more,
        )  # fmt: skip

    ended, second = saver.run_queue(end, "end and claim")
    assert ended and second is not None and second.run_id != first.run_id
    with saver.conn.connection() as conn:
        (running,) = conn.execute(
            "SELECT count(*) FROM pregelkit_runs WHERE status = 'running'"
        ).fetchone()
    assert running == 1


def test_racing_claimers_take_each_run_once_and_no_more_than_asked(
    saver: PostgresSaver,
) -> None:
    taken: list[tuple[int, list[Claimed]]] = []
    lock = threading.Lock()
    start = threading.Barrier(4)
    # two claimers of the default queue alone, two of it and the named ones
    ways = [(1, ()), (2, ()), (1, ("open", "limited")), (3, ("limited", "open"))]

    def race(n: int) -> None:
        limit, queues = ways[n]
        start.wait()
        while got := _claim(saver, f"w{n}", limit, queues):
            with lock:
                taken.append((limit, got))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(ways))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(len(got) <= limit for limit, got in taken)
    ids = [c.run_id for _, got in taken for c in got]
    assert len(ids) == len(set(ids)) == RUNS * len(QUEUES)


def test_the_rescan_settings_leave_the_plan_that_rescans(database: str) -> None:
    """What the cases above stand on: under ``RESCAN`` the claim's UPDATE
    is a nested loop that scans the picked runs once per row of the table
    (with the picking query in ``WHERE ... IN``, each scan picked anew)."""
    statement = next(_runqueue.claim(_runqueue.POSTGRES, "me", ["w"], 1, 30))
    options = " ".join(f"-c {setting}" for setting in RESCAN)
    with psycopg.connect(database, options=options) as conn:
        rows = conn.execute("EXPLAIN " + statement.sql, statement.params).fetchall()
        conn.rollback()
    plan = "\n".join(row[0] for row in rows)
    assert "Nested Loop Semi Join" in plan and "CTE Scan on picked" in plan, plan
