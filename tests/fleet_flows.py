"""Workflows for the worker tests, importable by worker subprocesses
(``pregelkit worker fleet_flows:chain``, with tests/ on PYTHONPATH).

Each step of ``chain`` appends a row to ``fleet_log`` in the queue's own
database (``FLEET_DB``: a SQLite path or a PostgreSQL URL), fenced by the
run's lease: the append happens only while the lease is the run's current
one, so a worker that lost the lease cannot log either. Steps sleep
``FLEET_STEP_SECONDS`` after logging, so tests can stop a worker mid-step.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

from pregelkit.config import get_config
from pregelkit.errors import LeaseLostError
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt
from pregelkit.worker import current_lease

_local = threading.local()

LOG_TABLE = (
    "CREATE TABLE IF NOT EXISTS fleet_log (thread_id TEXT NOT NULL, step INTEGER NOT NULL, "
    "run_id TEXT, fence INTEGER, pid INTEGER NOT NULL)"
)
_INSERT = (
    "INSERT INTO fleet_log (thread_id, step, run_id, fence, pid) SELECT ?, ?, ?, ?, ? "
    "WHERE EXISTS (SELECT 1 FROM pregelkit_runs WHERE run_id = ? AND fence = ? "
    "AND status = 'running'{lock}) RETURNING 1"
)


def is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def connect(db: str) -> Any:
    if is_postgres(db):
        import psycopg

        return psycopg.connect(db, autocommit=True)
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    return conn


def create_log(db: str) -> None:
    conn = connect(db)
    try:
        conn.execute(LOG_TABLE)
    finally:
        conn.close()


def log_rows(db: str) -> list[tuple[Any, ...]]:
    conn = connect(db)
    try:
        return list(
            conn.execute(
                "SELECT thread_id, step, run_id, fence, pid FROM fleet_log ORDER BY thread_id, step"
            ).fetchall()
        )
    finally:
        conn.close()


def _log(step: int) -> None:
    db = os.environ["FLEET_DB"]
    lease = current_lease()
    assert lease is not None, "fleet_flows runs under a worker"
    thread_id = get_config()["configurable"]["thread_id"]
    params = (thread_id, step, lease.run_id, lease.fence, os.getpid(), *lease)
    if is_postgres(db):
        row = _pg_insert(db, params)
    else:
        conn = getattr(_local, "conn", None)
        if conn is None:
            conn = _local.conn = connect(db)
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(_INSERT.format(lock=""), params).fetchone()
        finally:
            conn.execute("COMMIT")
    if row is None:
        raise LeaseLostError(lease.run_id, lease.fence, f"logging step {step}")


def _pg_insert(db: str, params: tuple[Any, ...]) -> Any:
    """The fenced append, reconnecting while the server restarts (for up to
    30 s), as an application that survives database restarts would."""
    import psycopg

    sql = _INSERT.format(lock=" FOR SHARE").replace("?", "%s")
    deadline = time.monotonic() + 30
    while True:
        conn = getattr(_local, "conn", None)
        try:
            if conn is None or conn.closed or conn.broken:
                conn = _local.conn = connect(db)
            with conn.transaction():
                return conn.execute(sql, params).fetchone()
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@task
def step(i: int, x: int) -> int:
    _log(i)
    time.sleep(float(os.environ.get("FLEET_STEP_SECONDS", "0")))
    return x + i


@entrypoint()
def chain(n: int) -> int:
    """``n`` steps in a row; returns 0 + 1 + ... + (n - 1)."""
    total = 0
    for i in range(n):
        total = step(i, total).result()
    return total


@task
def pause(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@entrypoint()
def slow(seconds: list[float]) -> float:
    """One ``pause`` after another; cancellable between them."""
    return sum(pause(s).result() for s in seconds)


@entrypoint()
def ask(question: str) -> dict[str, Any]:
    answer = interrupt(question)
    return {"question": question, "answer": answer}


@entrypoint()
def boom(message: str) -> None:
    raise ValueError(message)
