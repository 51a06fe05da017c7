"""InMemoryCache and SqliteCache: hits, misses, TTLs, clearing, async twins,
and SqliteCache shared between processes."""

from __future__ import annotations

import asyncio
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pregelkit.cache import memory as memory_module
from pregelkit.cache import sqlite as sqlite_module
from pregelkit.cache.base import BaseCache
from pregelkit.cache.memory import InMemoryCache
from pregelkit.cache.sqlite import CacheLoadError, SqliteCache
from pregelkit.checkpoint.serde.base import SerdeError, UnsafeTypeError
from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer

NS = ("graph", "node")
OTHER = ("graph", "other")


class Clock:
    """A clock the test moves by hand, standing in for the caches' time source."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class NotAllowed:
    """A class the default serializer has not been told it may rebuild."""


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(memory_module, "_now", fake)
    monkeypatch.setattr(sqlite_module, "_now", fake)
    return fake


@pytest.fixture(params=["memory", "sqlite"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCache[Any]]:
    if request.param == "memory":
        yield InMemoryCache()
        return
    sqlite_cache: SqliteCache[Any] = SqliteCache(path=str(tmp_path / "cache.db"))
    yield sqlite_cache
    sqlite_cache.close()


def test_miss_then_hit(cache: BaseCache[Any]) -> None:
    assert cache.get([(NS, "k")]) == {}
    cache.set({(NS, "k"): ({"answer": [1, 2, 3]}, None)})
    assert cache.get([(NS, "k"), (NS, "missing")]) == {(NS, "k"): {"answer": [1, 2, 3]}}


def test_same_key_in_other_namespace_is_separate(cache: BaseCache[Any]) -> None:
    cache.set({(NS, "k"): ("a", None), (OTHER, "k"): ("b", None)})
    assert cache.get([(NS, "k"), (OTHER, "k")]) == {(NS, "k"): "a", (OTHER, "k"): "b"}


def test_set_replaces(cache: BaseCache[Any]) -> None:
    cache.set({(NS, "k"): (1, None)})
    cache.set({(NS, "k"): (2, None)})
    assert cache.get([(NS, "k")]) == {(NS, "k"): 2}


def test_values_are_copies(cache: BaseCache[Any]) -> None:
    value = {"items": [1]}
    cache.set({(NS, "k"): (value, None)})
    value["items"].append(2)
    got = cache.get([(NS, "k")])[(NS, "k")]
    got["items"].append(3)
    assert cache.get([(NS, "k")]) == {(NS, "k"): {"items": [1]}}


def test_ttl_expires(cache: BaseCache[Any], clock: Clock) -> None:
    cache.set({(NS, "short"): ("s", 10), (NS, "forever"): ("f", None)})
    clock.now += 9.9
    assert cache.get([(NS, "short"), (NS, "forever")]) == {
        (NS, "short"): "s",
        (NS, "forever"): "f",
    }
    clock.now += 0.1
    assert cache.get([(NS, "short"), (NS, "forever")]) == {(NS, "forever"): "f"}


def test_ttl_zero_is_already_expired(cache: BaseCache[Any], clock: Clock) -> None:
    cache.set({(NS, "k"): ("v", 0)})
    assert cache.get([(NS, "k")]) == {}


def test_reset_extends_ttl(cache: BaseCache[Any], clock: Clock) -> None:
    cache.set({(NS, "k"): ("old", 10)})
    clock.now += 5
    cache.set({(NS, "k"): ("new", 10)})
    clock.now += 6  # past the first expiry, within the second
    assert cache.get([(NS, "k")]) == {(NS, "k"): "new"}
    clock.now += 5
    assert cache.get([(NS, "k")]) == {}


def test_reset_without_ttl_keeps_entry(cache: BaseCache[Any], clock: Clock) -> None:
    cache.set({(NS, "k"): ("old", 10)})
    cache.set({(NS, "k"): ("new", None)})
    clock.now += 1000
    assert cache.get([(NS, "k")]) == {(NS, "k"): "new"}


def test_negative_ttl_is_refused(cache: BaseCache[Any]) -> None:
    with pytest.raises(ValueError, match=r"ttl for cache key 'k' in namespace \('graph', 'node'\)"):
        cache.set({(NS, "k"): ("v", -1)})
    assert cache.get([(NS, "k")]) == {}


def test_clear_by_namespace_is_exact(cache: BaseCache[Any]) -> None:
    child = (*NS, "child")
    cache.set({(NS, "a"): (1, None), (OTHER, "b"): (2, None), (child, "c"): (3, None)})
    cache.clear([NS])
    assert cache.get([(NS, "a"), (OTHER, "b"), (child, "c")]) == {(OTHER, "b"): 2, (child, "c"): 3}


def test_clear_distinguishes_labels_with_separators(cache: BaseCache[Any]) -> None:
    joined = ("a,b",)
    split = ("a", "b")
    cache.set({(joined, "k"): (1, None), (split, "k"): (2, None)})
    cache.clear([split])
    assert cache.get([(joined, "k"), (split, "k")]) == {(joined, "k"): 1}


def test_clear_all(cache: BaseCache[Any]) -> None:
    cache.set({(NS, "a"): (1, None), (OTHER, "b"): (2, 5)})
    cache.clear()
    assert cache.get([(NS, "a"), (OTHER, "b")]) == {}
    cache.set({(NS, "a"): (3, None)})
    assert cache.get([(NS, "a")]) == {(NS, "a"): 3}


def test_async_twins(cache: BaseCache[Any]) -> None:
    async def scenario() -> None:
        assert await cache.aget([(NS, "k")]) == {}
        await cache.aset({(NS, "k"): ("v", None), (OTHER, "k"): ("w", None)})
        assert await cache.aget([(NS, "k"), (OTHER, "k")]) == {(NS, "k"): "v", (OTHER, "k"): "w"}
        await cache.aclear([NS])
        assert await cache.aget([(NS, "k"), (OTHER, "k")]) == {(OTHER, "k"): "w"}
        await cache.aclear()
        assert await cache.aget([(OTHER, "k")]) == {}

    asyncio.run(scenario())


def test_threads_share_one_cache(cache: BaseCache[Any]) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(50):
                cache.set({((f"w{worker}",), str(i)): (i, None)})
                assert cache.get([((f"w{worker}",), str(i))]) == {((f"w{worker}",), str(i)): i}
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    keys = [((f"w{n}",), str(i)) for n in range(4) for i in range(50)]
    assert len(cache.get(keys)) == 200


def test_default_serializer_is_jsonplus(cache: BaseCache[Any]) -> None:
    assert isinstance(cache.serde, JsonPlusSerializer)


def test_memory_cache_drops_expired_entries_it_is_never_asked_for(clock: Clock) -> None:
    cache: InMemoryCache[str] = InMemoryCache()
    cache.set({(NS, str(i)): ("v", 1) for i in range(100)})
    clock.now += 2
    cache.set({(OTHER, "fresh"): ("v", None)})
    assert list(cache._entries) == [OTHER]
    assert cache._expiries == []


def test_memory_cache_refuses_values_the_serializer_cannot_store() -> None:
    cache: InMemoryCache[Any] = InMemoryCache()
    with pytest.raises(SerdeError):
        cache.set({(NS, "k"): (threading.Lock(), None)})


def test_custom_serializer_is_used(tmp_path: Path) -> None:
    class Recording:
        def __init__(self) -> None:
            self.loads: list[tuple[str, bytes]] = []

        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return ("pickle", pickle.dumps(obj))

        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            self.loads.append(data)
            return pickle.loads(data[1])

    makers: list[Callable[[Recording], BaseCache[Any]]] = [
        lambda serde: InMemoryCache(serde=serde),
        lambda serde: SqliteCache(path=str(tmp_path / "c.db"), serde=serde),
    ]
    for make in makers:
        serde = Recording()
        cache = make(serde)
        cache.set({(NS, "k"): ([1], None)})
        assert cache.get([(NS, "k")]) == {(NS, "k"): [1]}
        assert serde.loads == [("pickle", pickle.dumps([1]))]
        if isinstance(cache, SqliteCache):
            cache.close()


def _sqlite_rows(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT ns, key, expires_at FROM pregelkit_cache ORDER BY key"
        ).fetchall()


def test_sqlite_set_deletes_expired_rows(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "cache.db"
    cache: SqliteCache[str] = SqliteCache(path=str(path))
    cache.set({(NS, "old"): ("v", 1), (NS, "keep"): ("v", None)})
    clock.now += 5
    cache.get([(NS, "old")])  # reads never write
    assert len(_sqlite_rows(path)) == 2
    cache.set({(NS, "new"): ("v", 60)})
    assert _sqlite_rows(path) == [
        ('["graph","node"]', "keep", None),
        ('["graph","node"]', "new", clock.now + 60),
    ]
    cache.close()


def test_sqlite_refuses_unsafe_row_naming_namespace_and_key(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache: SqliteCache[Any] = SqliteCache(path=str(path))
    cache.set({(NS, "good"): ("fine", None)})
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO pregelkit_cache (ns, key, tag, value) VALUES (?, ?, ?, ?)",
            ('["graph","node"]', "bad", "pickle", pickle.dumps(NotAllowed())),
        )
    with pytest.raises(CacheLoadError) as caught:
        cache.get([(NS, "good"), (NS, "bad")])
    error = caught.value
    assert isinstance(error, SerdeError)
    assert isinstance(error.__cause__, UnsafeTypeError)
    assert (error.namespace, error.key, error.path) == (NS, "bad", str(path))
    assert "namespace ('graph', 'node'), key 'bad'" in str(error)
    assert "clear([('graph', 'node')])" in str(error)
    # The row is kept for inspection, and clearing the namespace drops it.
    assert [row[1] for row in _sqlite_rows(path)] == ["bad", "good"]
    cache.clear([NS])
    assert cache.get([(NS, "good"), (NS, "bad")]) == {}
    cache.close()


def test_sqlite_bad_path_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "cache.db"
    with pytest.raises(sqlite3.OperationalError, match=r"cannot open the cache file .*cache\.db"):
        SqliteCache(path=str(path))


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache: SqliteCache[int] = SqliteCache(path=str(path))
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    cache.close()


def test_sqlite_reopens_after_close(tmp_path: Path) -> None:
    cache: SqliteCache[int] = SqliteCache(path=str(tmp_path / "cache.db"))
    cache.set({(NS, "k"): (1, None)})
    cache.close()
    assert cache.get([(NS, "k")]) == {(NS, "k"): 1}
    cache.close()


def test_sqlite_failed_write_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache: SqliteCache[Any] = SqliteCache(path=str(path))
    with pytest.raises(RuntimeError, match="mid-write"), cache._write() as conn:
        conn.execute(
            "INSERT INTO pregelkit_cache (ns, key, tag, value) VALUES ('[]', 'x', 't', x'00')"
        )
        raise RuntimeError("mid-write")
    assert _sqlite_rows(path) == []
    cache.set({(NS, "k"): (1, None)})  # the connection is usable again
    assert cache.get([(NS, "k")]) == {(NS, "k"): 1}
    cache.close()


_CHILD = textwrap.dedent(
    """
    import json, sys
    from pregelkit.cache.sqlite import SqliteCache

    cache = SqliteCache(path=sys.argv[1])
    seen = cache.get([(("from", "parent"), "k")])
    for i in range(100):
        cache.set({(("from", "child"), str(i)): ({"i": i}, None)})
    print(json.dumps([[list(ns), key, value] for (ns, key), value in seen.items()]))
    cache.close()
    """
)


def test_sqlite_is_shared_between_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    cache: SqliteCache[Any] = SqliteCache(path=path)
    cache.set({(("from", "parent"), "k"): ("hello", None)})
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # Write while the child writes: both must wait for the lock, not fail.
    for i in range(100):
        cache.set({(("from", "parent"), str(i)): (i, None)})
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == '[[["from", "parent"], "k", "hello"]]'
    from_child = cache.get([(("from", "child"), str(i)) for i in range(100)])
    assert from_child == {(("from", "child"), str(i)): {"i": i} for i in range(100)}
    cache.close()


def test_sqlite_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "forked.db")
    cache: SqliteCache[Any] = SqliteCache(path=path)
    cache.set({(NS, "before"): ("parent", None)})
    parent_conn = cache._conn
    pid = os.fork()
    if pid == 0:  # child: report through the exit code, never return into pytest
        code = 1
        try:
            if cache._conn is None and cache.get([(NS, "before")]) == {(NS, "before"): "parent"}:
                cache.set({(NS, "child"): ("child", None)})
                code = 0 if cache._conn is not parent_conn else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cache._conn is parent_conn
    assert cache.get([(NS, "child"), (NS, "before")]) == {
        (NS, "child"): "child",
        (NS, "before"): "parent",
    }
    cache.close()


def test_sqlite_async_runs_off_the_event_loop_thread(tmp_path: Path) -> None:
    cache: SqliteCache[Any] = SqliteCache(path=str(tmp_path / "cache.db"))
    threads: list[int] = []
    original: Callable[..., Any] = cache.get

    def recording_get(keys: Any) -> Any:
        threads.append(threading.get_ident())
        return original(keys)

    cache.get = recording_get  # type: ignore[method-assign]

    async def scenario() -> None:
        await cache.aget([(NS, "k")])

    asyncio.run(scenario())
    assert threads and threads[0] != threading.get_ident()
    cache.close()
