"""Random workflows: resumed run for run, the engine agrees with plain Python.

Hypothesis builds workflows from sequential task calls, tasks that call a
task, parallel groups of task calls (optionally with an ``interrupt()`` in
the entrypoint while the group is in flight), interrupts in the entrypoint,
and tasks that interrupt zero, one or two times. Each workflow is run (A) by the engine, answering
every pending interrupt with ``Command(resume={id: answer(value)})`` until it
returns, and (B) by a plain-Python evaluation whose ``interrupt`` returns
``answer(value)`` at once. Both must give the same result, and every task
must have run exactly once plus once per interrupt it raised: a task whose
result was saved is never run again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.pregel.main import Pregel
from pregelkit.types import Command, interrupt

Run = Callable[[Awaitable[Any]], Any]

# An op is ("seq", asks) | ("nest", asks) | ("par", [asks, ...], ask_while_in_flight)
# | ("ask",): ``asks`` is how many interrupts the (innermost) task raises.
Op = tuple[Any, ...]
asks = st.integers(min_value=0, max_value=2)
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("seq"), asks),
        st.tuples(st.just("nest"), asks),
        st.tuples(st.just("par"), st.lists(asks, min_size=1, max_size=4), st.booleans()),
        st.tuples(st.just("ask")),
    ),
    min_size=1,
    max_size=6,
)
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def answer(question: str) -> str:
    return f"answer to {question}"


def task_body(log: Counter[str], ask: Callable[[str], Any]) -> Callable[[str, int, int], Any]:
    def work(label: str, x: int, n_asks: int) -> list[Any]:
        log[label] += 1
        return [label, x * 3 + 1, [ask(f"{label}#{k}") for k in range(n_asks)]]

    return work


def outer_body(log: Counter[str], call: Callable[[str, int, int], Any]) -> Any:
    def outer(label: str, x: int, n_asks: int) -> list[Any]:
        log[label] += 1
        inner = call(f"{label}/in", x + 1, n_asks)
        return [label, inner[1] + 1, inner]

    return outer


def reference(ops: list[Op], seed: int) -> list[Any]:
    """The workflow in plain Python: every interrupt is answered at once."""
    work = task_body(Counter(), answer)
    outer = outer_body(Counter(), work)
    out: list[Any] = []
    acc = seed
    for i, op in enumerate(ops):
        if op[0] in ("seq", "nest"):
            result = (work if op[0] == "seq" else outer)(f"t{i}", acc, op[1])
            out.append(result)
            acc += result[1]
        elif op[0] == "par":
            results = [work(f"p{i}.{j}", acc + j, n) for j, n in enumerate(op[1])]
            if op[2]:
                out.append(("mid", answer(f"mid{i}")))
            out.extend(results)
            acc += sum(r[1] for r in results)
        else:
            out.append(("ask", answer(f"ask{i}")))
    return out


def sync_workflow(ops: list[Op], saver: BaseCheckpointSaver[Any], log: Counter[str]) -> Pregel:
    work = task(name="work")(task_body(log, interrupt))
    outer = task(name="outer")(outer_body(log, lambda *args: work(*args).result()))

    @entrypoint(checkpointer=saver)
    def flow(seed: int) -> list[Any]:
        out: list[Any] = []
        acc = seed
        for i, op in enumerate(ops):
            if op[0] in ("seq", "nest"):
                result = (work if op[0] == "seq" else outer)(f"t{i}", acc, op[1]).result()
                out.append(result)
                acc += result[1]
            elif op[0] == "par":
                futures = [work(f"p{i}.{j}", acc + j, n) for j, n in enumerate(op[1])]
                if op[2]:
                    out.append(("mid", interrupt(f"mid{i}")))
                results = [f.result() for f in futures]
                out.extend(results)
                acc += sum(r[1] for r in results)
            else:
                out.append(("ask", interrupt(f"ask{i}")))
        return out

    return flow


def async_workflow(ops: list[Op], saver: BaseCheckpointSaver[Any], log: Counter[str]) -> Pregel:
    sync_body = task_body(log, interrupt)
    sync_work = task(name="work")(sync_body)

    async def async_body(label: str, x: int, n_asks: int) -> list[Any]:
        await asyncio.sleep(0)
        return sync_body(label, x, n_asks)

    async_work = task(name="awork")(async_body)

    def work(label: str, x: int, n_asks: int) -> Any:
        # odd-numbered ops call a sync task from the async entrypoint
        odd = int(label[1:].split(".")[0].split("/")[0]) % 2
        return (sync_work if odd else async_work)(label, x, n_asks)

    async def outer_async(label: str, x: int, n_asks: int) -> list[Any]:
        log[label] += 1
        inner = await work(f"{label}/in", x + 1, n_asks)
        return [label, inner[1] + 1, inner]

    outer = task(name="outer")(outer_async)

    @entrypoint(checkpointer=saver)
    async def flow(seed: int) -> list[Any]:
        out: list[Any] = []
        acc = seed
        for i, op in enumerate(ops):
            if op[0] in ("seq", "nest"):
                result = await (work if op[0] == "seq" else outer)(f"t{i}", acc, op[1])
                out.append(result)
                acc += result[1]
            elif op[0] == "par":
                futures = [work(f"p{i}.{j}", acc + j, n) for j, n in enumerate(op[1])]
                if op[2]:
                    out.append(("mid", interrupt(f"mid{i}")))
                results = await asyncio.gather(*futures)
                out.extend(results)
                acc += sum(r[1] for r in results)
            else:
                out.append(("ask", interrupt(f"ask{i}")))
        return out

    return flow


def expected_executions(ops: list[Op]) -> Counter[str]:
    """Each task runs once, plus once more per interrupt it raised."""
    expected: Counter[str] = Counter()
    for i, op in enumerate(ops):
        if op[0] == "seq":
            expected[f"t{i}"] = 1 + op[1]
        elif op[0] == "nest":  # the outer task runs again each time the inner interrupts
            expected[f"t{i}"] = expected[f"t{i}/in"] = 1 + op[1]
        elif op[0] == "par":
            for j, n in enumerate(op[1]):
                expected[f"p{i}.{j}"] = 1 + n
    return expected


def resume_for(result: Any) -> Command:
    pending = result["__interrupt__"]
    ids = [i.id for i in pending]
    assert len(ids) == len(set(ids)), f"an interrupt was surfaced twice: {pending}"
    return Command(resume={i.id: answer(i.value) for i in pending})


def check(ops: list[Op], seed: int, result: Any, rounds: int, log: Counter[str]) -> None:
    assert result == reference(ops, seed)
    assert log == expected_executions(ops), "a task ran more often than its interrupts explain"
    # each round answers every pending interrupt: a parallel group costs as many
    # rounds as its most-asking task, anything else one round per interrupt
    most = sum(
        max(op[1]) + op[2] if op[0] == "par" else 1 if op[0] == "ask" else op[1] for op in ops
    )
    assert rounds <= most


def assert_explored(rounds_seen: list[int]) -> None:
    """The property ran on many workflows, some of them resumed several times."""
    assert len(rounds_seen) >= 20
    assert max(rounds_seen) >= 3
    assert rounds_seen.count(0) < len(rounds_seen)


@contextmanager
def sync_saver(kind: str, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "state.db")) as saver:
            yield saver


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_random_workflows_sync(kind: str, tmp_path: Path) -> None:
    rounds_seen: list[int] = []
    with sync_saver(kind, tmp_path) as saver:

        @SETTINGS
        @given(ops=ops_strategy, seed=st.integers(min_value=0, max_value=1000))
        def run(ops: list[Op], seed: int) -> None:
            log: Counter[str] = Counter()
            flow = sync_workflow(ops, saver, log)
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            result = flow.invoke(seed, config)
            rounds = 0
            while isinstance(result, dict):
                rounds += 1
                assert rounds <= 40, "the workflow never finished"
                result = flow.invoke(resume_for(result), config)
            check(ops, seed, result, rounds, log)
            rounds_seen.append(rounds)

        run()
    assert_explored(rounds_seen)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_random_workflows_async(kind: str, tmp_path: Path, arun: Run) -> None:
    if kind == "memory":
        saver: BaseCheckpointSaver[Any] = InMemorySaver()
        opened = None
    else:
        opened = AsyncSqliteSaver.from_conn_string(str(tmp_path / "state.db"))
        saver = arun(opened.__aenter__())
    rounds_seen: list[int] = []
    try:

        @SETTINGS
        @given(ops=ops_strategy, seed=st.integers(min_value=0, max_value=1000))
        def run(ops: list[Op], seed: int) -> None:
            log: Counter[str] = Counter()
            flow = async_workflow(ops, saver, log)
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}

            async def drive() -> tuple[Any, int]:
                result = await flow.ainvoke(seed, config)
                rounds = 0
                while isinstance(result, dict):
                    rounds += 1
                    assert rounds <= 40, "the workflow never finished"
                    result = await flow.ainvoke(resume_for(result), config)
                return result, rounds

            result, rounds = arun(drive())
            check(ops, seed, result, rounds, log)
            rounds_seen.append(rounds)

        run()
        assert_explored(rounds_seen)
    finally:
        if opened is not None:
            arun(opened.__aexit__(None, None, None))
