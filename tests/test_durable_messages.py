"""Messages and events between workflows (``pregelkit.durable``): in-process
runs on every saver, sync and async, exactly once across replays."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import MessageTooLargeError
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _later(seconds: float, fn: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        fn()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_message_sent_from_outside_is_received(saver: BaseCheckpointSaver[Any]) -> None:
    @entrypoint(checkpointer=saver)
    def approval(order: str) -> str:
        answer = durable.recv(topic="approval")
        return f"{order}: {answer}"

    sender = _later(0.2, lambda: durable.send(saver, "o1", "approved", topic="approval"))
    assert approval.invoke("order-1", _config("o1")) == "order-1: approved"
    sender.join()


def test_messages_wait_for_their_thread_and_arrive_in_order(
    saver: BaseCheckpointSaver[Any],
) -> None:
    for i in range(3):
        durable.send(saver, "later", i)
    durable.send(saver, "later", "other", topic="t")

    @entrypoint(checkpointer=saver)
    def main(x: int) -> list[Any]:
        return [durable.recv(), durable.recv(), durable.recv(topic="t"), durable.recv()]

    assert main.invoke(0, _config("later")) == [0, 1, "other", 2]


def test_a_timeout_gives_none_and_the_default_topic_is_its_own(
    saver: BaseCheckpointSaver[Any],
) -> None:
    durable.send(saver, "tt", "on a topic", topic="x")

    @entrypoint(checkpointer=saver)
    def main(x: int) -> Any:
        return durable.recv(timeout=0.2)

    start = time.monotonic()
    assert main.invoke(0, _config("tt")) is None
    assert time.monotonic() - start >= 0.2


def test_a_replay_neither_sends_nor_receives_again(saver: BaseCheckpointSaver[Any]) -> None:
    """A workflow that sends, receives, then stops at an interrupt: resumed,
    its replay gets the same message back and sends nothing again."""
    sends: list[int] = []

    @task
    def count(x: int) -> int:
        sends.append(x)
        return x

    @entrypoint(checkpointer=saver)
    def ping(x: int) -> Any:
        durable.send("pong-thread", count(x).result())
        got = durable.recv()
        answer = interrupt("more?")
        return [got, answer]

    @entrypoint(checkpointer=saver)
    def pong(x: int) -> list[Any]:
        return [durable.recv(), durable.recv(timeout=0.3)]

    durable.send(saver, "ping-thread", "for ping")
    durable.send(saver, "ping-thread", "second")
    ping.invoke(1, _config("ping-thread"))
    assert ping.invoke(Command(resume="yes"), _config("ping-thread")) == ["for ping", "yes"]
    # one message reached pong; the second message to ping is still there
    assert pong.invoke(0, _config("pong-thread")) == [1, None]
    assert sends == [1]

    @entrypoint(checkpointer=saver)
    def rest(x: int) -> Any:
        return durable.recv(timeout=1)

    assert rest.invoke(0, _config("ping-thread")) == "second"


def test_events_latest_wins_and_get_event_waits(saver: BaseCheckpointSaver[Any]) -> None:
    @entrypoint(checkpointer=saver)
    def main(x: int) -> int:
        durable.set_event("progress", 1)
        durable.set_event("progress", {"done": 2})
        time.sleep(0.3)
        durable.set_event("late", "here")
        return x

    assert durable.get_event(saver, "ev", "progress") is None
    runner = threading.Thread(target=lambda: main.invoke(0, _config("ev")), daemon=True)
    runner.start()
    assert durable.get_event(saver, "ev", "late", timeout=30) == "here"
    assert durable.get_event(saver, "ev", "progress") == {"done": 2}
    runner.join(30)
    assert durable.get_event(saver, "ev", "missing", timeout=0.05) is None


def test_delete_thread_deletes_its_mailbox(queue_db: tuple[str, Any]) -> None:
    """A deleted thread's messages (taken or not) and events go with it: a
    new thread of the same id starts with an empty mailbox (SQLite and
    PostgreSQL; InMemorySaver's mailbox lives as long as its process)."""
    _, saver = queue_db

    @entrypoint(checkpointer=saver)
    def inbox(x: int) -> Any:
        durable.set_event("seen", durable.recv())
        return durable.recv(timeout=0.01)

    for value in ("first", "second", "unread"):
        durable.send(saver, "box", value)
    durable.send(saver, "other", "kept")
    assert inbox.invoke(0, _config("box")) == "second"
    assert durable.get_event(saver, "box", "seen") == "first"
    saver.delete_thread("box")
    assert durable.get_event(saver, "box", "seen") is None
    durable.send(saver, "box", "new")
    assert inbox.invoke(0, _config("box")) is None  # "unread" went with the thread
    assert durable.get_event(saver, "box", "seen") == "new"
    assert inbox.invoke(0, _config("other")) is None  # another thread's mailbox stays
    assert durable.get_event(saver, "other", "seen") == "kept"


def test_async_twins(async_saver: BaseCheckpointSaver[Any], arun: Any) -> None:
    @entrypoint(checkpointer=async_saver)
    async def main(x: int) -> Any:
        await durable.asend("async-t", x + 1)
        await durable.aset_event("seen", x)
        return await durable.arecv(timeout=5)

    assert arun(main.ainvoke(1, _config("async-t"))) == 2
    assert arun(durable.aget_event(async_saver, "async-t", "seen")) == 1
    arun(durable.asend(async_saver, "async-t", "from outside"))

    @entrypoint(checkpointer=async_saver)
    async def again(x: int) -> Any:
        return await durable.arecv(timeout=5)

    assert arun(again.ainvoke(0, _config("async-t"))) == "from outside"


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: durable.send(s, "", 1), TypeError, "thread id"),
        (lambda s: durable.send(s, 5, 1), TypeError, "thread id"),
        (lambda s: durable.send(s, "t", 1, topic=""), TypeError, "topic"),
        (lambda s: durable.send(s, "t", 1, topic=3), TypeError, "topic"),
        (lambda s: durable.send("t", 1), TypeError, "takes the saver first"),
        (lambda s: durable.send(s, "t"), TypeError, "3 positional"),
        (lambda s: durable.get_event(s, "t", ""), TypeError, "event key"),
        (lambda s: durable.get_event("nope", "t", "k"), TypeError, "saver first"),
        (lambda s: durable.get_event(s, "t", "k", timeout=-1), ValueError, ">= 0"),
        (lambda s: durable.send(s, "t", "x" * (2 << 20)), MessageTooLargeError, "limit"),
    ],
)
def test_bad_arguments_are_refused_naming_what_is_wrong(call: Any, error: Any, match: str) -> None:
    with pytest.raises(error, match=match):
        call(InMemorySaver())


def test_recv_without_a_thread_or_outside_a_workflow_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="inside a running graph"):
        durable.recv()

    @entrypoint(checkpointer=InMemorySaver())
    def main(x: int) -> Any:
        return durable.recv(timeout=0)

    with pytest.raises(ValueError, match="thread_id"):
        main.invoke(0)
