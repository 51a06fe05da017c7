"""A claim reads the runs it may take through ``pregelkit_runs_claim``
(migration 5), in the order it takes them, and stops at its LIMIT: behind a
backlog it no longer sorts every queued run (on PostgreSQL 25 ms a claim
behind 50,000 queued runs, 0.4 ms with the index). Both database planners
are asked, with a backlog large enough for them to prefer the index."""

from __future__ import annotations

from typing import Any

from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.postgres import PostgresSaver

BACKLOG = 5000


def _fill(saver: Any) -> None:
    rows = [(f"r{i:05}", f"t{i}", float(i)) for i in range(BACKLOG)]
    insert = (
        "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
        "input, config_type, config, created_at, updated_at) "
        "VALUES (?, ?, 'w', 'queued', 0, 'json', ?, 'json', ?, ?, 0)"
    )
    if isinstance(saver, PostgresSaver):
        with saver.conn.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                insert.replace("?", "%s"), [(r, t, b"1", b"{}", at) for r, t, at in rows]
            )
            cur.execute("ANALYZE pregelkit_runs")
    else:
        saver.conn.executemany(insert, [(r, t, b"1", b"{}", at) for r, t, at in rows])
        saver.conn.execute("ANALYZE")
        saver.conn.commit()


def _plan(saver: Any, statement: Any) -> str:
    if isinstance(saver, PostgresSaver):
        with saver.conn.connection() as conn:
            conn.execute("BEGIN")
            try:
                rows = conn.execute("EXPLAIN " + statement.sql, statement.params).fetchall()
            finally:
                conn.execute("ROLLBACK")
        return "\n".join(row[0] for row in rows)
    rows = saver.conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
    return "\n".join(str(row[-1]) for row in rows)


def test_claims_walk_the_claim_index(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    saver.setup()
    _fill(saver)
    dialect = _runqueue.POSTGRES if isinstance(saver, PostgresSaver) else _runqueue.SQLITE
    claim = next(_runqueue.claim(dialect, "me", ["w"], 4, 30))
    ending = _runqueue.finish_and_claim(
        dialect,
        ("r00000", 1),
        "done",
        None,
        None,
        worker_id="me",
        workflows=["w"],
        lease_seconds=30,
    )
    end = next(ending)
    if not dialect.writable_ctes:  # the end, then the claim
        end = ending.send(None)
    for statement in (claim, end):
        plan = _plan(saver, statement)
        assert "pregelkit_runs_claim" in plan, plan
    # and it takes the oldest first
    (first, *_) = saver.run_queue(lambda d: _runqueue.claim(d, "me", ["w"], 4, 30), "claim")
    assert first.run_id == "r00000"


def test_an_invokes_gate_probes_the_threads_active_run(queue_db: tuple[str, Any]) -> None:
    """The check each ``invoke`` on SQLite starts with (a cancel mark, a
    queued run of the thread) finds the thread's active run through
    ``pregelkit_runs_active``, not by walking every run the thread ever had:
    since migration 6 the index's condition is wider than the check's, which
    SQLite's planner only sees spelled out (PostgreSQL's proves it)."""
    from pregelkit.checkpoint.sqlite import _sql

    _, saver = queue_db
    if isinstance(saver, PostgresSaver):
        return
    saver.setup()
    _fill(saver)
    rows = saver.conn.execute("EXPLAIN QUERY PLAN " + _sql.SELECT_THREAD_GATE, ("t1", "t1"))
    plan = "\n".join(str(row[-1]) for row in rows)
    assert "pregelkit_runs_active" in plan, plan


def test_an_idle_claim_walks_no_waiting_run_on_sqlite_without_statistics(
    queue_db: tuple[str, Any],
) -> None:
    """With thousands of runs sleeping or waiting (none due) and no ANALYZE,
    SQLite's planner took ``pregelkit_runs_queue`` for ``status IN (...)`` and
    sorted them all at every claim: an idle worker's CPU grew with them
    (benchmarks/waiting.py). The claim names its indexes there."""
    _, saver = queue_db
    if isinstance(saver, PostgresSaver):
        return
    saver.setup()
    saver.conn.executemany(
        "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
        "input, config_type, config, due_at, created_at, updated_at) "
        "VALUES (?, ?, 'w', ?, 0, 'json', x'31', 'json', x'7b7d', ?, 0, 0)",
        [
            (f"r{i:05}", f"t{i}", "sleeping" if i % 2 else "waiting", 4e9 if i % 2 else None)
            for i in range(BACKLOG)
        ],
    )
    saver.conn.commit()
    claim = next(_runqueue.claim(_runqueue.SQLITE, "me", ["w"], 4, 30))
    plan = _plan(saver, claim)
    assert "USING INDEX pregelkit_runs_due" in plan, plan
    assert "USING INDEX pregelkit_runs_claim" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    assert saver.run_queue(lambda d: _runqueue.claim(d, "me", ["w"], 4, 30), "claim") == []
