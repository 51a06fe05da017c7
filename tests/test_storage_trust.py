"""What is saved can be loaded, loading is bounded, and encrypted values load
only where they were sealed: through the savers, as a user (or an attacker
with write access to the database) would hit it."""

from __future__ import annotations

import collections
import decimal
import fractions
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from conftest import truncate_saver_tables
from pregelkit.checkpoint.base import BaseCheckpointSaver, RunnableConfig
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.serde import EncryptedSerializer, JsonPlusSerializer, SerdeError
from pregelkit.checkpoint.serde.base import LoadLimitError, SerializerProtocol
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.errors import CheckpointCorruptError
from pregelkit.func import entrypoint, task

KEY = bytes(range(32))
Raw = Callable[..., list[tuple[Any, ...]]]


def conf(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put_state(saver: BaseCheckpointSaver[Any], thread_id: str, value: Any) -> RunnableConfig:
    """One checkpoint with channel "x" = value and a pending write to "y"."""
    from pregelkit.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None)
    checkpoint["channel_values"] = {"x": value}
    checkpoint["channel_versions"] = {"x": version}
    config = saver.put(conf(thread_id), checkpoint, {"source": "loop", "step": 0}, {"x": version})
    saver.put_writes(config, [("y", {"pending": value})], "task-1")
    return config


class Store:
    def __init__(self, kind: str, make: Callable[[SerializerProtocol], Any], raw: Raw) -> None:
        self.kind = kind
        self.make = make
        self.raw = raw


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        path = str(tmp_path / "state.db")
        conns: list[sqlite3.Connection] = []

        def make(serde: SerializerProtocol) -> SqliteSaver:
            conn = sqlite3.connect(path, check_same_thread=False)
            conns.append(conn)
            saver = SqliteSaver(conn, serde=serde)
            saver.setup()
            return saver

        def raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as conn:
                return conn.execute(sql, params).fetchall()

        yield Store("sqlite", make, raw)
        for conn in conns:
            conn.close()
        return
    pool: ConnectionPool[Any] = request.getfixturevalue("_saver_pool")
    truncate_saver_tables(pool)

    def pg_raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with pool.connection() as conn, conn.cursor() as cur:
            cur.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    yield Store("postgres", lambda serde: PostgresSaver(pool, serde=serde), pg_raw)


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex}"


def blob_row(store: Store, thread_id: str) -> tuple[str, bytes]:
    [(type_, blob)] = store.raw(
        "SELECT type, blob FROM pregelkit_blobs WHERE thread_id = ? AND channel = 'x'", thread_id
    )
    return type_, bytes(blob)


def set_blob(store: Store, thread_id: str, type_: str, blob: bytes) -> None:
    store.raw(
        "UPDATE pregelkit_blobs SET type = ?, blob = ? WHERE thread_id = ? AND channel = 'x'",
        type_,
        blob,
        thread_id,
    )


# encryption binds every value to its place


def test_an_encrypted_blob_pasted_into_another_thread_is_refused(store: Store) -> None:
    saver = store.make(EncryptedSerializer.from_key(KEY))
    alice, mallory = new_thread(), new_thread()
    put_state(saver, alice, {"balance": 1_000_000})
    config = put_state(saver, mallory, {"balance": 0})
    set_blob(store, mallory, *blob_row(store, alice))

    with pytest.raises(CheckpointCorruptError) as err:
        saver.get_tuple(conf(mallory))
    assert (err.value.thread_id, err.value.channel) == (mallory, "x")
    assert err.value.checkpoint_id == config["configurable"]["checkpoint_id"]
    assert "sealed for another thread" in str(err.value)
    assert saver.get_tuple(conf(alice)).checkpoint["channel_values"] == {  # type: ignore[union-attr]
        "x": {"balance": 1_000_000}
    }


def test_an_encrypted_write_moved_to_another_channel_or_task_is_refused(store: Store) -> None:
    saver = store.make(EncryptedSerializer.from_key(KEY))
    thread_id = new_thread()
    put_state(saver, thread_id, "v")
    for column, value in (("channel", "z"), ("task_id", "task-2")):
        store.raw(f"UPDATE pregelkit_writes SET {column} = ? WHERE thread_id = ?", value, thread_id)
        with pytest.raises(CheckpointCorruptError, match="sealed for another"):
            saver.get_tuple(conf(thread_id))
        original = "y" if column == "channel" else "task-1"
        store.raw(
            f"UPDATE pregelkit_writes SET {column} = ? WHERE thread_id = ?", original, thread_id
        )
    assert saver.get_tuple(conf(thread_id)).pending_writes == [  # type: ignore[union-attr]
        ("task-1", "y", {"pending": "v"})
    ]


def test_a_row_rewritten_as_plaintext_is_refused_while_encryption_is_on(store: Store) -> None:
    saver = store.make(EncryptedSerializer.from_key(KEY))
    thread_id = new_thread()
    put_state(saver, thread_id, {"admin": False})
    set_blob(store, thread_id, *JsonPlusSerializer().dumps_typed({"admin": True}))
    with pytest.raises(CheckpointCorruptError, match=r"unencrypted .* while encryption is on") as e:
        saver.get_tuple(conf(thread_id))
    assert e.value.channel == "x"


def test_copy_thread_seals_the_copy_for_its_new_thread(store: Store) -> None:
    saver = store.make(EncryptedSerializer.from_key(KEY))
    source, target = new_thread(), new_thread()
    put_state(saver, source, [1, 2, 3])
    saver.copy_thread(source, target)
    copied = saver.get_tuple(conf(target))
    assert copied is not None
    assert copied.checkpoint["channel_values"] == {"x": [1, 2, 3]}
    assert copied.pending_writes == [("task-1", "y", {"pending": [1, 2, 3]})]
    assert blob_row(store, source) != blob_row(store, target)


def test_a_plaintext_store_migrates_to_encryption_by_copying_threads(store: Store) -> None:
    thread_id = new_thread()
    put_state(store.make(JsonPlusSerializer()), thread_id, {"kept": True})
    strict = store.make(EncryptedSerializer.from_key(KEY))
    with pytest.raises(CheckpointCorruptError, match="accept_legacy=True"):
        strict.get_tuple(conf(thread_id))
    migrating = store.make(EncryptedSerializer.from_key(KEY, accept_legacy=True))
    migrating.copy_thread(thread_id, thread_id)  # in place: every value sealed where it lies
    loaded = strict.get_tuple(conf(thread_id))
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"x": {"kept": True}}
    assert blob_row(store, thread_id)[0].startswith("enc2:")


def test_async_saver_binds_values_to_their_place(tmp_path: Path) -> None:
    import asyncio

    from pregelkit.checkpoint.base import empty_checkpoint

    async def main() -> None:
        conn = sqlite3.connect(tmp_path / "a.db", check_same_thread=False)
        saver = AsyncSqliteSaver(conn, serde=EncryptedSerializer.from_key(KEY))
        threads = [new_thread(), new_thread()]
        for thread_id in threads:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"x": thread_id}
            checkpoint["channel_versions"] = {"x": 1}
            config = await saver.aput(conf(thread_id), checkpoint, {}, {"x": 1})
            await saver.aput_writes(config, [("y", thread_id)], "task")
        loaded = await saver.aget_tuple(conf(threads[0]))
        assert loaded is not None
        assert loaded.checkpoint["channel_values"] == {"x": threads[0]}
        (type_, blob), *_ = conn.execute(
            "SELECT type, value FROM pregelkit_writes WHERE thread_id = ?", (threads[0],)
        ).fetchall()
        conn.execute(
            "UPDATE pregelkit_writes SET type = ?, value = ? WHERE thread_id = ?",
            (type_, blob, threads[1]),
        )
        with pytest.raises(CheckpointCorruptError, match="sealed for another"):
            await saver.aget_tuple(conf(threads[1]))
        conn.close()

    asyncio.run(main())


# loading is bounded


class _Call:
    """Pickles as ``func(*args)``: how a crafted payload asks for a call."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func = func
        self.args = args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.func, self.args)


def _reuse_bomb() -> bytes:
    """A 20 kB list built once, then fed to ``tuple`` a thousand times through
    the memo: every call copies it."""
    items = b"".join(b"K\x01" for _ in range(10_000))
    head = b"\x80\x05(]\x94(" + items + b"e"  # MARK, list (memo 0), its items
    calls = b"".join(b"\x8c\x08builtins\x8c\x05tuple\x93h\x00\x85R0" for _ in range(1_000))
    return head + calls + b"t."


def _deep(levels: int) -> bytes:
    return b"\x80\x05" + b"]" * levels + b"a" * (levels - 1) + b"."


BOMBS = {
    "list-of-range": pickle.dumps(_Call(list, range(10**8)), 5),
    "tuple-of-range": pickle.dumps(_Call(tuple, range(10**8)), 5),
    "counter-of-range": pickle.dumps(_Call(collections.Counter, range(10**8)), 5),
    "deque-of-range": pickle.dumps(_Call(collections.deque, range(10**8)), 5),
    "bytes-of-size": pickle.dumps(_Call(bytes, 10**9), 5),
    "bytearray-of-size": pickle.dumps(_Call(bytearray, 10**9), 5),
    "int-of-decimal": pickle.dumps(_Call(int, decimal.Decimal("1e999999999")), 5),
    "fraction-of-exponent": pickle.dumps(_Call(fractions.Fraction, "1e99999999"), 5),
    "memo-index": b"\x80\x05N" + b"r" + (2**31 - 5).to_bytes(4, "little") + b".",
    "reused-argument": _reuse_bomb(),
    "deep-nesting": _deep(100_000),
}


@pytest.mark.parametrize("payload", BOMBS.values(), ids=BOMBS.keys())
def test_a_payload_that_would_build_far_more_than_it_holds_is_refused(payload: bytes) -> None:
    start = time.perf_counter()
    with pytest.raises(SerdeError) as err:
        JsonPlusSerializer().loads_typed(("pickle", payload))
    assert isinstance(err.value, LoadLimitError) or "corrupt" in str(err.value)
    assert time.perf_counter() - start < 10.0  # generous: a busy machine is not a failure


def test_bombs_in_a_saved_blob_fail_fast_with_bounded_memory(tmp_path: Path) -> None:
    """Each bomb pasted into a real SQLite row, loaded through the saver in a
    fresh process: the peak RSS barely moves and the error names the row."""
    payloads = tmp_path / "bombs.pickle"
    payloads.write_bytes(pickle.dumps(BOMBS))
    script = textwrap.dedent(
        f"""
        import pickle, resource, sqlite3, time
        from pregelkit.checkpoint.base import empty_checkpoint
        from pregelkit.checkpoint.sqlite import SqliteSaver
        from pregelkit.errors import CheckpointCorruptError

        bombs = pickle.loads(open({str(payloads)!r}, "rb").read())
        saver = SqliteSaver(sqlite3.connect({str(tmp_path / "b.db")!r}, check_same_thread=False))
        cp = empty_checkpoint()
        cp["channel_values"] = {{"x": 1}}
        cp["channel_versions"] = {{"x": 1}}
        conf = {{"configurable": {{"thread_id": "victim", "checkpoint_ns": ""}}}}
        saved = saver.put(conf, cp, {{}}, {{"x": 1}})
        saver.get_tuple(conf)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        for name, payload in bombs.items():
            saver.conn.execute("UPDATE pregelkit_blobs SET type = 'pickle', blob = ?", (payload,))
            try:
                saver.get_tuple(conf)
            except CheckpointCorruptError as exc:
                assert (exc.thread_id, exc.channel) == ("victim", "x"), name
                assert exc.checkpoint_id == saved["configurable"]["checkpoint_id"], name
            else:
                raise AssertionError(name + " loaded")
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(round(grown_mb, 1), round(time.perf_counter() - start, 2))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    grown_mb, seconds = map(float, out.stdout.split())
    assert grown_mb < 50, f"peak RSS grew by {grown_mb} MB"
    assert seconds < 20


def test_a_legitimate_range_and_big_values_still_load() -> None:
    serde = JsonPlusSerializer()
    for value in (
        range(10**18),
        {"r": range(0, 10**9, 7)},
        [list(range(1000))] * 50,  # one list referenced 50 times
        collections.Counter({i: i for i in range(1000)}),
        bytes(10**6),
    ):
        assert serde.loads_typed(serde.dumps_typed(value)) == value


def test_limits_are_configurable_and_checked() -> None:
    nested: list[Any] = []
    for _ in range(300):
        nested = [nested]
    dumped = JsonPlusSerializer().dumps_typed(nested)
    with pytest.raises(LoadLimitError, match="max_depth=100"):
        JsonPlusSerializer(max_depth=100).loads_typed(dumped)
    with pytest.raises(ValueError, match="max_items must be a positive int"):
        JsonPlusSerializer(max_items=0)


# the cost of the check stays off the hot path


def test_plain_data_is_checked_without_a_python_callback() -> None:
    from pregelkit.checkpoint.serde import _save_check

    calls = []
    original = _save_check._CheckingPickler.reducer_override

    def spy(self: Any, obj: Any) -> Any:
        calls.append(obj)
        return original(self, obj)

    _save_check._CheckingPickler.reducer_override = spy  # type: ignore[method-assign]
    try:
        JsonPlusSerializer().dumps_typed({"messages": ["hi", {"n": 1.5}], "ok": True})
        assert calls == []
        JsonPlusSerializer().dumps_typed({"when": decimal.Decimal(1)})
        assert calls and calls[0] == decimal.Decimal(1)
    finally:
        _save_check._CheckingPickler.reducer_override = original  # type: ignore[method-assign]


def test_import_does_not_pull_the_serializer_or_cryptography() -> None:
    code = (
        "import sys, pregelkit.func, pregelkit.checkpoint.sqlite; "
        "assert 'cryptography' not in sys.modules; "
        "assert 'pregelkit.checkpoint.serde._bounds' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


# through the functional API: the task that wrote the value is named, at once


_MODE = {"returns": "ok"}
_RUNS: list[str] = []


def _produce(kind: str, n: int, tmp: Path) -> Any:
    if kind == "lambda":
        return lambda: n
    if kind == "local-class":

        class Local:
            pass

        return Local()
    if kind == "open-file":
        return (tmp / "f.txt").open("w")
    return n * 2


@task
def first(n: int) -> int:
    _RUNS.append("first")
    return n + 1


@task
def make(n: int, tmp: str) -> Any:
    return _produce(_MODE["returns"], n, Path(tmp))


@entrypoint()
def workflow(n: int, *, previous: Any = None) -> Any:
    tmp = os.environ["PREGELKIT_TEST_TMP"]
    return make(first(n).result(), tmp).result()


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("lambda", r"'__return__': function\).*<lambda> is a lambda"),
        ("local-class", r"'__return__': test_storage_trust\._produce\.<locals>\.Local\)"),
        ("open-file", r"'__return__': _io\.TextIOWrapper\)"),
    ],
)
def test_a_task_returning_an_unloadable_value_fails_at_once_and_the_thread_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, named: str
) -> None:
    monkeypatch.setenv("PREGELKIT_TEST_TMP", str(tmp_path))
    monkeypatch.setitem(_MODE, "returns", kind)
    _RUNS.clear()
    config = {"configurable": {"thread_id": f"fa-{kind}"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "wf.db")) as saver:
        app = workflow.copy(checkpointer=saver)
        with pytest.raises(SerdeError, match=r"task 'make' \(id [^)]*\) wrote a value") as err:
            app.invoke(1, config)
        assert re.search(named, str(err.value)), str(err.value)
        state = app.get_state(config)  # still readable
        assert state.next == ("workflow",)
        monkeypatch.setitem(_MODE, "returns", "ok")  # the fix
        assert app.invoke(None, config) == 4
        assert app.get_state(config).values == 4
    assert _RUNS == ["first"]  # the finished task was not run again


# metadata filters: a hostile key is an error, never SQL

SQL_IN_KEYS = [
    "x') OR '1'='1",
    "x') OR 1=1 --",
    "access') = 'public' OR '1'='1' OR json_extract(metadata, '$.",
    "'; DROP TABLE pregelkit_checkpoints; --",
    'user."level"',
    "$.user",
    "user..level",
    ".user",
    "user.",
    "",
]


@pytest.mark.parametrize("key", SQL_IN_KEYS)
def test_sqlite_saver_refuses_a_filter_key_that_is_not_a_field_path(key: str) -> None:
    """LangGraph's SqliteSaver had an injection through filter keys and now
    refuses such keys; pregelkit's binds them, and refuses them as well, sync
    and async, so code written for it sees the same error."""
    import asyncio

    with SqliteSaver.from_conn_string(":memory:") as saver:
        put_state(saver, new_thread(), 1)
        with pytest.raises(ValueError, match="Invalid filter key"):
            list(saver.list(None, filter={key: "public"}))
        assert len(list(saver.list(None, filter={"source": "loop"}))) == 1

    async def alist() -> None:
        async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
            with pytest.raises(ValueError, match="Invalid filter key"):
                [t async for t in saver.alist(None, filter={key: "public"})]

    asyncio.run(alist())


def test_sqlite_saver_filter_keys_read_nested_fields_with_dots() -> None:
    """As in LangGraph's SqliteSaver: hyphens and leading digits are plain
    keys, a dot reads a nested field."""
    from pregelkit.checkpoint.base import empty_checkpoint

    metadata: Any = {
        "access-level": "public",
        "user": {"access-level": "nested", "123abc": "ok2", "tags": ["a"]},
        "123abc": "ok",
        "größe": {"stufe": 2},
    }
    with SqliteSaver.from_conn_string(":memory:") as saver:
        saver.put(conf(new_thread()), empty_checkpoint(), metadata, {})

        def count(filter: dict[str, Any]) -> int:
            return len(list(saver.list(None, filter=filter)))

        assert count({"access-level": "public"}) == 1
        assert count({"user.access-level": "nested"}) == 1
        assert count({"123abc": "ok"}) == 1
        assert count({"user.123abc": "ok2"}) == 1
        assert count({"user.tags": ["a"]}) == 1
        assert count({"größe.stufe": 2}) == 1  # any script's letters
        assert count({"user.access-level": "public"}) == 0
        assert count({"access-level.x": "public"}) == 0  # a string has no fields
        assert count({"user.missing": None}) == 0
