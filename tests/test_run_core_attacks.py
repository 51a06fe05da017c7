"""Breaks found by running the same hostile scenarios on the run engine
before and after it became a sans-I/O core with performers (issue 26).

Each test is one break: a cache write that fails must not cost the run its
saved results; the start saver's thread must outlive a run that ends while
it hands over a save; what a run is given is checked where it is given.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from pregelkit.cache.memory import InMemoryCache
from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel._core import perform
from pregelkit.types import CachePolicy


def _cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class BrokenCache(InMemoryCache):
    """Reads work; every write fails, as a cache on a full disk."""

    def set(self, pairs: Any) -> None:
        raise OSError("cache disk full")

    async def aset(self, pairs: Any) -> None:
        raise OSError("cache disk full")


def _fast_and_slow(saver: InMemorySaver, ran: list[str]) -> Pregel:
    """Two nodes of one step: ``fast`` is cached (its cache write fails at
    once), ``slow`` is not and finishes 0.2 s later."""

    def fast(v: str) -> str:
        ran.append("fast")
        return v + "!"

    def slow(v: str) -> str:
        time.sleep(0.2)
        ran.append("slow")
        return v + "?"

    return Pregel(
        nodes={
            "fast": NodeBuilder().subscribe_only("x").do(fast).write_to("f"),
            "slow": NodeBuilder().subscribe_only("x").do(slow).write_to("s"),
        },
        channels={"x": LastValue(str), "f": LastValue(str), "s": LastValue(str)},
        input_channels="x",
        output_channels=["f", "s"],
        checkpointer=saver,
        cache=BrokenCache(),
    )


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_failed_cache_write_stops_the_run_but_loses_no_saved_result(
    durability: str, is_async: bool
) -> None:
    # The cache's error was the run's saver failure: every save after it was
    # dropped, so ``slow``'s finished result was lost (it would run again),
    # and with durability="exit" the thread kept nothing at all.
    saver = InMemorySaver()
    ran: list[str] = []
    app = _fast_and_slow(saver, ran)
    node = app.nodes["fast"]
    node.cache_policy = CachePolicy()
    with pytest.raises(OSError, match="cache disk full"):
        if is_async:
            asyncio.run(app.ainvoke("in", _cfg(), durability=durability))
        else:
            app.invoke("in", _cfg(), durability=durability)
    assert sorted(ran) == ["fast", "slow"]
    state = app.get_state(_cfg())
    assert {t.name: t.result for t in state.tasks} == {"fast": {"f": "in!"}, "slow": {"s": "in?"}}
    # the resume replays both results: nothing runs again
    node.cache_policy = None
    assert app.invoke(None, _cfg(), durability=durability) == {"f": "in!", "s": "in?"}
    assert sorted(ran) == ["fast", "slow"]


def test_the_start_saver_outlives_a_run_that_ends_while_it_hands_over_a_save(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The start saver's thread decided to save a start, then (preempted, as
    # here) handed the save over after the async run had ended and its event
    # loop closed: call_soon_threadsafe raised in the thread, which died,
    # and no later run in the process saved an attempt's start again.
    ended = threading.Event()
    handed = threading.Event()
    made = perform.AsyncPregelLoop.perform

    def preempted(self: perform.AsyncPregelLoop, effect: Any) -> Any:
        if threading.current_thread().name == "pregelkit-attempt-starts" and not handed.is_set():
            handed.set()
            ended.wait(0.3)
        return made(self, effect)

    monkeypatch.setattr(perform.AsyncPregelLoop, "perform", preempted)
    saver = InMemorySaver()

    @task
    async def slow_async(i: int) -> int:
        await asyncio.sleep(0.05)
        return i

    @entrypoint(checkpointer=saver)
    async def first(n: int) -> int:
        return await slow_async(n)

    assert asyncio.run(first.ainvoke(1, _cfg("a"))) == 1
    ended.set()
    assert handed.wait(1)
    time.sleep(0.05)
    thread = perform._START_SAVER.thread
    assert thread is not None and thread.is_alive()

    seen: list[int] = []

    @task
    def slow(i: int) -> int:
        time.sleep(0.1)  # the start saver saves this attempt's start meanwhile
        seen.append(len(saver.list_attempts("b")))
        return i

    @entrypoint(checkpointer=saver)
    def second(n: int) -> int:
        return slow(n).result()

    assert second.invoke(2, _cfg("b")) == 2
    assert seen and seen[0] > 0


def _chain() -> Pregel:
    return Pregel(
        nodes={
            "a": NodeBuilder().subscribe_only("x").do(lambda v: v + "a").write_to("ya"),
            "ab": NodeBuilder().subscribe_only("ya").do(lambda v: v + "b").write_to("yb"),
        },
        channels={"x": LastValue(str), "ya": LastValue(str), "yb": LastValue(str)},
        input_channels="x",
        output_channels=["ya", "yb"],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"configurable": {"thread_id": "t", "checkpoint_ns": 5}}, "checkpoint_ns'] must be a str"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": None}}, "checkpoint_ns'] must be"),
        ({"configurable": {"thread_id": "t"}, "metadata": ["x"]}, r"config\['metadata'\] must"),
    ],
)
def test_a_wrong_config_value_is_named_before_the_run(config: dict[str, Any], error: str) -> None:
    # an AttributeError or TypeError from deep inside the run before
    with pytest.raises(TypeError, match=error):
        _chain().invoke("in", config)


def test_interrupt_nodes_of_a_run_are_checked_and_a_lone_name_is_one_node() -> None:
    app = _chain()
    # a lone name matched every node whose name it contains ("ab" stopped before "a")
    assert app.invoke("in", _cfg("1"), interrupt_before="ab") == {"ya": "ina"}
    assert app.get_state(_cfg("1")).next == ("ab",)
    with pytest.raises(TypeError, match="interrupt_before= must be '\\*', a node name"):
        app.invoke("in", _cfg("2"), interrupt_before=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interrupt_after names unknown node 'b'"):
        app.invoke("in", _cfg("3"), interrupt_after=["b"])
    graph_level = Pregel(
        nodes={"node1": NodeBuilder().subscribe_only("x").do(lambda v: v).write_to("y")},
        channels={"x": LastValue(str), "y": LastValue(str)},
        input_channels="x",
        output_channels="y",
        interrupt_before_nodes="node1",
        checkpointer=InMemorySaver(),
    )  # its letters were checked as node names: "unknown node 'n'"
    assert graph_level.invoke("in", _cfg()) is None
    assert graph_level.get_state(_cfg()).next == ("node1",)
