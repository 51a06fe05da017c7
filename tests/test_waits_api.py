"""``checkpoint.waits``: messages and events through any saver that can hold
them, the same on InMemorySaver (one process), SQLite and PostgreSQL;
values serialized by the saver's serde and bounded in size; a local send
wakes this process's waiters at once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint import waits
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.runs import RunHandle
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import MessageTooLargeError


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySaver()
    elif request.param == "sqlite":
        with SqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
            yield saver
    else:
        _, pool = request.getfixturevalue("_queue_pg")
        with pool.connection() as conn:
            conn.execute("TRUNCATE pregelkit_runs, pregelkit_messages, pregelkit_events")
        yield PostgresSaver(pool)


def test_messages_are_taken_once_in_order_per_topic(any_saver: Any) -> None:
    saver = any_saver
    assert waits.post_message(saver, "t", {"n": 1}, sender="a")
    assert not waits.post_message(saver, "t", {"n": 1}, sender="a")  # a replay's send
    assert waits.post_message(saver, "t", {"n": 2})
    assert waits.post_message(saver, "t", "other", topic="x")
    assert waits.take_message(saver, "t", None, "k1") == (True, {"n": 1})
    assert waits.take_message(saver, "t", None, "k1") == (True, {"n": 1})
    assert waits.take_message(saver, "t", None, "k2") == (True, {"n": 2})
    assert waits.take_message(saver, "t", None, "k3") == (False, None)
    assert waits.take_message(saver, "t", "x", "k4") == (True, "other")
    assert waits.take_message(saver, "u", None, "k5") == (False, None)
    # None is the default topic, not any topic: a message with no topic
    # waits for a recv of the default topic
    waits.post_message(saver, "t", None)
    assert waits.take_message(saver, "t", "x", "k6") == (False, None)
    assert waits.take_message(saver, "t", None, "k7") == (True, None)


def test_events_latest_wins(any_saver: Any) -> None:
    saver = any_saver
    assert waits.read_event(saver, "t", "k") == (False, None)
    waits.put_event(saver, "t", "k", [1])
    waits.put_event(saver, "t", "k", None)
    assert waits.read_event(saver, "t", "k") == (True, None)
    assert waits.read_event(saver, "t", "other") == (False, None)


def test_async_twins(any_saver: Any, arun: Callable[[Awaitable[Any]], Any]) -> None:
    saver = any_saver

    async def main() -> None:
        assert await waits.apost_message(saver, "t", 1, "x", "s")
        assert not await waits.apost_message(saver, "t", 1, "x", "s")
        assert await waits.atake_message(saver, "t", "x", "k") == (True, 1)
        await waits.aput_event(saver, "t", "k", "v")
        assert await waits.aread_event(saver, "t", "k") == (True, "v")

    arun(main())


def test_a_message_over_the_limit_is_refused(any_saver: Any) -> None:
    big = b"x" * (waits.MAX_MESSAGE_BYTES + 1)
    with pytest.raises(MessageTooLargeError, match="over the 1,048,576-byte limit"):
        waits.post_message(any_saver, "t", big)
    with pytest.raises(MessageTooLargeError):
        waits.put_event(any_saver, "t", "k", big)
    assert waits.take_message(any_saver, "t", None, "k") == (False, None)


def test_other_savers_are_told_which_work() -> None:
    class Bare(BaseCheckpointSaver[str]):
        pass

    with pytest.raises(TypeError, match=r"SqliteSaver or PostgresSaver.*InMemorySaver"):
        waits.post_message(Bare(), "t", 1)
    with pytest.raises(TypeError, match="keeps no run queue"):
        waits.park(InMemorySaver(), "r", "t", "w", {}, "sleeping", "sleep", 1.0, None, 30)


def test_a_local_send_wakes_a_waiter_at_once() -> None:
    saver = InMemorySaver()
    seen = waits.posted(saver)
    threading.Timer(0.05, waits.post_message, (saver, "t", 1)).start()
    start = time.monotonic()
    assert waits.wait_posted(saver, seen, 30) == seen + 1
    assert time.monotonic() - start < 10
    assert waits.wait_posted(saver, seen + 1, 0.01) == seen + 1  # nothing more: times out


def test_a_local_send_wakes_an_async_waiter(arun: Callable[[Awaitable[Any]], Any]) -> None:
    saver = InMemorySaver()

    async def main() -> None:
        seen = waits.posted(saver)
        loop = asyncio.get_running_loop()
        loop.call_later(
            0.05,
            lambda: threading.Thread(target=waits.put_event, args=(saver, "t", "k", 1)).start(),
        )
        assert await waits.await_posted(saver, seen, 30) == seen + 1
        assert await waits.await_posted(saver, seen + 1, 0.01) == seen + 1

    arun(main())


def test_park_wrappers_hold_the_threads_row(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    config = {"configurable": {"thread_id": "t"}, "callbacks": [lambda: None]}
    run_id = waits.park(saver, "r1", "t", "w", config, "waiting", "recv", None, None, 30)
    assert run_id == "r1"
    record = RunHandle(saver, "r1", "t").record()
    assert (record.status, record.wait_kind, record.wait_topic) == ("waiting", "recv", "")
    assert waits.renew_park(saver, "r1", 30)
    assert waits.post_message(saver, "t", "hi")
    assert RunHandle(saver, "r1", "t").record().due_at is not None  # woken
    assert waits.unpark(saver, "r1")
    assert not waits.renew_park(saver, "r1", 30)
