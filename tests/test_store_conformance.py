"""Every store, the same contract: InMemoryStore, SqliteStore,
AsyncSqliteStore, PostgresStore and AsyncPostgresStore (the async ones
through their async methods), against a real SQLite file and a real
PostgreSQL server."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from datetime import UTC, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import StoreUnderTest
from pregelkit.store._filter import matches, parse_filter
from pregelkit.store.base import InvalidNamespaceError, Item, PutOp, SearchItem
from pregelkit.testing import FakeClock

_fixture_ok = settings(
    max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
_ids = itertools.count()


def _fresh(label: str = "t") -> tuple[str, ...]:
    """A namespace no other example of the session uses."""
    return (f"{label}{next(_ids)}",)


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic toy embedding: letter counts."""
    return [[float(text.count(c)) + 0.01 for c in "abcdefgh"] for text in texts]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture
def store(make_store: Any) -> StoreUnderTest:
    """One store for every example of a hypothesis test."""
    made: StoreUnderTest = make_store()
    return made


def test_put_get_delete(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    value = {"name": "Ada", "nested": {"list": [1, 2.5, None, True], "ünï": "cödé"}}
    assert s.get(("users", "1"), "profile") is None
    s.put(("users", "1"), "profile", value)
    item = s.get(["users", "1"], "profile")  # lists are accepted as namespaces
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (("users", "1"), "profile", value)
    assert item.created_at.tzinfo is not None and item.created_at.utcoffset() == UTC.utcoffset(None)
    time.sleep(0.002)
    s.put(("users", "1"), "profile", {"name": "Grace"})
    again = s.get(("users", "1"), "profile")
    assert again.value == {"name": "Grace"}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    s.delete(("users", "1"), "profile")
    assert s.get(("users", "1"), "profile") is None
    s.delete(("users", "1"), "profile")  # deleting a missing item is fine
    assert s.list_namespaces() == []


def test_search_order_and_pages(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    s.put(("docs", "a"), "1", {"n": 1})
    s.put(("docs", "b"), "2", {"n": 2})
    s.put(("other",), "3", {"n": 3})
    s.put(("docs", "a"), "4", {"n": 4})
    s.put(("docs", "a"), "1", {"n": 5})  # rewritten
    keys = [i.key for i in s.search((), limit=100)]
    if s.kind == "memory":
        # LangGraph's InMemoryStore order: namespaces as first written, then keys.
        assert keys == ["1", "4", "2", "3"]
    else:
        # LangGraph's SQL stores: most recently written first.
        assert keys == ["1", "4", "3", "2"]
    assert {i.key for i in s.search(("docs",), limit=100)} == {"1", "2", "4"}
    assert s.search(("doc",)) == []
    assert all(isinstance(i, SearchItem) and i.score is None for i in s.search(("docs",)))
    for limit in (1, 2, 3):
        paged = [
            i.key for offset in range(0, 4, limit) for i in s.search((), limit=limit, offset=offset)
        ]
        assert paged == keys
    assert s.search((), limit=0) == []
    # Without an index, query= is ignored (as in LangGraph), not an error.
    assert [i.key for i in s.search((), query="anything", limit=100)] == keys


def test_list_namespaces(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("a-x", "v1"),
        ("tenant", "a_%"),
    ]:
        s.put(namespace, "k", {})
    assert s.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert s.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert s.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert s.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert s.list_namespaces(max_depth=1) == [("a",), ("a-x",), ("tenant",)]
    assert s.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert s.list_namespaces(prefix=("tenant", "a_%")) == [("tenant", "a_%")]
    assert s.list_namespaces(prefix=("tenant", "a")) == []  # no pattern syntax in labels
    assert s.search(("tenant", "a")) == []
    s.delete(("a-x", "v1"), "k")
    assert ("a-x", "v1") not in s.list_namespaces()


BAD_NAMESPACES = [("foo.bar",), ("foo\x00",), ("foo", ""), (123,), "users"]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES)
def test_bad_namespaces_fail_alike_sync_and_async(
    make_store: Any, namespace: Any, arun: Any
) -> None:
    store = make_store().store
    calls = {
        "get": (lambda: store.get(namespace, "k"), lambda: store.aget(namespace, "k")),
        "put": (lambda: store.put(namespace, "k", {}), lambda: store.aput(namespace, "k", {})),
        "delete": (lambda: store.delete(namespace, "k"), lambda: store.adelete(namespace, "k")),
        "search": (lambda: store.search(namespace), lambda: store.asearch(namespace)),
        "prefix": (
            lambda: store.list_namespaces(prefix=namespace),
            lambda: store.alist_namespaces(prefix=namespace),
        ),
    }
    if isinstance(namespace, str):
        # A pattern is not a namespace: a str there is one label (LangGraph
        # reads it one label per character and matches nothing).
        del calls["prefix"]
        assert store.list_namespaces(prefix=namespace) == []
        assert arun(store.alist_namespaces(prefix=namespace)) == []
    for sync_call, async_call in calls.values():
        with pytest.raises(InvalidNamespaceError) as sync_error:
            sync_call()
        with pytest.raises(InvalidNamespaceError) as async_error:
            arun(async_call())
        assert str(sync_error.value) == str(async_error.value)


# a sync store has no event loop to block
@pytest.mark.parametrize("make_store", ["async_sqlite", "async_postgres"], indirect=True)
def test_async_stores_refuse_sync_calls_on_their_loop_thread(make_store: Any, arun: Any) -> None:
    """A sync call on the thread running the loop would block it (SQLite) or
    deadlock (PostgreSQL): refused with an error that is both LangGraph's
    asyncio.InvalidStateError and a RuntimeError; other threads may call."""
    s: StoreUnderTest = make_store()
    assert s.is_async
    store = s.store

    async def on_the_loop() -> list[BaseException]:
        refused: list[BaseException] = []
        for call in (
            lambda: store.put(("a",), "k", {"v": 1}),
            lambda: store.get(("a",), "k"),
            lambda: store.search(("a",)),
            lambda: store.list_namespaces(),
            lambda: store.delete(("a",), "k"),
            lambda: store.batch([PutOp(("a",), "k", {"v": 1})]),
        ):
            with pytest.raises(asyncio.InvalidStateError) as caught:
                call()
            refused.append(caught.value)
        await asyncio.to_thread(store.put, ("a",), "k", {"v": 2})
        return refused

    refused = arun(on_the_loop())
    assert all(isinstance(e, RuntimeError) and "await" in str(e) for e in refused)
    assert s.get(("a",), "k").value == {"v": 2}


def test_put_only_rules(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    with pytest.raises(InvalidNamespaceError, match="cannot be empty"):
        s.put((), "k", {})
    with pytest.raises(InvalidNamespaceError, match='cannot be "langgraph"'):
        s.put(("langgraph", "x"), "k", {})
    s.put(("x", "langgraph"), "k", {"v": 1})  # only the root label is reserved
    s.batch([PutOp(("langgraph", "x"), "k", {"v": 2})])  # ops are not put()
    assert s.get(("langgraph", "x"), "k").value == {"v": 2}
    assert s.get((), "k") is None
    with pytest.raises(TypeError, match="must be a dict"):
        s.put(("a",), "k", ["not", "a", "dict"])
    with pytest.raises(ValueError, match="NUL"):
        s.put(("a",), "k\x00", {})
    assert s.list_namespaces() == [("langgraph", "x"), ("x", "langgraph")]


def test_invalid_batch_changes_nothing(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    with pytest.raises(InvalidNamespaceError):
        s.batch([PutOp(("a",), "k", {"v": 1}), PutOp(("bad.label",), "k", {"v": 2})])
    assert s.get(("a",), "k") is None


def test_values_that_are_not_json_are_refused_by_durable_stores(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    if s.kind == "memory":
        return  # InMemoryStore keeps Python objects as they are
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        s.put(("a",), "k", {"when": object()})
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        s.put(("a",), "k", {"x": float("nan")})
    assert s.get(("a",), "k") is None


# filters


def test_filter_semantics(make_store: Any) -> None:
    s: StoreUnderTest = make_store()
    docs = {
        "a": {"kind": "cat", "age": 3, "meta": {"x": 1, "y": {"z": 2}}, "tags": ["t1", "t2"]},
        "b": {"kind": "dog", "age": 7},
        "c": {"kind": "cat", "age": "old"},
        "d": {"age": 10, "meta": {"x": 2}},
        "e": {"kind": None, "age": 3.0, "flag": True},
    }
    for key, value in docs.items():
        s.put(("f",), key, value)

    def keys(spec: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in s.search(("f",), filter=spec, limit=100))

    assert keys({"kind": "cat"}) == ["a", "c"]
    assert keys({"meta": {"y": {"z": 2.0}, "x": 1}}) == ["a"]  # JSON equality, any key order
    assert keys({"meta.x": 1}) == ["a"]  # dotted keys step into objects
    assert keys({"meta.y.z": {"$gte": 2}}) == ["a"]
    assert keys({"kind": {"$ne": "cat"}}) == ["b", "d", "e"]  # missing reads as null
    assert keys({"kind": None}) == ["d", "e"]
    assert keys({"age": {"$gt": 3}}) == ["b", "d"]  # "old" is not a number: no match
    assert keys({"age": {"$gte": 3, "$lt": 10}}) == ["a", "b", "e"]
    assert keys({"age": 3}) == ["a", "e"]  # 3 == 3.0
    assert keys({"kind": {"$gt": "cat"}}) == ["b"]
    assert keys({"tags": ["t1", "t2"]}) == ["a"]
    assert keys({"tags": "t1"}) == []
    assert keys({"tags.0": "t1"}) == []  # dots never index lists
    assert keys({"flag": True}) == ["e"]
    assert keys({"flag": 1}) == []  # true is not 1
    # Infinities compare as in Python; NaN equals and orders with nothing.
    numbers = ["a", "b", "d", "e"]
    assert keys({"age": {"$lt": math.inf}}) == keys({"age": {"$gte": -math.inf}}) == numbers
    assert keys({"age": {"$gt": math.inf}}) == keys({"age": {"$lte": -math.inf}}) == []
    assert keys({"age": {"$eq": math.nan}}) == keys({"age": {"$lt": math.nan}}) == []
    assert keys({"age": math.inf}) == []
    assert keys({"age": {"$ne": math.nan}}) == ["a", "b", "c", "d", "e"]
    assert all(
        matches(docs[k], parse_filter({"age": {"$lt": math.inf}})) == (k in numbers) for k in docs
    )
    with pytest.raises(ValueError, match="unknown operator"):
        keys({"age": {"$in": [3]}})
    with pytest.raises(ValueError, match="mixes operators"):
        keys({"age": {"$gt": 1, "x": 2}})
    with pytest.raises(ValueError, match="compares with a number or a string"):
        keys({"age": {"$gt": None}})
    with pytest.raises(ValueError, match="Invalid filter key"):
        keys({"access') = 'public' OR '1'='1' OR json_extract(value, '$.": "x"})


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-1000, max_value=1000)
    | st.floats(min_value=-1000, max_value=1000, allow_nan=False).map(lambda f: round(f, 3))
    | st.sampled_from(["", "a", "b", "ab", "B", "é", "a'b"])
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y"]), inner, max_size=2)
    ),
    max_leaves=5,
)
_doc_keys = st.sampled_from(["x", "y", "z"])
_docs = st.dictionaries(_doc_keys, _json, max_size=3)
_paths = st.sampled_from(["x", "y", "z", "x.x", "x.y", "y.x"])
_operands = _json_scalars | _json
_conditions = st.one_of(
    _operands.map(lambda v: v),
    st.dictionaries(st.sampled_from(["$eq", "$ne"]), _operands, min_size=1, max_size=2),
    st.dictionaries(
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
        st.integers(-5, 5) | st.sampled_from(["", "a", "b", "é"]),
        min_size=1,
        max_size=2,
    ),
)
_filters = st.dictionaries(_paths, _conditions, min_size=1, max_size=2).filter(
    lambda spec: all(
        not (isinstance(v, dict) and v and not all(str(k).startswith("$") for k in v))
        or not any(str(k).startswith("$") for k in v)
        for v in spec.values()
    )
)


@_fixture_ok
@given(docs=st.lists(_docs, min_size=1, max_size=6), spec=_filters)
def test_filters_agree_with_the_reference(
    store: StoreUnderTest, docs: list[dict[str, Any]], spec: dict[str, Any]
) -> None:
    """Whatever the store, a filter keeps exactly the documents the in-memory
    reading of the rules keeps."""
    s = store
    namespace = _fresh()
    for n, doc in enumerate(docs):
        s.put(namespace, str(n), doc)
    expected = {str(n) for n, doc in enumerate(docs) if matches(doc, parse_filter(spec))}
    got = {i.key for i in s.search(namespace, filter=spec, limit=100)}
    assert got == expected, (docs, spec)


_BIG = [2**63 - 1, 2**63, 2**63 + 1, 2**64 + 1, -(2**63) - 1, 10**100, -(10**100), 10**400]


def test_orderings_on_integers_beyond_64_bits(store: StoreUnderTest) -> None:
    """SQLite binds no integer beyond 64 bits; an ordering on one still keeps
    exactly what the in-memory reading keeps (equality on one is refused)."""
    namespace = _fresh()
    values: list[Any] = [-10, 0, 30, 2**62, 2**63 - 1, 9.3e18, 1.8446744073709552e19, 1e300, -1e300]
    for n, value in enumerate(values):
        store.put(namespace, str(n), {"price": value})
    for operand in _BIG:
        for op in ("$lt", "$lte", "$gt", "$gte"):
            spec = {"price": {op: operand}}
            expected = {
                str(n) for n, v in enumerate(values) if matches({"price": v}, parse_filter(spec))
            }
            got = {i.key for i in store.search(namespace, filter=spec, limit=100)}
            assert got == expected, (op, operand)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        store.search(namespace, filter={"price": 10**100})


_fragments = [*"a.'\"-;$[]*%_\\ ()=\x00\n/", "OR", "--", "é", "$.x", "1=1", "\u2028"]
_hostile = st.lists(st.sampled_from(_fragments), max_size=8).map("".join) | st.sampled_from(
    ["a') OR 1=1 --", "$.x", '"', "x' OR '1'='1", "access') = 'public' OR ('1'='1", "*", "%"]
)


@_fixture_ok
@given(label=_hostile, key=_hostile, value=_hostile, filter_key=_hostile)
def test_hostile_input_is_refused_or_matches_nothing_else(
    store: StoreUnderTest, label: str, key: str, value: str, filter_key: str
) -> None:
    """Quotes, comments, path syntax and NULs as namespace labels, keys, filter
    keys and values: a clear ValueError, or the exact documents they name;
    never SQL, never another document."""
    s = store
    root = _fresh("hostile")
    s.put((*root, "secret"), "k", {"secret": True, "a": "s3cret"})
    namespace = (*root, "public", label)
    try:
        s.put(namespace, key, {filter_key.split(".")[0] or "e": value, "a": value})
    except ValueError:
        # Refused clearly (a bad label or key); nothing was stored.
        assert s.list_namespaces(prefix=(*root, "public")) == []
        return
    stored = s.get(namespace, key)
    assert stored is not None and stored.value["a"] == value
    assert s.list_namespaces(prefix=root) == sorted([(*root, "secret"), namespace])
    for spec in ({filter_key: value}, {filter_key: {"$ne": value}}, {"a": value}, {"a": key}):
        try:
            found = s.search(namespace, filter=spec, limit=100)
        except ValueError:
            continue
        doc = stored.value
        assert [i.key for i in found] == ([key] if matches(doc, parse_filter(spec)) else [])
        assert all(i.namespace == namespace for i in found)


# semantic search


def test_semantic_search(make_store: Any) -> None:
    s: StoreUnderTest = make_store(index={"embed": embed, "dims": 8, "fields": ["text"]})
    s.put(("docs",), "ab", {"text": "aaab", "color": "red"})
    s.put(("docs",), "cd", {"text": "ccccd", "color": "red"})
    s.put(("docs",), "gh", {"text": "gh", "color": "blue"})
    s.put(("docs",), "plain", {"text": "aaaa"}, index=False)  # stored, not embedded
    s.put(("docs",), "notext", {"other": "aaaa"})  # no field to embed
    hits = s.search(("docs",), query="aaaab", limit=10)
    texts = {"ab": "aaab", "cd": "ccccd", "gh": "gh"}
    query = embed(["aaaab"])[0]
    expected = sorted(texts, key=lambda k: -cosine(query, embed([texts[k]])[0]))
    assert [h.key for h in hits[:3]] == expected
    for hit in hits[:3]:
        want = cosine(embed(["aaaab"])[0], embed([hit.value["text"]])[0])
        assert hit.score == pytest.approx(want, abs=1e-5)
    assert {h.key for h in hits[3:]} == {"plain", "notext"}
    assert all(h.score is None for h in hits[3:])
    red = s.search(("docs",), query="ccc", filter={"color": "red"})
    assert [h.key for h in red] == ["cd", "ab"]  # "gh" is blue
    pages = [
        h.key
        for off in range(0, 5, 2)
        for h in s.search(("docs",), query="gg", limit=2, offset=off)
    ]
    assert pages == [h.key for h in s.search(("docs",), query="gg", limit=5)]
    # Per-put fields override the index's, and a rewrite re-embeds.
    s.put(("docs",), "gh", {"text": "x", "title": "aaaab"}, index=["title"])
    assert s.search(("docs",), query="aaaab", limit=1)[0].key == "gh"
    assert s.search(("docs",), query="aaaab", limit=1)[0].score == pytest.approx(1.0)
    s.delete(("docs",), "gh")
    assert "gh" not in {h.key for h in s.search(("docs",), query="aaaab")}


def test_semantic_search_takes_the_best_of_several_texts(make_store: Any) -> None:
    s: StoreUnderTest = make_store(index={"embed": embed, "dims": 8, "fields": ["parts[*]", "t"]})
    s.put(("d",), "one", {"parts": ["hhhh", "aaaa"], "t": "cc"})
    s.put(("d",), "two", {"parts": ["bbbb"], "t": "dd"})
    hit = s.search(("d",), query="aaaa", limit=1)[0]
    assert hit.key == "one" and hit.score == pytest.approx(1.0)


def test_an_embedder_that_answers_wrong_stores_nothing(make_store: Any) -> None:
    s: StoreUnderTest = make_store(
        index={"embed": lambda texts: [[1.0, 2.0] for _ in texts], "dims": 8}
    )
    with pytest.raises(ValueError, match="vector of 2 numbers, but the index has dims=8"):
        s.put(("a",), "k", {"text": "x"})
    assert s.get(("a",), "k") is None


def test_async_embedder(make_store: Any, arun: Any) -> None:
    async def aembed(texts: list[str]) -> list[list[float]]:
        return embed(texts)

    s: StoreUnderTest = make_store(index={"embed": aembed, "dims": 8, "fields": ["text"]})
    if not s.is_async:
        with pytest.raises(TypeError, match="embed function is async"):
            s.put(("a",), "k", {"text": "aaa"})
    arun(s.store.aput(("a",), "k", {"text": "aaa"}))
    assert arun(s.store.asearch(("a",), query="aaa"))[0].score == pytest.approx(1.0)


# TTL


def test_ttl(make_store: Any) -> None:
    if make_store().kind == "memory":
        with pytest.raises(NotImplementedError, match="does not expire items"):
            make_store().put(("a",), "k", {}, ttl=1)
        return
    # Expired, unswept items are left out of reads only with omit_expired
    # (tests/test_store_batch.py has them read until swept without it).
    # TTLs go by the process's clock, which a test's FakeClock moves (the
    # sweeper thread, on real time, runs every 100 minutes here: not during it)
    ttl = {"default_ttl": 4.0, "refresh_on_read": True, "omit_expired": True}
    with FakeClock(1_800_000_000.0) as clock:
        s: StoreUnderTest = make_store(ttl=ttl)

        def after(minutes: float) -> None:
            clock.advance(timedelta(minutes=minutes))

        s.put(("a",), "default", {"v": 1})  # expires at 4 min
        s.put(("a",), "kept", {"v": 2}, ttl=None)  # never
        s.put(("a",), "read", {"v": 3})
        after(2)
        assert s.get(("a",), "read") is not None  # restarts its TTL: expires at 6 min
        assert s.get(("a",), "default", refresh_ttl=False) is not None
        after(1.9)
        assert s.get(("a",), "default", refresh_ttl=False) is not None  # 6 s to go
        after(0.2)
        assert s.get(("a",), "default") is None  # expired: left out, swept or not
        assert [i.key for i in s.search(("a",), refresh_ttl=False)] == ["read", "kept"]
        assert s.sweep_ttl() == 1
        after(2)
        assert [i.key for i in s.search(("a",))] == ["kept"]
        assert s.sweep_ttl() == 1
        assert s.list_namespaces() == [("a",)]


def test_ttl_sweeper(make_store: Any, arun: Any) -> None:
    probe = make_store()
    if probe.kind == "memory":
        assert probe.store.supports_ttl is False
        return
    s: StoreUnderTest = make_store(ttl={"sweep_interval_minutes": 0.005})  # every 0.3 s
    s.put(("a",), "k", {"v": 1}, ttl=0.001)
    if s.is_async:  # the sweeper is a task of the loop: let the loop run
        arun(asyncio.sleep(1.5))
    else:
        time.sleep(1.5)
    assert s.sweep_ttl() == 0  # the sweeper got there first
    assert s.get(("a",), "k") is None
    assert s.stop_ttl_sweeper(5) is True


def test_durable_across_connections(make_store: Any, tmp_path: Any) -> None:
    first: StoreUnderTest = make_store()
    if first.kind == "memory":
        return
    first.put(("mem",), "k", {"v": "kept"})
    second: StoreUnderTest = make_store()
    assert second.get(("mem",), "k").value == {"v": "kept"}


# the in-memory store has no tables
@pytest.mark.parametrize(
    "make_store", ["sqlite", "async_sqlite", "postgres", "async_postgres"], indirect=True
)
def test_sql_stores_list_their_migrations_and_batch_concurrent_async_calls(
    make_store: Any, arun: Any
) -> None:
    """``MIGRATIONS`` lists the statements setup() runs (LangGraph's stores
    have it); concurrent async calls to the PostgreSQL store share one
    transaction per loop iteration instead of one each."""
    s: StoreUnderTest = make_store()
    migrations = type(s.store).MIGRATIONS
    assert migrations and all(m.split()[0] in ("CREATE", "ALTER", "DROP", "DO") for m in migrations)
    if s.kind != "async_postgres":
        return
    store = s.store
    sizes: list[int] = []
    real = store.abatch

    async def counting(ops: Any) -> Any:
        ops = list(ops)
        sizes.append(len(ops))
        return await real(ops)

    async def scenario() -> list[Any]:
        store.abatch = counting
        await asyncio.gather(*(store.aput(("b",), f"k{i}", {"i": i}) for i in range(50)))
        got = await asyncio.gather(*(store.aget(("b",), f"k{i}") for i in range(50)))
        async with store._cursor() as cur:
            await cur.execute("SELECT count(*) AS n FROM store")
            row = await cur.fetchone()
        assert row["n"] == 50
        return got

    got = arun(scenario())
    assert [item.value["i"] for item in got] == list(range(50))
    assert sizes == [50, 50]
