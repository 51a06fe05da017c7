"""The workflow and worker process of the queue chaos test
(tests/test_queues_chaos.py), importable by its worker subprocesses.

Each attempt of ``work`` appends a ``start`` and an ``end`` row to
``queue_chaos_log`` (the database's clock), each only while the run's lease
is its current one and has not lapsed (checked in the insert, the run's row
locked ``FOR SHARE``). A lapsed lease of a named queue is never renewed, so
an attempt with both rows held its slot from the one to the other.

``python queue_chaos_flows.py URL QUEUE...`` serves the queues until SIGTERM.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from pregelkit.config import get_config
from pregelkit.errors import LeaseLostError
from pregelkit.func import entrypoint, task
from pregelkit.worker import current_lease

LOG = (
    "CREATE TABLE IF NOT EXISTS queue_chaos_log (run_id text NOT NULL, fence integer NOT NULL, "
    "thread_id text NOT NULL, queue text NOT NULL, key text NOT NULL, event text NOT NULL, "
    "at double precision NOT NULL, pid integer NOT NULL)"
)
_INSERT = (
    "INSERT INTO queue_chaos_log SELECT %s, %s, %s, %s, %s, %s, "
    "extract(epoch from clock_timestamp()), %s WHERE EXISTS (SELECT 1 FROM pregelkit_runs "
    "WHERE run_id = %s AND fence = %s AND status = 'running' "
    "AND lease_until >= extract(epoch from clock_timestamp()) FOR SHARE) RETURNING 1"
)
_local = threading.local()


def _log(event: str, queue: str, key: str) -> None:
    import psycopg

    lease = current_lease()
    assert lease is not None, "runs under a worker"
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = psycopg.connect(os.environ["QUEUE_CHAOS_DB"], autocommit=True)
    thread = get_config()["configurable"]["thread_id"]
    row = conn.execute(
        _INSERT,
        (lease.run_id, lease.fence, thread, queue, key, event, os.getpid(), *lease),
    ).fetchone()
    if row is None:
        raise LeaseLostError(lease.run_id, lease.fence, f"logging {event}")


@task
def work(queue: str, key: str, seconds: float) -> str:
    _log("start", queue, key)
    time.sleep(seconds)
    _log("end", queue, key)
    return "ok"


@entrypoint()
def qflow(arg: list[Any]) -> str:
    queue, key, seconds = arg
    return work(queue, key, seconds).result()


def main() -> None:
    from psycopg_pool import ConnectionPool

    from pregelkit.checkpoint.postgres import PostgresSaver
    from pregelkit.worker import Worker

    url, queues = sys.argv[1], sys.argv[2:]
    os.environ["QUEUE_CHAOS_DB"] = url
    with ConnectionPool(url, min_size=1, max_size=8, kwargs={"autocommit": True}) as pool:
        worker = Worker([qflow], PostgresSaver(pool), concurrency=4, lease_seconds=1.0,
                        queues=queues)  # fmt: skip
        worker.run()


if __name__ == "__main__":
    main()
