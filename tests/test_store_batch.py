"""How every store runs a batch, as LangGraph's stores do: its reads see the
store as it was before the batch, then its writes apply, the last write to a
key winning; a bad op anywhere fails the batch before anything runs. The
SQL stores send each kind of op as one statement, whatever the batch's size.
Also the TTL options that go with it: ``omit_expired`` and SQLite's
``refresh_on_read`` default."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import StoreUnderTest
from pregelkit._internal import _plan
from pregelkit.store import _sqlcore
from pregelkit.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from pregelkit.store.postgres._sql import PostgresDialect
from pregelkit.store.sqlite._sql import SqliteDialect

NS = ("batch",)


def embed(texts: list[str]) -> list[list[float]]:
    return [[float(text.count(c)) + 0.01 for c in "abcdefgh"] for text in texts]


def test_reads_see_the_store_as_it_was_before_the_writes(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    s.put(NS, "k", {"v": 0})
    before = s.get(NS, "k")
    time.sleep(0.002)
    results = s.batch(
        [
            GetOp(NS, "k"),
            PutOp(NS, "k", {"v": 1}),
            GetOp(NS, "k"),
            SearchOp(NS),
            ListNamespacesOp(),
            PutOp(NS, "k", None),
            PutOp(("other",), "new", {"v": 2}),
            GetOp(("other",), "new"),
            SearchOp(NS),
            PutOp(NS, "k", {"v": 3}),
        ]
    )
    assert len(results) == 10
    assert [results[i] for i in (1, 5, 6, 9)] == [None] * 4
    assert results[0].value == results[2].value == {"v": 0}
    assert results[0] is not results[2]  # equal reads, separate results
    assert [(i.key, i.value) for i in results[3]] == [("k", {"v": 0})]
    assert results[8] == results[3] and results[8] is not results[3]
    assert results[4] == [NS]
    assert results[7] is None
    after = s.get(NS, "k")
    assert after.value == {"v": 3}
    # Only the last write ran: the item was rewritten, never deleted.
    assert after.created_at == before.created_at and after.updated_at > before.updated_at
    assert s.get(("other",), "new").value == {"v": 2}
    assert s.list_namespaces() == [NS, ("other",)]


def test_the_last_write_to_a_key_wins(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    s.put(NS, "b", {"v": 0})
    s.batch(
        [
            PutOp(NS, "a", {"v": 1}),
            PutOp(NS, "a", {"v": 2}),
            PutOp(NS, "b", {"v": 1}),
            PutOp(NS, "b", None),
            PutOp(NS, "c", None),
            PutOp(NS, "c", {"v": 3}),
            PutOp(NS, "d", None),  # deleting what is not there is fine
        ]
    )
    assert s.get(NS, "a").value == {"v": 2}
    assert s.get(NS, "b") is None
    assert s.get(NS, "c").value == {"v": 3}
    if s.kind != "memory":  # (which keeps items in the order they were created)
        assert [i.key for i in s.search(NS)] == ["c", "a"]  # newest first: write order


def test_an_empty_batch_does_nothing(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    assert s.batch([]) == []
    assert s.list_namespaces() == []


def test_ten_thousand_ops_in_one_batch(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    spaces = [("big", str(i % 7)) for i in range(5000)]
    s.batch([PutOp(spaces[i], f"k{i}", {"i": i, "t": "x" * (i % 50)}) for i in range(5000)])
    ops: list[Op] = [GetOp(spaces[i], f"k{i}") for i in range(5000)]
    ops += [PutOp(spaces[i], f"k{i}", {"i": -i}) for i in range(5000)]
    results = s.batch(ops)
    assert [r.value["i"] for r in results[:5000]] == list(range(5000))
    assert results[5000:] == [None] * 5000
    again = s.batch([GetOp(spaces[i], f"k{i}") for i in range(5000)])
    assert [r.value for r in again] == [{"i": -i} for i in range(5000)]
    assert [r.namespace for r in again] == spaces


def test_a_bad_op_anywhere_fails_the_batch_before_anything_runs(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    s.put(NS, "k", {"v": 0})
    for bad in (
        PutOp(("bad.label",), "x", {}),
        GetOp(("",), "x"),
        SearchOp(NS, limit=-1),
        PutOp(NS, "x", "not a dict"),  # type: ignore[arg-type]
    ):
        with pytest.raises((InvalidNamespaceError, ValueError, TypeError)):
            s.batch([PutOp(NS, "k", {"v": 1}), GetOp(NS, "k"), bad, PutOp(NS, "j", {})])
        assert s.get(NS, "k").value == {"v": 0}
        assert s.get(NS, "j") is None
    if s.kind == "memory":
        return  # keeps Python objects as they are
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        s.batch([PutOp(NS, "k", {"v": 2}), PutOp(NS, "z", {"x": object()})])
    assert s.get(NS, "k").value == {"v": 0}
    assert s.get(NS, "z") is None


def test_the_last_write_decides_what_is_embedded(make_store: Any) -> None:
    s: StoreUnderTest = make_store(index={"embed": embed, "dims": 8, "fields": ["text"]})
    s.put(NS, "gone", {"text": "cccc"})
    s.batch(
        [
            PutOp(NS, "x", {"text": "aaaa"}),
            PutOp(NS, "x", {"text": "cccc"}),
            PutOp(NS, "y", {"text": "cccc"}),
            PutOp(NS, "y", {"text": "cccc"}, index=False),
            PutOp(NS, "gone", None),
        ]
    )
    hits = s.search(NS, query="cccc")
    assert [(h.key, h.score is not None) for h in hits] == [("x", True), ("y", False)]
    assert hits[0].score == pytest.approx(1.0)


def test_a_pattern_given_as_one_string_is_one_label(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    s.put(("test", "documents", "public"), "a", {})
    s.put(("test", "images", "private"), "b", {})
    [public] = s.batch([ListNamespacesOp((MatchCondition("suffix", "public"),))])  # type: ignore[arg-type]
    assert public == [("test", "documents", "public")]
    assert s.list_namespaces(prefix="test") == [
        ("test", "documents", "public"),
        ("test", "images", "private"),
    ]
    with pytest.raises(InvalidNamespaceError):
        s.batch([ListNamespacesOp((MatchCondition("suffix", "a.b"),))])  # type: ignore[arg-type]


# what the SQL stores send


def _statements(dialect: _sqlcore.Dialect, ops: list[Op]) -> list[_plan.Statement]:
    sent: list[_plan.Statement] = []

    def execute(statement: _plan.Statement) -> Any:
        sent.append(statement)
        return []

    results = _plan.drive(_sqlcore.run_batch(dialect, ops, None, json.loads), execute)
    assert len(results) == len(ops)
    return sent


@pytest.mark.parametrize("dialect", [PostgresDialect(), SqliteDialect()], ids=["pg", "sqlite"])
def test_each_kind_of_op_goes_out_as_one_statement(dialect: _sqlcore.Dialect) -> None:
    ops: list[Op] = []
    for i in range(1000):
        ops += [PutOp(NS, f"p{i}", {"i": i}), GetOp(NS, f"g{i % 10}"), PutOp(NS, f"d{i}", None)]
        ops += [SearchOp(NS, filter={"i": 1}), ListNamespacesOp(max_depth=1 + i % 2)]
    sent = _statements(dialect, ops)
    # get, search, two listings, delete, upsert
    assert len(sent) == 6
    per_row = [s for s in sent if s.fetch == "many"]
    if isinstance(dialect, PostgresDialect):
        assert per_row == []  # a server gets arrays, not a statement per row
    else:  # SQLite runs a prepared statement per row, with no round trip
        assert sorted(len(s.params) for s in per_row) == [1000, 1000]


def test_a_batch_of_one_kind_needs_no_transaction() -> None:
    one = _sqlcore.one_statement
    assert one([GetOp(NS, "a"), GetOp(NS, "b")], indexed=False)
    assert one([PutOp(NS, "a", {}), PutOp(NS, "b", {})], indexed=False)
    assert not one([PutOp(NS, "a", {}), PutOp(NS, "b", None)], indexed=False)
    assert not one([PutOp(NS, "a", {})], indexed=True)  # item and vectors
    assert not one([GetOp(NS, "a"), PutOp(NS, "b", {})], indexed=False)
    assert one([SearchOp(NS)], indexed=False)
    assert not one([SearchOp(NS), SearchOp(NS)], indexed=False)


@given(st.datetimes(min_value=datetime(1, 1, 2), timezones=st.just(UTC)))
def test_sqlite_times_round_trip_to_the_microsecond(moment: datetime) -> None:
    """Item times are stored as integer microseconds since 1970 and read back
    exactly, before 1970 too, as aware UTC datetimes."""
    dialect = SqliteDialect()
    back = dialect.from_time(dialect.time(moment))
    assert back == moment and back.tzinfo is UTC


# TTLs


def _expires(s: StoreUnderTest, key: str) -> Any:
    """The stored expiry of ``key`` in ``NS``, read with SQL of our own."""
    if s.kind.endswith("sqlite"):
        sql = "SELECT expires_at FROM pregelkit_store WHERE prefix = ? AND key = ?"
        return s.store.conn.execute(sql, (NS[0], key)).fetchone()[0]
    sql = "SELECT expires_at FROM store WHERE prefix = %s AND key = %s"
    if s.is_async:

        async def read() -> Any:
            async with s.store._cursor() as cur:
                await cur.execute(sql, (NS[0], key))
                return (await cur.fetchone())["expires_at"]

        return s._arun(read())
    with s.store._cursor() as cur:
        cur.execute(sql, (NS[0], key))
        return cur.fetchone()["expires_at"]


def _expire_now(s: StoreUnderTest, key: str) -> None:
    if s.kind.endswith("sqlite"):
        sql = "UPDATE pregelkit_store SET expires_at = 1 WHERE prefix = ? AND key = ?"
        s.store.conn.execute(sql, (NS[0], key))
        return
    sql = "UPDATE store SET expires_at = now() - interval '1 minute' WHERE prefix = %s AND key = %s"
    if s.is_async:

        async def write() -> None:
            async with s.store._cursor() as cur:
                await cur.execute(sql, (NS[0], key))

        s._arun(write())
        return
    with s.store._cursor() as cur:
        cur.execute(sql, (NS[0], key))


def test_a_batch_restarts_the_ttls_its_reads_asked_for(make_store: Any) -> None:
    s: StoreUnderTest = make_store(ttl={"refresh_on_read": True})
    if s.kind == "memory":
        return
    for key in ("one", "two", "three", "found"):
        s.put(NS, key, {"k": key}, ttl=5)
    s.put(NS, "forever", {"k": "forever"})
    start = {key: _expires(s, key) for key in ("one", "two", "three", "found")}
    time.sleep(0.01)
    s.batch(
        [
            GetOp(NS, "one"),
            GetOp(NS, "two", refresh_ttl=False),
            GetOp(NS, "two"),  # the same key read twice: one read asks
            GetOp(NS, "three", refresh_ttl=False),
            GetOp(NS, "forever"),
            GetOp(NS, "missing"),
            SearchOp(NS, filter={"k": "found"}),
            PutOp(("elsewhere",), "x", {}),
        ]
    )
    assert _expires(s, "one") > start["one"] and _expires(s, "two") > start["two"]
    assert _expires(s, "found") > start["found"]
    assert _expires(s, "three") == start["three"]
    assert _expires(s, "forever") is None


def test_ttls_of_every_kind_in_one_batch(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    if s.kind == "memory":
        return
    s.batch([PutOp(NS, "int", {}, ttl=1), PutOp(NS, "float", {}, ttl=0.5), PutOp(NS, "none", {})])
    assert _expires(s, "int") > _expires(s, "float")
    assert _expires(s, "none") is None


@pytest.mark.parametrize("omit", [None, False, True])
def test_expired_items_are_read_until_swept_unless_omit_expired(
    make_store: Any, omit: bool | None
) -> None:
    probe: StoreUnderTest = make_store()
    if probe.kind == "memory":
        return
    s: StoreUnderTest = make_store(ttl={} if omit is None else {"omit_expired": omit})
    s.put(NS, "old", {"v": 1}, ttl=5)
    s.put(NS, "live", {"v": 2})
    _expire_now(s, "old")
    got = s.get(NS, "old", refresh_ttl=False)
    listed = s.list_namespaces(prefix=NS)
    found = [i.key for i in s.search(NS, refresh_ttl=False)]
    if omit:
        assert (got, found) == (None, ["live"])
    else:
        assert got is not None and got.value == {"v": 1}
        assert found == ["live", "old"]
    assert listed == [NS]
    assert s.sweep_ttl() == 1
    assert s.get(NS, "old") is None
    assert [i.key for i in s.search(NS)] == ["live"]


def test_sqlite_reads_restart_ttls_only_when_asked(make_store: Any) -> None:
    probe: StoreUnderTest = make_store()
    if not probe.kind.endswith("sqlite"):
        return
    s: StoreUnderTest = make_store(ttl={"default_ttl": 5})
    s.put(NS, "k", {})
    start = _expires(s, "k")
    time.sleep(0.01)
    s.get(NS, "k")
    s.search(NS)
    assert _expires(s, "k") == start  # as LangGraph's SqliteStore: not by default
    s.get(NS, "k", refresh_ttl=True)
    assert _expires(s, "k") > start


def test_sync_calls_from_threads_join_the_async_postgres_stores_batch(_store_dsn: str) -> None:
    """``AsyncPostgresStore.put``/``get`` from other threads go through the
    loop's queue, as its async methods do: calls made while a batch is in
    flight go out together in the next one."""
    from pregelkit.store.postgres.aio import AsyncPostgresStore

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    opened = AsyncPostgresStore.from_conn_string(_store_dsn)
    store = asyncio.run_coroutine_threadsafe(opened.__aenter__(), loop).result()
    sizes: list[int] = []
    real = store.abatch

    async def slow(ops: Any) -> Any:
        ops = list(ops)
        sizes.append(len(ops))
        await asyncio.sleep(0.02)  # the other threads queue meanwhile
        return await real(ops)

    store.abatch = slow  # type: ignore[method-assign]

    def work(worker: int) -> list[Any]:
        got = []
        for i in range(10):
            store.put(("threads", str(worker)), str(i), {"i": i})
            got.append(store.get(("threads", str(worker)), str(i)))
        return got

    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, range(8)))
    finally:
        asyncio.run_coroutine_threadsafe(opened.__aexit__(None, None, None), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()
    assert [[item.value["i"] for item in got] for got in results] == [list(range(10))] * 8
    assert sum(sizes) == 160 and len(sizes) < 80


def test_batches_writing_the_same_keys_in_any_order_do_not_deadlock(_store_dsn: str) -> None:
    """Two processes' batches write the same items, listed in opposite
    orders: the rows are written in key order, so neither waits for a lock
    the other holds (PostgreSQL would abort one of them as a deadlock)."""
    from pregelkit.checkpoint import StorageRetry
    from pregelkit.store.postgres import PostgresStore

    keys = [f"k{i:03}" for i in range(300)]

    def work(order: list[str]) -> None:
        with PostgresStore.from_conn_string(_store_dsn) as store:
            store.retry = StorageRetry(attempts=1)  # a deadlock would raise, not retry
            for round_ in range(15):
                store.batch([PutOp(("race",), key, {"r": round_}) for key in order])

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, [keys, keys[::-1]]))


def test_a_lone_sqlite_get_reads_as_a_batch_does(tmp_path: Any) -> None:
    """SqliteStore.get takes one SELECT without the batch plan: what it reads
    is what a batch of that get reads, and a subclass that overrides
    ``batch`` still sees every get."""
    from pregelkit.store.sqlite import SqliteStore

    seen: list[list[Op]] = []

    class Watched(SqliteStore):
        def batch(self, ops: Any) -> list[Any]:
            ops = list(ops)
            seen.append(ops)
            return super().batch(ops)

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as store:
        store.put(("a", "b"), "k", {"v": [1, "x"]})
        assert store.get(("a", "b"), "k") == store.batch([GetOp(("a", "b"), "k")])[0]
        assert store.get(("a", "b"), "missing") is None
        assert store.get(("a",), "k") is None
        with pytest.raises(InvalidNamespaceError):
            store.get(("a", ""), "k")
        watched = Watched(store.conn)
        item = watched.get(("a", "b"), "k")
        assert item is not None and item.value == {"v": [1, "x"]}
        assert seen == [[GetOp(("a", "b"), "k", refresh_ttl=False)]]
