"""The storage plan vocabulary (``pregelkit._internal._plan``): plans compose,
and a step's saves composed into one plan are one transaction on SQLite
and one pipeline on PostgreSQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.pq import TransactionStatus

from pregelkit._internal._plan import Plan, Statement, drive, sequence
from pregelkit.checkpoint import _plans
from pregelkit.checkpoint._plans import Call
from pregelkit.checkpoint.base import RunnableConfig, empty_checkpoint
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres import _sql as pg_sql
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite import _sql as sqlite_sql


def _step(sql: _plans.SaverSQL, saver: Any, thread: str, fail: bool = False) -> Plan[Any]:
    """One step's saves as one plan: a checkpoint, then two tasks' writes."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": 1}
    checkpoint["channel_versions"] = {"x": "1"}
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saved = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
    plans = [
        _plans.put(sql, saver.serde, config, checkpoint, {"step": 1}, {"x": "1"}),
        _plans.put_writes(sql, saver.serde, saved, [("x", 2)], "task-a", ""),
        _plans.put_writes(sql, saver.serde, saved, [("x", 3), ("y", 4)], "task-b", ""),
    ]
    if fail:
        plans.append(_refuse())
    return sequence(*plans)


def _refuse() -> Plan[None]:
    yield Statement("SELECT 1", (), "one")
    raise RuntimeError("refused")


def _writes(saver: Any, thread: str) -> list[tuple[str, str, Any]]:
    found = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    return [] if found is None else sorted(found.pending_writes or ())


def test_plans_compose_and_return_each_result() -> None:
    def one(value: int) -> Plan[int]:
        row = yield Statement("SELECT ?", (value,), "one")
        return int(row[0]) * 10

    sent: list[Statement] = []

    def perform(statement: Statement) -> Any:
        sent.append(statement)
        return statement.params

    assert drive(sequence(one(1), one(2)), perform) == [10, 20]
    assert [s.params for s in sent] == [(1,), (2,)]


@pytest.fixture
def sqlite_saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "plans.db")) as saver:
        saver.setup()
        yield saver


def test_a_composed_plan_is_one_sqlite_transaction(sqlite_saver: SqliteSaver) -> None:
    seen: list[str] = []
    sqlite_saver.conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split())))
    sqlite_saver._run(
        Call(lambda: _step(sqlite_sql.SQL, sqlite_saver, "t"), "save", "t", writes=True)
    )
    sqlite_saver.conn.set_trace_callback(None)
    control = [s for s in seen if s.split()[0] in ("BEGIN", "COMMIT", "ROLLBACK")]
    assert control == ["BEGIN IMMEDIATE", "COMMIT"]
    assert len(seen) == 2 + 1 + 1 + 3  # blob, checkpoint, three writes
    assert _writes(sqlite_saver, "t") == [
        ("task-a", "x", 2),
        ("task-b", "x", 3),
        ("task-b", "y", 4),
    ]


def test_a_composed_plan_that_fails_saves_nothing_on_sqlite(sqlite_saver: SqliteSaver) -> None:
    with pytest.raises(RuntimeError, match="refused"):
        sqlite_saver._run(
            Call(
                lambda: _step(sqlite_sql.SQL, sqlite_saver, "t", fail=True),
                "save",
                "t",
                writes=True,
            )
        )
    assert sqlite_saver.get_tuple({"configurable": {"thread_id": "t"}}) is None


def _traced(conn: Any, tmp_path: Path, run: Callable[[], Any]) -> dict[str, int]:
    """Frontend protocol messages ``run`` sends on ``conn``, by kind."""
    trace = tmp_path / "trace.txt"
    with open(trace, "w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            run()
        finally:
            conn.pgconn.untrace()
    return _sent(trace)


def _sent(trace: Path) -> dict[str, int]:
    """The frontend messages of a libpq trace, by kind."""
    kinds: dict[str, int] = {}
    for line in trace.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) > 3 and parts[1] == "F":
            kinds[parts[3].strip()] = kinds.get(parts[3].strip(), 0) + 1
    return kinds


def _pg_step(saver: Any, fail: bool = False) -> Any:
    """The step on a PostgreSQL saver (awaitable for the async one)."""
    run = saver._arun if isinstance(saver, AsyncPostgresSaver) else saver._run
    return run(
        Call(lambda: _step(pg_sql.SQL, saver, "t", fail), "save", "t", writes=True, pipelined=True)
    )


def test_a_composed_plan_is_one_postgres_pipeline(postgres_database: Any, tmp_path: Path) -> None:
    with PostgresSaver.from_conn_string(postgres_database("pregelkit_plans")) as saver:
        saver.setup()
        sent = _traced(saver.conn, tmp_path, lambda: _pg_step(saver))
        # one Sync: the whole step is one round trip, one statement (its blobs,
        # checkpoints and writes joined; atomic alone: no BEGIN/COMMIT)
        assert sent.get("Sync") == 1
        assert sent.get("Bind", 0) + sent.get("Query", 0) == 1
        assert _writes(saver, "t") == [("task-a", "x", 2), ("task-b", "x", 3), ("task-b", "y", 4)]
        with pytest.raises(RuntimeError, match="refused"):
            _pg_step(saver, fail=True)
        assert len(list(saver.list(None))) == 1  # the failed step saved nothing
        conn: Any = saver.conn
        assert conn.info.transaction_status == TransactionStatus.IDLE


def test_a_composed_plan_is_one_async_postgres_pipeline(
    postgres_database: Any, tmp_path: Path, arun: Callable[[Awaitable[Any]], Any]
) -> None:
    dsn = postgres_database("pregelkit_plans_async")

    async def main() -> tuple[dict[str, int], list[Any]]:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            trace = tmp_path / "trace.txt"
            conn: Any = saver.conn
            with open(trace, "w") as out:
                conn.pgconn.trace(out.fileno())
                await _pg_step(saver)
                conn.pgconn.untrace()
            sent = _sent(trace)
            with pytest.raises(RuntimeError, match="refused"):
                await _pg_step(saver, fail=True)
            found = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
            assert found is not None
            return sent, sorted(found.pending_writes or ())

    sent, writes = arun(main())
    assert sent["Sync"] == 1
    assert sent.get("Bind", 0) + sent.get("Query", 0) == 1
    assert writes == [("task-a", "x", 2), ("task-b", "x", 3), ("task-b", "y", 4)]
