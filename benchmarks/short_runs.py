"""Short runs: N runs of an entrypoint that calls one task, each on a new
thread, so each starts from an empty checkpoint and ends with its saver
calls done. This is the cost a request handler pays per request.

Each records every run's latency (for p50 / p99). The PostgreSQL one also
counts, in an untimed pass through ``pg_wire.WireCounter``, the statements,
round trips and transactions a run sends to the server.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pg_wire import WireCounter
from workload_base import Lib, Prepared, expect, thread_config

SHORT_WARMUP_RUNS = 30
WIRE_WARMUP_RUNS = 10  # before counting: psycopg prepares a statement on its 5th use
WIRE_RUNS = 20  # runs counted on the wire; the figures are per run
WIRE_KEYS = (
    "statements",
    "round_trips",
    "begin",
    "commit",
    "rollback",
    "autocommit",
    "connections",
)


def _percentiles(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "p50_us": ordered[len(ordered) // 2] * 1e6,
        "p99_us": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6,
    }


def _sync_entrypoint(lib: Lib, saver: Any) -> Any:
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    def one(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def main(x: int) -> int:
        return one(x).result()

    return main


def _short_sync(lib: Lib, n: int, saver: Any, close: Callable[[], None]) -> Prepared:
    main = _sync_entrypoint(lib, saver)
    latencies: list[float] = []

    def runs(count: int, prefix: str, record: bool) -> int:
        total = 0
        for i in range(count):
            t0 = time.perf_counter()
            total += main.invoke(i, thread_config(f"{prefix}-{i}"))
            if record:
                latencies.append(time.perf_counter() - t0)
        return total

    return Prepared(
        run=lambda: runs(n, "timed", True),
        warmup=lambda: runs(SHORT_WARMUP_RUNS, "warmup", False),
        check=lambda r: expect(r, n * (n + 1) // 2),
        close=close,
        extra=lambda: _percentiles(latencies),
    )


def _short_async(
    lib: Lib, n: int, loop: asyncio.AbstractEventLoop, saver: Any, close: Callable[[], None]
) -> Prepared:
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    async def one(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    async def main(x: int) -> int:
        return await one(x)

    latencies: list[float] = []

    async def runs(count: int, prefix: str, record: bool) -> int:
        total = 0
        for i in range(count):
            t0 = time.perf_counter()
            total += await main.ainvoke(i, thread_config(f"{prefix}-{i}"))
            if record:
                latencies.append(time.perf_counter() - t0)
        return total

    def close_all() -> None:
        close()
        loop.close()

    return Prepared(
        run=lambda: loop.run_until_complete(runs(n, "timed", True)),
        warmup=lambda: loop.run_until_complete(runs(SHORT_WARMUP_RUNS, "warmup", False)),
        check=lambda r: expect(r, n * (n + 1) // 2),
        close=close_all,
        extra=lambda: _percentiles(latencies),
    )


def short_memory(lib: Lib, n: int) -> Prepared:
    """N short runs (one task each, a new thread each) with an InMemorySaver."""
    return _short_sync(lib, n, lib.module("checkpoint.memory").InMemorySaver(), lambda: None)


def short_async_memory(lib: Lib, n: int) -> Prepared:
    """N short runs with ainvoke (one async task each, a new thread each) on an InMemorySaver."""
    saver = lib.module("checkpoint.memory").InMemorySaver()
    return _short_async(lib, n, asyncio.new_event_loop(), saver, lambda: None)


def short_sqlite(lib: Lib, n: int) -> Prepared:
    """N short runs (one task each, a new thread each) with a SqliteSaver, default durability."""
    sqlite_mod = lib.module("checkpoint.sqlite")
    tmpdir = tempfile.TemporaryDirectory(prefix="bench-short-")
    cm = sqlite_mod.SqliteSaver.from_conn_string(os.path.join(tmpdir.name, "short.db"))

    def close() -> None:
        cm.__exit__(None, None, None)
        tmpdir.cleanup()

    return _short_sync(lib, n, cm.__enter__(), close)


def short_async_sqlite(lib: Lib, n: int) -> Prepared:
    """N short runs with ainvoke (one async task each, a new thread each) on an AsyncSqliteSaver."""
    aio = lib.module("checkpoint.sqlite.aio")
    tmpdir = tempfile.TemporaryDirectory(prefix="bench-short-")
    loop = asyncio.new_event_loop()
    cm = aio.AsyncSqliteSaver.from_conn_string(os.path.join(tmpdir.name, "short.db"))
    saver = loop.run_until_complete(cm.__aenter__())

    def close() -> None:
        loop.run_until_complete(cm.__aexit__(None, None, None))
        tmpdir.cleanup()

    return _short_async(lib, n, loop, saver, close)


CHECKPOINT_TABLES = {"pregelkit": "pregelkit\\_%", "langgraph": "checkpoint%"}
"""Each library's checkpointer tables, as a LIKE pattern (store tables excepted)."""


def short_postgres(lib: Lib, n: int) -> Prepared:
    """N short runs (one task each, a new thread each) with a PostgresSaver on
    one connection, default durability. Needs BENCH_PG_DSN; the library's
    checkpoint tables are emptied first, so every run starts a new thread.
    Then counts a run's statements and round trips on the wire (untimed)."""
    dsn = os.environ.get("BENCH_PG_DSN")
    if not dsn:
        raise RuntimeError("PostgreSQL workloads need BENCH_PG_DSN")
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE %s AND tablename NOT LIKE '%%store%%'",
            (CHECKPOINT_TABLES[lib.name],),
        ).fetchall()
        for (table,) in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
    cm = lib.module("checkpoint.postgres").PostgresSaver.from_conn_string(dsn)
    saver = cm.__enter__()
    saver.setup()
    prepared = _short_sync(lib, n, saver, lambda: cm.__exit__(None, None, None))
    timed = prepared.extra
    prepared.extra = lambda: {**timed(), **_wire_counts(lib, dsn)}
    return prepared


def _wire_counts(lib: Lib, dsn: str) -> dict[str, float]:
    """Per run: what the client sent, counted by a proxy on a second saver
    (the timed runs go straight to the server)."""
    wire = WireCounter(dsn)
    cm = lib.module("checkpoint.postgres").PostgresSaver.from_conn_string(wire.dsn)
    try:
        main = _sync_entrypoint(lib, cm.__enter__())
        for i in range(WIRE_WARMUP_RUNS):
            main.invoke(i, thread_config(f"wire-warmup-{i}"))
        before = wire.snapshot()
        for i in range(WIRE_RUNS):
            main.invoke(i, thread_config(f"wire-{i}"))
        counts = wire.snapshot()
    finally:
        cm.__exit__(None, None, None)
        wire.close()
    return {f"wire_{key}": (counts[key] - before[key]) / WIRE_RUNS for key in WIRE_KEYS}
