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
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from pregelkit.store.base.batch import AsyncBatchedBaseStore
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
    # LangGraph prints search results as "Item(...)" too.
    assert repr(hit) == (
        "Item(namespace=['a', 'b'], key='k', value={'x': 1}, "
        "created_at='2024-01-02T03:04:05+00:00', updated_at='2024-01-02T03:04:05+00:00', "
        "score=0.5)"
    )


def test_refresh_ttl_is_accepted(store: InMemoryStore) -> None:
    store.put(("a",), "k", {"v": 1})
    assert store.get(("a",), "k", refresh_ttl=False) is not None
    assert len(store.search(("a",), refresh_ttl=False)) == 1


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

    # Search: every item under the prefix, in LangGraph's InMemoryStore order:
    # namespaces as first written, then items as written.
    expected = [
        (namespace, str(n))
        for first in dict.fromkeys(namespaces)
        for n, namespace in enumerate(namespaces)
        if namespace == first and namespace[: len(prefix)] == prefix
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


def test_search_keeps_langgraph_order(store: InMemoryStore) -> None:
    store.put(("a",), "k1", {})
    store.put(("b",), "k2", {})
    store.put(("a",), "k3", {})
    store.put(("a", "x"), "k4", {})
    assert [i.key for i in store.search(())] == ["k1", "k3", "k2", "k4"]
    store.delete(("a",), "k1")
    store.put(("a",), "k1", {})  # deleted and written again: last of its namespace
    store.put(("b",), "k2", {"v": 2})  # rewritten: keeps its place
    assert [i.key for i in store.search(())] == ["k3", "k1", "k2", "k4"]


def _letters(texts: list[str]) -> list[list[float]]:
    return [[float(text.count(c)) for c in "abc"] for text in texts]


def test_semantic_search_with_a_user_function() -> None:
    store = InMemoryStore(index={"embed": _letters, "dims": 3, "fields": ["text"]})
    assert store.index_config == {"embed": _letters, "dims": 3, "fields": ["text"]}
    store.put(("d",), "a", {"text": "aaa"})
    store.put(("d",), "b", {"text": "bbb"})
    store.put(("d",), "ab", {"text": "ab"})
    store.put(("d",), "skip", {"text": "aaa"}, index=False)
    hits = store.search(("d",), query="a")
    assert [(h.key, round(h.score, 4) if h.score is not None else None) for h in hits] == [
        ("a", 1.0),
        ("ab", 0.7071),
        ("b", 0.0),
        ("skip", None),  # stored without vectors: after every scored item
    ]
    assert [h.key for h in store.search(("d",))] == ["a", "b", "ab", "skip"]
    assert [h.key for h in store.search(("d",), query="")] == ["a", "b", "ab", "skip"]


def test_embedder_objects_and_async_functions() -> None:
    class Embedder:
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.calls.append(texts)
            return _letters(texts)

        def embed_query(self, text: str) -> list[float]:
            return _letters([text])[0]

    embedder = Embedder()
    store = InMemoryStore(index={"embed": embedder, "dims": 3, "fields": ["t", "u"]})
    assert store.embeddings is embedder
    store.batch([PutOp(("d",), "x", {"t": "a", "u": "b"}), PutOp(("d",), "y", {"t": "c"})])
    assert embedder.calls == [["a", "b", "c"]]  # one call for the whole batch

    async def aembed(texts: list[str]) -> list[list[float]]:
        return _letters(texts)

    async_store = InMemoryStore(index={"embed": aembed, "dims": 3})
    with pytest.raises(TypeError, match="embed function is async"):
        async_store.put(("d",), "x", {"t": "a"})
    assert asyncio.run(async_store.aget(("d",), "x")) is None

    async def scenario() -> list[SearchItem]:
        await async_store.aput(("d",), "x", {"t": "a"})
        return await async_store.asearch(("d",), query="a")

    assert [h.key for h in asyncio.run(scenario())] == ["x"]


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        ({"embed": "openai:text-embedding-3-small", "dims": 3}, ValueError, "needs LangChain"),
        ({"embed": _letters, "dims": 0}, ValueError, "dims must be a positive int"),
        ({"embed": _letters}, ValueError, "dims must be a positive int"),
        ({"dims": 3}, ValueError, "needs 'embed'"),
        ({"embed": 3, "dims": 3}, TypeError, "embed must be a function"),
        ({"embed": _letters, "dims": 3, "distance_type": "l2"}, ValueError, "cosine"),
        ({"embed": _letters, "dims": 3, "fields": "text"}, TypeError, "list of field paths"),
    ],
)
def test_bad_index_configs_are_refused(
    index: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        InMemoryStore(index=index)


def test_get_text_at_path() -> None:
    doc = {"a": {"b": [{"c": "x"}, {"c": "y"}], "d": "z"}, "t": "top", "n": [1, "s"]}
    assert tokenize_path("a.b[0].c") == ["a", "b", "[0]", "c"]
    assert tokenize_path("a.{b,d}") == ["a", "{b,d}"]
    assert get_text_at_path(doc, "a.b[0].c") == ["x"]
    assert get_text_at_path(doc, "a.b[*].c") == ["x", "y"]
    assert get_text_at_path(doc, "a.b[-1].c") == ["y"]
    assert get_text_at_path(doc, "a.{b,d}") == ['[{"c": "x"}, {"c": "y"}]', "z"]
    assert get_text_at_path(doc, "n[*]") == ["1", "s"]
    assert get_text_at_path(doc, "a.*") == ['[{"c": "x"}, {"c": "y"}]', "z"]
    assert get_text_at_path(doc, "missing") == []
    assert get_text_at_path(doc, "a.b[5].c") == []
    assert get_text_at_path({"x": "é"}, "$") == ['{"x": "é"}']
    # An alternative may be a path of its own; None has no text to embed.
    assert get_text_at_path(doc, "{t,a.d}") == ["top", "z"]
    assert get_text_at_path({"a": None, "b": [None, "x"]}, "{a,b[*]}") == ["x"]
    assert get_text_at_path(None, "a") == []
    # A malformed path reads nothing (put refuses it on its own).
    assert get_text_at_path(doc, "{t") == []
    assert get_text_at_path(doc, "n[x]") == []
    with pytest.raises(ValueError, match="unclosed"):
        tokenize_path("a[0")


@pytest.mark.parametrize("namespace", [("foo.bar",), ("foo\x00",), ("foo", ""), (123,)])
def test_validate_op_namespace(namespace: Any) -> None:
    for op in (
        GetOp(namespace, "k"),
        PutOp(namespace, "k", {}),
        PutOp(namespace, "k", None),
        SearchOp(namespace),
        ListNamespacesOp((MatchCondition("prefix", namespace),)),
        ListNamespacesOp((MatchCondition("suffix", namespace),)),
    ):
        with pytest.raises(InvalidNamespaceError):
            validate_op_namespace(op)
    for op in (
        SearchOp(()),
        ListNamespacesOp((MatchCondition("prefix", ("t", "*")),)),
        GetOp(("tenant", "a_%"), "k"),
        PutOp(("langgraph", "x"), "k", {}),  # put()'s own rule, not an op rule
    ):
        validate_op_namespace(op)


def test_bad_calls_never_reach_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryStore()
    calls: list[Any] = []
    monkeypatch.setattr(InMemoryStore, "batch", lambda self, ops: calls.append(ops))
    monkeypatch.setattr(InMemoryStore, "abatch", lambda self, ops: calls.append(ops))
    for call in (
        lambda: store.get(("a.b",), "k"),
        lambda: store.delete(("a", ""), "k"),
        lambda: store.search(("a", 1)),  # type: ignore[arg-type]
        lambda: store.list_namespaces(suffix=("x.y",)),
        lambda: store.put(("langgraph",), "k", {}),
        lambda: store.put((), "k", {}),
    ):
        with pytest.raises(InvalidNamespaceError):
            call()
    with pytest.raises(InvalidNamespaceError):
        asyncio.run(store.aget(("a.b",), "k"))
    assert calls == []


class Batched(AsyncBatchedBaseStore):
    """An in-memory store behind the batching base, recording each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemoryStore()
        self.batches: list[list[Any]] = []

    def batch(self, ops: Any) -> list[Any]:
        return self.inner.batch(ops)

    async def abatch(self, ops: Any) -> list[Any]:
        self.batches.append(list(ops))
        return self.inner.batch(ops)


def test_async_batched_store_gathers_concurrent_calls() -> None:
    store = Batched()

    async def scenario() -> None:
        await asyncio.gather(store.aput(("a",), "x", {"v": 1}), store.aput(("a",), "y", {"v": 2}))
        assert len(store.batches) == 1
        store.batches.clear()
        got = await asyncio.gather(
            store.aget(("a",), "x"), store.aget(("a",), "x"), store.asearch(("a",))
        )
        assert [len(b) for b in store.batches] == [2]  # the repeated get is sent once
        assert got[0] == got[1] and got[0] is not None and got[0].value == {"v": 1}
        assert [i.key for i in got[2]] == ["x", "y"]
        # A bad call fails alone, before it is queued.
        results = await asyncio.gather(
            store.aget(("a",), "y"), store.aget(("bad.label",), "y"), return_exceptions=True
        )
        assert isinstance(results[1], InvalidNamespaceError)
        assert results[0] is not None and results[0].value == {"v": 2}
        # A cancelled caller does not break the store.
        pending = asyncio.ensure_future(store.aget(("a",), "x"))
        await asyncio.sleep(0)
        pending.cancel()
        assert await store.alist_namespaces() == [("a",)]
        await store.adelete(("a",), "x")
        assert await store.aget(("a",), "x") is None

    asyncio.run(scenario())


def test_async_batched_store_sends_the_last_of_repeated_writes() -> None:
    store = Batched()

    async def scenario() -> None:
        results = await asyncio.gather(
            store.aput(("a",), "k", {"v": 1}),
            store.aput(("a",), "other", {"v": 0}),
            store.aput(("a",), "k", {"v": 2}),
        )
        assert results == [None, None, None]
        assert [[(op.key, op.value) for op in b] for b in store.batches] == [
            [("k", {"v": 2}), ("other", {"v": 0})]
        ]
        store.batches.clear()
        # A read in the batch sees the store as it was before the batch, as
        # in LangGraph's stores; of the two writes only the last is sent.
        got = await asyncio.gather(
            store.aput(("a",), "k", {"v": 3}),
            store.aget(("a",), "k"),
            store.aput(("a",), "k", {"v": 4}),
        )
        assert got[1] is not None and got[1].value == {"v": 2}
        assert [(op.key, getattr(op, "value", "get")) for op in store.batches[0]] == [
            ("k", {"v": 4}),
            ("k", "get"),
        ]
        assert (await store.aget(("a",), "k")).value == {"v": 4}  # type: ignore[union-attr]

    asyncio.run(scenario())


class _Interrupt(BaseException):
    """Not an Exception, like KeyboardInterrupt or pytest's timeout."""


def test_async_batched_store_callers_never_wait_forever() -> None:
    """When the task sending the batches dies of something that is not an
    Exception, or is stopped with calls in flight, every waiting caller is
    answered (before, each waited forever and a test timeout hung the run)."""
    store = Batched()
    gate = asyncio.Event()

    async def interrupted(ops: Any) -> list[Any]:
        await gate.wait()
        raise _Interrupt

    async def scenario() -> None:
        store.abatch = interrupted  # type: ignore[method-assign]
        calls = [asyncio.ensure_future(store.aget(("a",), str(i))) for i in range(3)]
        await asyncio.sleep(0.01)
        late = asyncio.ensure_future(store.aput(("a",), "late", {}))  # queued behind them
        await asyncio.sleep(0)
        gate.set()
        done = await asyncio.wait_for(
            asyncio.gather(*calls, late, return_exceptions=True), timeout=10
        )
        assert [type(r) for r in done] == [_Interrupt] * 4
        del store.abatch  # the next call starts a new task
        await store.aput(("a",), "k", {"v": 1})
        gate.clear()
        store.abatch = interrupted  # type: ignore[method-assign]
        stopped = [asyncio.ensure_future(store.aget(("a",), "k")) for _ in range(2)]
        await asyncio.sleep(0.01)
        store.stop_batching()
        results = await asyncio.wait_for(asyncio.gather(*stopped, return_exceptions=True), 10)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)

    asyncio.run(scenario())
