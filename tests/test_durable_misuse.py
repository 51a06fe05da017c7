"""pregelkit.durable used wrongly: waits too long to be recorded, a code
change between runs that a replay must not paper over, a fake clock used
out of order, bad configs. Each was found by trying it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import NondeterminismError
from pregelkit.func import entrypoint
from pregelkit.testing import FakeClock
from pregelkit.types import Command, interrupt


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.mark.parametrize(
    ("wait", "match"),
    [
        (lambda: durable.sleep(1e308), r"sleep\(\) takes a wait that ends before the year 9999"),
        (lambda: durable.recv(timeout=1e15), r"with no timeout, it waits for ever"),
        (
            lambda: durable.sleep_until(datetime.max.replace(tzinfo=UTC)),
            r"sleep_until\(\) takes a time before the year 9999",
        ),
    ],
)
def test_a_wait_past_the_year_9999_is_refused_before_it_is_recorded(wait: Any, match: str) -> None:
    """It was recorded, then failed to show as a datetime (OverflowError),
    and again at each replay: the thread could not go on, even once fixed."""
    waits = [wait]

    @entrypoint(checkpointer=InMemorySaver())
    def wf(x: int) -> int:
        waits[0]()
        return x

    with pytest.raises(ValueError, match=match):
        wf.invoke(1, _config("far"))
    waits[0] = lambda: durable.sleep(0)
    assert wf.invoke(None, _config("far")) == 1


def test_a_recv_whose_topic_changed_between_runs_is_nondeterminism() -> None:
    """The topic was not part of the recorded call: a replay of a recv on
    topic "b" got the message taken on topic "a"."""
    saver = InMemorySaver()
    topic = ["a"]

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> Any:
        got = durable.recv(topic=topic[0], timeout=0)
        return got, interrupt("go on?")

    durable.send(saver, "t", "for a", topic="a")
    wf.invoke(1, _config("t"))
    topic[0] = "b"
    with pytest.raises(NondeterminismError, match=r"pregelkit\.recv"):
        wf.invoke(Command(resume=True), _config("t"))
    topic[0] = "a"
    assert wf.invoke(Command(resume=True), _config("t")) == ("for a", True)


@pytest.mark.parametrize("by", [float("nan"), float("inf"), -1])
def test_a_fake_clock_moves_only_forward_by_finite_amounts(by: float) -> None:
    clock = FakeClock(0)
    with pytest.raises(ValueError, match="finite seconds >= 0"):
        clock.advance(by)
    assert clock.now() == 0
    with pytest.raises(ValueError, match="finite time"):
        FakeClock(by if by != -1 else float("-inf"))


def test_fake_clocks_exited_out_of_order_or_twice_say_so() -> None:
    """An out-of-order exit left a fake clock in place for the rest of the
    process; a second exit was an AssertionError."""
    from pregelkit._internal._clock import clock

    real = clock()
    outer, inner = FakeClock(), FakeClock()
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="reverse order"):
        outer.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    assert clock() is real
    with pytest.raises(RuntimeError, match="exited already"):
        outer.__exit__(None, None, None)


@pytest.mark.parametrize("config", [None, "t1", {"configurable": 3}, {}])
def test_waiting_with_a_bad_config_names_what_it_takes(config: Any) -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def wf(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="thread_id"):
        durable.waiting(wf, config)
