"""A run whose save fails stops there: no task body starts once the failure
is known, the run raises ``StorageError``, the stored state never says the
run finished, and once storage is back the thread resumes to the right
result, re-running only tasks whose results were not saved.

``FlakySaver`` is an ``InMemorySaver`` whose saves fail from the k-th on
while it is "down", as a database that went away would; the tests with real
SQLite and PostgreSQL failures are in test_storage_faults_real.py."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.channels.last_value import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import StorageError
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel


class FlakySaver(InMemorySaver):
    """Saves fail from the ``fail_at``-th (1-based) on, until ``heal()``."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.saves = 0
        self.fail_at = fail_at
        self.started_when_failed: int | None = None
        self.started: list[Any] | None = None
        self._count = threading.Lock()

    def heal(self) -> None:
        self.fail_at = None

    def _save(self) -> None:
        with self._count:
            self.saves += 1
            failing = self.fail_at is not None and self.saves >= self.fail_at
        if failing:
            if self.started_when_failed is None and self.started is not None:
                self.started_when_failed = len(self.started)
            raise StorageError("test database is down", thread_id=None) from ConnectionError(
                "connection refused"
            )

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self._save()
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self._save()
        super().put_writes(*args, **kwargs)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _chain(saver: FlakySaver, started: list[int], n: int) -> Any:
    @task
    def step(i: int) -> int:
        started.append(i)
        return i * 10

    @entrypoint(checkpointer=saver)
    def chain(count: int) -> int:
        return sum(step(i).result() for i in range(count))

    saver.started = started
    return chain


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_failed_save_stops_the_chain_and_the_thread_resumes(durability: str) -> None:
    saver = FlakySaver(fail_at=6)  # the input checkpoint, then task results
    started: list[int] = []
    chain = _chain(saver, started, 40)
    with pytest.raises(StorageError) as caught:
        chain.invoke(40, _cfg("t"), durability=durability)
    error = caught.value
    assert error.thread_id == "t"
    assert "thread 't' stopped at step" in str(error) and "Not saved:" in str(error)
    assert "the writes of task 'step'" in str(error)
    assert isinstance(error.__cause__, ConnectionError)
    # nothing started once the failure was known (one body may have been
    # between its check and its start)
    assert saver.started_when_failed is not None
    assert len(started) <= saver.started_when_failed + 1
    if durability == "sync":
        assert len(started) == 5  # the 5th body's result was the first unsaved write
    state = chain.get_state(_cfg("t"))
    assert state.next == ("chain",), "a run that raised must not be recorded as finished"
    saver.heal()
    first_run = Counter(started)
    started.clear()
    assert chain.invoke(None, _cfg("t")) == sum(i * 10 for i in range(40))
    # on resume, only tasks whose results were not saved ran again
    assert started == list(range(min(started), 40))
    assert min(started) <= len(first_run)
    assert chain.get_state(_cfg("t")).next == ()


def test_async_run_stops_at_a_failed_save() -> None:
    saver = FlakySaver(fail_at=4)
    started: list[int] = []

    @task
    async def step(i: int) -> int:
        started.append(i)
        await asyncio.sleep(0)
        return i

    @entrypoint(checkpointer=saver)
    async def chain(count: int) -> int:
        total = 0
        for i in range(count):
            total += await step(i)
        return total

    saver.started = started

    async def main() -> None:
        with pytest.raises(StorageError):
            await chain.ainvoke(30, _cfg("a"), durability="sync")
        assert len(started) == 3
        assert (await chain.aget_state(_cfg("a"))).next == ("chain",)
        saver.heal()
        started.clear()
        assert await chain.ainvoke(None, _cfg("a")) == sum(range(30))
        assert started == list(range(2, 30))

    asyncio.run(main())


def test_a_caught_storage_error_does_not_let_the_run_go_on() -> None:
    """An entrypoint that catches the error and calls another task gets the
    error again; whatever it returns, the run raises and is not finished."""
    saver = FlakySaver(fail_at=3)
    started: list[str] = []

    @task
    def work(name: str) -> str:
        started.append(name)
        return name

    @entrypoint(checkpointer=saver)
    def stubborn(_: str) -> str:
        work("a").result()
        try:
            work("b").result()
        except StorageError:
            pass
        try:
            work("c").result()
        except StorageError:
            return "pretending all is well"
        return "unreachable"

    with pytest.raises(StorageError):
        stubborn.invoke("go", _cfg("s"), durability="sync")
    assert started == ["a", "b"]
    assert stubborn.get_state(_cfg("s")).next == ("stubborn",)


def test_fan_out_starts_no_queued_body_after_a_failed_save() -> None:
    saver = FlakySaver(fail_at=5)
    started: list[int] = []
    gate = threading.Event()

    @task
    def leaf(i: int) -> int:
        started.append(i)
        if i == 0:
            gate.wait(5)
        return i

    @entrypoint(checkpointer=saver)
    def fan(n: int) -> int:
        futures = [leaf(i) for i in range(n)]
        return sum(f.result() for f in futures)

    saver.started = started
    config = {**_cfg("f"), "max_concurrency": 2}
    timer = threading.Timer(0.5, gate.set)
    timer.start()
    try:
        with pytest.raises(StorageError):
            fan.invoke(60, config, durability="sync")
    finally:
        timer.cancel()
        gate.set()
    assert saver.started_when_failed is not None
    assert len(started) <= saver.started_when_failed + 2  # the two workers' bodies
    assert len(started) < 60
    saver.heal()
    assert fan.invoke(None, _cfg("f")) == sum(range(60))


def test_pregel_graph_stops_at_the_step_whose_save_failed() -> None:
    saver = FlakySaver(fail_at=4)
    ran: list[str] = []

    def node(name: str) -> Any:
        def fn(x: int) -> int:
            ran.append(name)
            return x + 1

        return fn

    graph = Pregel(
        nodes={
            f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(node(f"n{i}")).write_to(f"c{i + 1}")
            for i in range(6)
        },
        channels={f"c{i}": LastValue(int) for i in range(7)},
        input_channels="c0",
        output_channels="c6",
        checkpointer=saver,
    )
    with pytest.raises(StorageError):
        graph.invoke(0, _cfg("g"), durability="sync")
    assert len(ran) < 6
    assert graph.get_state(_cfg("g")).next != ()
    saver.heal()
    assert graph.invoke(None, _cfg("g")) == 6


# random workflows x the k-th save failing

ops = st.lists(
    st.one_of(st.tuples(st.just("seq")), st.tuples(st.just("par"), st.integers(1, 4))),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=ops, fail_at=st.integers(1, 20), durability=st.sampled_from(["sync", "async"]))
def test_any_failed_save_is_a_clean_stop(
    plan: list[tuple[Any, ...]], fail_at: int, durability: str
) -> None:
    saver = FlakySaver(fail_at=fail_at)
    runs: Counter[str] = Counter()
    lock = threading.Lock()

    @task
    def unit(label: str) -> str:
        with lock:
            runs[label] += 1
        return label.upper()

    @entrypoint(checkpointer=saver)
    def flow(_: str) -> list[str]:
        out: list[str] = []
        for n, op in enumerate(plan):
            if op[0] == "seq":
                out.append(unit(f"s{n}").result())
            else:
                futures = [unit(f"p{n}.{j}") for j in range(op[1])]
                out.extend(f.result() for f in futures)
        return out

    expected: list[str] = []
    for n, op in enumerate(plan):
        expected += [f"S{n}"] if op[0] == "seq" else [f"P{n}.{j}" for j in range(op[1])]
    config = _cfg("h")
    try:
        result = flow.invoke("go", config, durability=durability)
    except StorageError:
        state = flow.get_state(config)
        saver.heal()
        if state.metadata is None:  # not even the input was saved: start again
            result = flow.invoke("go", config)
        else:
            # no checkpoint holding the final output was saved (the task
            # writes it follows may have been: resuming applies them)
            latest = saver.get_tuple(config)
            assert latest is not None
            assert "__end__" not in latest.checkpoint["channel_values"]
            result = flow.invoke(None, config)
    else:
        assert saver.fail_at is None or saver.saves < fail_at
    assert result == expected
    assert flow.get_state(config).values == expected
    # a body ran twice only if its first result was never saved
    assert all(count <= 2 for count in runs.values())
