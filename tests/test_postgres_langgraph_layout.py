"""The PostgreSQL store keeps its items in LangGraph's table, ``store``, so a
database LangGraph's PostgresStore wrote is read as it is; a pregelkit
database from before the move migrates. The shallow savers keep one
checkpoint per thread and namespace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pregelkit.checkpoint.postgres import ShallowPostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncShallowPostgresSaver
from pregelkit.func import entrypoint, task
from pregelkit.store.postgres import AsyncPostgresStore, PostgresStore
from pregelkit.store.postgres import _sql as store_sql


def _tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {name for (name,) in rows}


def test_a_database_langgraph_wrote_is_read_and_written(postgres_database: Any) -> None:
    dsn = postgres_database("pregelkit_layout_langgraph")
    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # LangGraph's documented layout: namespaces joined by ".", jsonb
        # values, whole-minute TTLs, the database's own collation.
        conn.execute(
            """
            CREATE TABLE store (
                prefix text NOT NULL, key text NOT NULL, value jsonb NOT NULL,
                created_at timestamptz DEFAULT CURRENT_TIMESTAMP,
                updated_at timestamptz DEFAULT CURRENT_TIMESTAMP,
                expires_at timestamptz, ttl_minutes int,
                PRIMARY KEY (prefix, key))
            """
        )
        conn.execute(
            "INSERT INTO store (prefix, key, value, updated_at) VALUES "
            "('users.1.memories', 'a', '{\"text\": \"likes tea\"}', %s), "
            "('users.1.memories', 'b', '{\"text\": \"likes jazz\"}', %s), "
            "('users.10', 'c', '{\"text\": \"other\"}', %s)",
            (now - timedelta(seconds=2), now - timedelta(seconds=1), now),
        )
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        assert store.get(("users", "1", "memories"), "a").value == {"text": "likes tea"}  # type: ignore[union-attr]
        # newest first, and a prefix matches whole labels only ("1", not "10")
        assert [i.key for i in store.search(("users", "1"))] == ["b", "a"]
        store.put(("users", "1", "memories"), "d", {"text": "new"}, ttl=0.5)
        assert store.list_namespaces(prefix=("users",)) == [
            ("users", "1", "memories"),
            ("users", "10"),
        ]
        with store._cursor() as cur:
            cur.execute("SELECT ttl_minutes FROM store WHERE key = 'd'")
            assert cur.fetchone() == {"ttl_minutes": 0.5}  # not rounded to a whole minute
    assert "pregelkit_store" not in _tables(dsn)


def test_a_pregelkit_database_of_the_old_layout_migrates(postgres_database: Any, arun: Any) -> None:
    dsn = postgres_database("pregelkit_layout_v1")
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(store_sql.CREATE_MIGRATIONS_TABLE)
        for statement in store_sql.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(store_sql.RECORD_MIGRATION, (1,))
        stamp = datetime.now(UTC)
        conn.execute(
            "INSERT INTO pregelkit_store VALUES ('docs', 'k', '{\"v\": 1}', %s, %s, NULL, NULL)",
            (stamp, stamp),
        )

    async def check() -> None:
        async with AsyncPostgresStore.from_conn_string(dsn) as store:
            item = await store.aget(("docs",), "k")
            assert item is not None and item.value == {"v": 1}
            await store.aput(("docs",), "k2", {"v": 2})
            assert [i.key for i in await store.asearch(("docs",))] == ["k2", "k"]

    arun(check())
    tables = _tables(dsn)
    assert "store" in tables and "pregelkit_store" not in tables
    with psycopg.connect(dsn) as conn:
        assert conn.execute(store_sql.SELECT_SCHEMA_VERSION).fetchone() == (
            len(store_sql.MIGRATIONS),
        )


def test_rows_of_both_layouts_merge_and_the_newer_write_wins(postgres_database: Any) -> None:
    """A database with LangGraph's table and pregelkit's old one (both
    libraries used it): one table remains, each item at its newest value."""
    dsn = postgres_database("pregelkit_layout_both")
    old, new = datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            "CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value jsonb NOT NULL, "
            "created_at timestamptz, updated_at timestamptz, PRIMARY KEY (prefix, key))"
        )
        conn.execute(
            "INSERT INTO store VALUES ('n', 'lg_newer', '\"lg\"', %s, %s), "
            "('n', 'pk_newer', '\"lg\"', %s, %s), ('n', 'lg_only', '\"lg\"', NULL, NULL)",
            (new, new, old, old),
        )
        conn.execute(store_sql.CREATE_MIGRATIONS_TABLE)
        for statement in store_sql.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(store_sql.RECORD_MIGRATION, (1,))
        conn.execute(
            "INSERT INTO pregelkit_store VALUES ('n', 'lg_newer', '\"pk\"', %s, %s, NULL, NULL), "
            "('n', 'pk_newer', '\"pk\"', %s, %s, NULL, NULL)",
            (old, old, new, new),
        )
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        got = {i.key: i.value for i in store.search(("n",))}
    assert got == {"lg_newer": "lg", "pk_newer": "pk", "lg_only": "lg"}
    assert "pregelkit_store" not in _tables(dsn)


@task
def double(x: int) -> int:
    return 2 * x


@entrypoint()
def twice(x: int) -> int:
    return double(double(x).result()).result()


def test_shallow_saver_keeps_the_latest_checkpoint_only(postgres_database: Any) -> None:
    dsn = postgres_database("pregelkit_shallow")
    with ShallowPostgresSaver.from_conn_string(dsn) as saver:
        flow = twice.copy(update={"checkpointer": saver})
        for n, thread in ((1, "a"), (2, "a"), (3, "b")):
            assert flow.invoke(n, {"configurable": {"thread_id": thread}}) == 4 * n
        for thread, last in (("a", 8), ("b", 12)):
            history = list(flow.get_state_history({"configurable": {"thread_id": thread}}))
            assert [s.values for s in history] == [last]
        with psycopg.connect(dsn) as conn:
            (count,) = conn.execute("SELECT count(*) FROM pregelkit_checkpoints").fetchone()  # type: ignore[misc]
        assert count == 2


def test_async_shallow_saver_keeps_the_latest_checkpoint_only(
    postgres_database: Any, arun: Any
) -> None:
    dsn = postgres_database("pregelkit_ashallow")

    async def scenario() -> list[Any]:
        async with AsyncShallowPostgresSaver.from_conn_string(dsn) as saver:
            flow = twice.copy(update={"checkpointer": saver})
            config = {"configurable": {"thread_id": "t"}}
            assert await flow.ainvoke(1, config) == 4
            assert await flow.ainvoke(5, config) == 20
            return [s.values async for s in flow.aget_state_history(config)]

    assert arun(scenario()) == [20]


@pytest.mark.parametrize("name", ["ShallowPostgresSaver", "Nope"])
def test_the_shallow_saver_is_found_lazily(name: str) -> None:
    import pregelkit.checkpoint.postgres as module

    if name == "Nope":
        with pytest.raises(AttributeError, match="Nope"):
            getattr(module, name)
    else:
        assert getattr(module, name) is ShallowPostgresSaver
