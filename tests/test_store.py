"""The store interface and InMemoryStore."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pregelkit.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from pregelkit.store.memory import InMemoryStore


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


def test_is_a_base_store(store: InMemoryStore) -> None:
    assert isinstance(store, BaseStore)
    assert store.supports_ttl is False


def test_put_get_delete(store: InMemoryStore) -> None:
    assert store.get(("users", "1"), "profile") is None
    store.put(("users", "1"), "profile", {"name": "Ada"})
    item = store.get(("users", "1"), "profile")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("users", "1"), "profile", {"name": "Ada"})
    assert item.created_at.tzinfo is UTC
    assert item.created_at == item.updated_at
    store.delete(("users", "1"), "profile")
    assert store.get(("users", "1"), "profile") is None
    store.delete(("users", "1"), "profile")  # deleting a missing item is fine


def test_overwrite_keeps_created_at(store: InMemoryStore) -> None:
    store.put(("a",), "k", {"v": 1})
    first = store.get(("a",), "k")
    store.put(("a",), "k", {"v": 2})
    second = store.get(("a",), "k")
    assert first is not None and second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at


def test_values_are_copied_in_and_out(store: InMemoryStore) -> None:
    value: dict[str, Any] = {"tags": ["x"]}
    store.put(("a",), "k", value)
    value["tags"].append("mutated after put")
    item = store.get(("a",), "k")
    assert item is not None
    item.value["tags"].append("mutated after get")
    store.search(("a",))[0].value["tags"].append("mutated after search")
    again = store.get(("a",), "k")
    assert again is not None and again.value == {"tags": ["x"]}


def test_item_dict_and_equality() -> None:
    at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    item = Item(value={"x": 1}, key="k", namespace=("a", "b"), created_at=at, updated_at=at)
    assert item.dict() == {
        "namespace": ["a", "b"],
        "key": "k",
        "value": {"x": 1},
        "created_at": "2024-01-02T03:04:05+00:00",
        "updated_at": "2024-01-02T03:04:05+00:00",
    }
    same = Item(value={"x": 1}, key="k", namespace=("a", "b"), created_at=at, updated_at=at)
    assert item == same and hash(item) == hash(same)
    assert item != Item(value={"x": 2}, key="k", namespace=("a", "b"), created_at=at, updated_at=at)
    hit = SearchItem(("a", "b"), "k", {"x": 1}, at, at, score=0.5)
    assert hit.dict()["score"] == 0.5
    assert hit != SearchItem(("a", "b"), "k", {"x": 1}, at, at)
    assert "key='k'" in repr(hit)


def test_search_by_prefix_newest_first(store: InMemoryStore) -> None:
    store.put(("docs", "a"), "1", {"n": 1})
    store.put(("docs", "b"), "2", {"n": 2})
    store.put(("other",), "3", {"n": 3})
    store.put(("docs", "a"), "1", {"n": 4})  # rewriting moves it to the front
    assert [(i.namespace, i.key) for i in store.search(("docs",))] == [
        (("docs", "a"), "1"),
        (("docs", "b"), "2"),
    ]
    assert [i.key for i in store.search(())] == ["1", "3", "2"]
    assert store.search(("doc",)) == []
    results = store.search(("docs", "b"))
    assert all(isinstance(i, SearchItem) and i.score is None for i in results)


def test_search_pages(store: InMemoryStore) -> None:
    for n in range(5):
        store.put(("p",), str(n), {"n": n})
    assert [i.key for i in store.search(("p",), limit=2)] == ["4", "3"]
    assert [i.key for i in store.search(("p",), limit=2, offset=2)] == ["2", "1"]
    assert [i.key for i in store.search(("p",), limit=2, offset=4)] == ["0"]
    assert store.search(("p",), limit=0) == []


def test_search_filter(store: InMemoryStore) -> None:
    store.put(("f",), "a", {"kind": "cat", "age": 3, "meta": {"x": 1}})
    store.put(("f",), "b", {"kind": "dog", "age": 7})
    store.put(("f",), "c", {"kind": "cat", "age": "old"})
    store.put(("f",), "d", {"age": 10})

    def keys(spec: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in store.search(("f",), filter=spec))

    assert keys({"kind": "cat"}) == ["a", "c"]
    assert keys({"kind": "cat", "age": 3}) == ["a"]
    assert keys({"meta": {"x": 1}}) == ["a"]
    assert keys({"kind": {"$eq": "dog"}}) == ["b"]
    assert keys({"kind": {"$ne": "cat"}}) == ["b", "d"]  # a missing key is "not equal"
    assert keys({"age": {"$gt": 3}}) == ["b", "d"]  # "old" cannot be ordered: no match
    assert keys({"age": {"$gte": 3, "$lt": 10}}) == ["a", "b"]
    assert keys({"age": {"$lte": 3}}) == ["a"]
    assert keys({"missing": None}) == []


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ({"age": {"$gt": 1, "plain": 2}}, ValueError, "mixes operators and plain keys"),
        ({"age": {"$regex": "x"}}, ValueError, r"unknown operator\(s\) \['\$regex'\]"),
        (["age"], TypeError, "filter must be a dict"),
    ],
)
def test_bad_filters_are_refused(
    store: InMemoryStore, spec: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        store.search(("f",), filter=spec)


def test_list_namespaces(store: InMemoryStore) -> None:
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("x", "v1"),
    ]:
        store.put(namespace, "k", {})
    assert store.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert store.list_namespaces(max_depth=1) == [("a",), ("x",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert store.list_namespaces(suffix=("a", "b", "c", "d", "e")) == []


def test_deleted_namespace_is_not_listed(store: InMemoryStore) -> None:
    store.put(("gone",), "k", {})
    store.put(("kept",), "k", {})
    store.delete(("gone",), "k")
    assert store.list_namespaces() == [("kept",)]


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "namespace is empty"),
        (("users", ""), r"\('users', ''\) has an empty label"),
        (("users", "a.b"), r"label 'a\.b' containing '\.'"),
        (("users", 42), r"label 42 of type int"),
        ("users", r"must be a tuple of strings .* got str 'users'"),
        (["users"], r"must be a tuple of strings .* got list"),
    ],
)
def test_invalid_namespaces_are_refused(store: InMemoryStore, namespace: Any, message: str) -> None:
    with pytest.raises(InvalidNamespaceError, match=message):
        store.put(namespace, "k", {"v": 1})
    with pytest.raises(ValueError, match=message):
        store.get(namespace, "k")
    assert store.list_namespaces() == []


def test_invalid_search_prefix_and_patterns(store: InMemoryStore) -> None:
    with pytest.raises(InvalidNamespaceError, match=r"namespace_prefix \('a\.b',\)"):
        store.search(("a.b",))
    with pytest.raises(InvalidNamespaceError, match="prefix"):
        store.list_namespaces(prefix=("",))
    with pytest.raises(ValueError, match="match_type must be 'prefix' or 'suffix'"):
        store.batch([ListNamespacesOp((MatchCondition("infix", ("a",)),))])  # type: ignore[arg-type]


def test_bad_arguments_are_refused(store: InMemoryStore) -> None:
    with pytest.raises(TypeError, match=r"value for key 'k' in namespace \('a',\) must be a dict"):
        store.put(("a",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a string"):
        store.put(("a",), 1, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit must be a non-negative int"):
        store.search(("a",), limit=-1)
    with pytest.raises(ValueError, match="offset must be a non-negative int"):
        store.list_namespaces(offset=-1)
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        store.list_namespaces(max_depth=0)
    with pytest.raises(TypeError, match="unknown store op"):
        store.batch([("get", ("a",), "k")])  # type: ignore[list-item]


def test_semantic_search_and_ttl_are_refused_clearly(store: InMemoryStore) -> None:
    with pytest.raises(NotImplementedError, match=r"semantic search.*use filter="):
        store.search(("a",), query="cats")
    with pytest.raises(NotImplementedError, match=r"put\(index=\['text'\]\).*index=None"):
        store.put(("a",), "k", {"text": "hi"}, index=["text"])
    with pytest.raises(NotImplementedError, match=r"InMemoryStore does not expire items"):
        store.put(("a",), "k", {"text": "hi"}, ttl=5)
    with pytest.raises(NotImplementedError, match=r"InMemoryStore\(index=\.\.\.\)"):
        InMemoryStore(index={"dims": 3})
    store.put(("a",), "k", {"text": "hi"}, index=False)
    assert store.get(("a",), "k") is not None


def test_invalid_batch_changes_nothing(store: InMemoryStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a",), "k", {"v": 1}), PutOp(("bad.label",), "k", {"v": 2})])
    assert store.get(("a",), "k") is None


def test_batch_runs_in_order(store: InMemoryStore) -> None:
    results = store.batch(
        [
            GetOp(("a",), "k"),
            PutOp(("a",), "k", {"v": 1}),
            GetOp(("a",), "k"),
            SearchOp(("a",)),
            ListNamespacesOp(),
            PutOp(("a",), "k", None),
            GetOp(("a",), "k"),
        ]
    )
    assert results[0] is None and results[1] is None
    assert isinstance(results[2], Item) and results[2].value == {"v": 1}
    assert isinstance(results[3], list) and [i.key for i in results[3]] == ["k"]  # type: ignore[union-attr]
    assert results[4] == [("a",)]
    assert results[5] is None and results[6] is None


def test_refresh_ttl_is_accepted(store: InMemoryStore) -> None:
    store.put(("a",), "k", {"v": 1})
    assert store.get(("a",), "k", refresh_ttl=False) is not None
    assert len(store.search(("a",), refresh_ttl=False)) == 1


def test_async_twins(store: InMemoryStore) -> None:
    async def scenario() -> None:
        await store.aput(("users", "1"), "k", {"v": 1})
        await store.aput(("users", "2"), "k", {"v": 2})
        item = await store.aget(("users", "1"), "k")
        assert item is not None and item.value == {"v": 1}
        found = await store.asearch(("users",), filter={"v": {"$gt": 1}})
        assert [i.namespace for i in found] == [("users", "2")]
        assert await store.alist_namespaces(prefix=("users",)) == [("users", "1"), ("users", "2")]
        await store.adelete(("users", "1"), "k")
        assert await store.aget(("users", "1"), "k") is None
        with pytest.raises(NotImplementedError):
            await store.asearch(("users",), query="q")

    asyncio.run(scenario())


def test_threads_share_one_store(store: InMemoryStore) -> None:
    def work(worker: int) -> None:
        for i in range(100):
            store.put(("w", str(worker)), str(i), {"i": i})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.search(("w",), limit=1000)) == 400
    assert store.list_namespaces() == [("w", str(n)) for n in range(4)]


_labels = st.sampled_from(["a", "b", "c", "*"])
_namespaces = st.lists(_labels.filter(lambda label: label != "*"), min_size=1, max_size=4).map(
    tuple
)


@settings(max_examples=150, deadline=None)
@given(
    namespaces=st.lists(_namespaces, max_size=12),
    prefix=st.lists(_labels.filter(lambda label: label != "*"), max_size=4).map(tuple),
    pattern=st.lists(_labels, max_size=4).map(tuple),
    match_type=st.sampled_from(["prefix", "suffix"]),
    max_depth=st.none() | st.integers(min_value=1, max_value=4),
)
def test_prefix_search_and_listing_match_a_plain_reference(
    namespaces: list[tuple[str, ...]],
    prefix: tuple[str, ...],
    pattern: tuple[str, ...],
    match_type: str,
    max_depth: int | None,
) -> None:
    store = InMemoryStore()
    for n, namespace in enumerate(namespaces):
        store.put(namespace, str(n), {"n": n})

    # Search: every item whose namespace starts with the prefix, newest first.
    expected = [
        (namespace, str(n))
        for n, namespace in reversed(list(enumerate(namespaces)))
        if namespace[: len(prefix)] == prefix
    ]
    got = [(i.namespace, i.key) for i in store.search(prefix, limit=100)]
    assert got == expected

    # Listing: namespaces whose first/last labels fit the pattern ("*" = any).
    def fits(namespace: tuple[str, ...]) -> bool:
        # A suffix match is a prefix match of both sequences reversed.
        want, have = (
            (pattern, namespace) if match_type == "prefix" else (pattern[::-1], namespace[::-1])
        )
        return len(want) <= len(have) and all(w == "*" or w == h for w, h in zip(want, have))

    listed = {ns[:max_depth] if max_depth else ns for ns in namespaces if fits(ns)}
    kwargs: dict[str, Any] = {match_type: pattern, "max_depth": max_depth, "limit": 1000}
    assert store.list_namespaces(**kwargs) == sorted(listed)
