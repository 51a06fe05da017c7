"""The functional API, sync: ``@entrypoint`` and ``@task`` against every saver.

Each test that keeps state runs once per saver kind (the ``saver`` fixture:
memory, SQLite on a file, PostgreSQL). The async twins are in
``test_func_async.py``; the random-workflow property is in
``test_func_properties.py``.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pregelkit.cache.memory as memory_cache
from pregelkit.cache.memory import InMemoryCache
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.config import get_config, get_store, get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.pregel.main import Pregel
from pregelkit.runtime import Runtime
from pregelkit.store.memory import InMemoryStore
from pregelkit.types import CachePolicy, Command, Interrupt, RetryPolicy, interrupt

Saver = BaseCheckpointSaver[Any]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def fast_retry(attempts: int, on: type[BaseException] = ValueError) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=0.001, backoff_factor=1.0, max_attempts=attempts, jitter=False, retry_on=on
    )


def count_put_writes(saver: Saver, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Task ids of every ``put_writes`` call the engine makes on ``saver``."""
    calls: list[str] = []
    original = saver.put_writes

    def put_writes(
        config: Any, writes: Any, task_id: str, task_path: str = "", **kwargs: Any
    ) -> None:
        calls.append(task_id)
        original(config, writes, task_id, task_path, **kwargs)

    monkeypatch.setattr(saver, "put_writes", put_writes)
    return calls


# decoration


def test_task_keeps_name_doc_and_signature() -> None:
    def plain(a: int, b: str = "x", *, c: float = 1.0) -> str:
        """Joins things."""
        return f"{a}{b}{c}"

    wrapped = task(plain)
    named = task(name="renamed")(plain)
    assert wrapped.__name__ == "plain"
    assert wrapped.__doc__ == "Joins things."
    assert wrapped.__qualname__ == plain.__qualname__
    assert wrapped.__module__ == __name__
    assert inspect.signature(wrapped) == inspect.signature(plain)
    assert inspect.signature(named) == inspect.signature(plain)
    assert wrapped.__wrapped__ is plain


def test_entrypoint_is_a_pregel_that_keeps_name_and_doc() -> None:
    def workflow(x: int) -> int:
        """Doubles x."""
        return x * 2

    graph = entrypoint()(workflow)
    assert isinstance(graph, Pregel)
    assert graph.name == "workflow"
    assert graph.__name__ == "workflow"  # type: ignore[attr-defined]
    assert graph.__doc__ == "Doubles x."
    assert graph.__wrapped__ is workflow  # type: ignore[attr-defined]
    assert inspect.signature(graph.__wrapped__) == inspect.signature(workflow)  # type: ignore[attr-defined]
    assert list(graph.nodes) == ["workflow"]
    assert graph.invoke(21) == 42


class Scaler:
    def __init__(self, factor: int) -> None:
        self.factor = factor

    @task
    def scale(self, x: int) -> int:
        """Multiplies by the factor."""
        return self.factor * x


def test_task_as_instance_method(saver: Saver) -> None:
    three, five = Scaler(3), Scaler(5)
    assert Scaler.scale.__name__ == "scale"
    assert Scaler.scale.__doc__ == "Multiplies by the factor."
    assert list(inspect.signature(Scaler.scale).parameters) == ["self", "x"]
    assert list(inspect.signature(three.scale).parameters) == ["x"]

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> list[int]:
        return [three.scale(x).result(), five.scale(x=x).result()]

    assert workflow.invoke(2, cfg()) == [6, 10]


def test_task_called_outside_a_run_raises_clearly() -> None:
    @task
    def lonely(x: int) -> int:
        return x

    with pytest.raises(RuntimeError, match=r"task 'lonely' was called outside a running workflow"):
        lonely(1)
    with pytest.raises(RuntimeError, match="outside a running workflow"):
        Scaler(2).scale(1)


def test_generators_are_refused_at_decoration() -> None:
    def gen(x: int) -> Iterator[int]:
        yield x

    async def agen(x: int) -> Any:
        yield x

    for fn in (gen, agen):
        with pytest.raises(TypeError, match=rf"task '{fn.__qualname__}' is a generator"):
            task(fn)
        with pytest.raises(TypeError, match=rf"entrypoint '{fn.__qualname__}' is a generator"):
            entrypoint()(fn)
        # LangGraph raises NotImplementedError: code catching that works too
        with pytest.raises(NotImplementedError):
            entrypoint()(fn)


def test_entrypoint_needs_an_input_parameter() -> None:
    def no_input() -> int:
        return 1

    with pytest.raises(TypeError, match="must take one positional parameter"):
        entrypoint()(no_input)


def test_unserializable_return_names_task_and_type(saver: Saver) -> None:
    @entrypoint(checkpointer=saver)
    def returns_lock(x: int) -> Any:
        return threading.Lock()

    with pytest.raises(SerdeError) as caught:
        returns_lock.invoke(1, cfg("a"))
    message = str(caught.value)
    assert "task 'returns_lock'" in message
    assert "_thread.lock" in message

    @task
    def make_lock() -> Any:
        return threading.Lock()

    @entrypoint(checkpointer=saver)
    def calls_it(x: int) -> str:
        make_lock().result()
        return "unreachable?"

    with pytest.raises(SerdeError) as caught:
        calls_it.invoke(1, cfg("b"), durability="sync")
    message = str(caught.value)
    assert "task 'make_lock'" in message
    assert "_thread.lock" in message


# futures and composition


def test_task_call_returns_a_concurrent_future(saver: Saver) -> None:
    @task
    def square(x: int) -> int:
        return x * x

    seen: dict[str, Any] = {}

    @entrypoint(checkpointer=saver)
    def workflow(n: int) -> int:
        futures = [square(i) for i in range(n)]
        seen["is_future"] = all(isinstance(f, concurrent.futures.Future) for f in futures)
        done, not_done = concurrent.futures.wait(futures, timeout=10)
        seen["waited"] = (len(done), len(not_done))
        return sum(f.result() for f in futures)

    assert workflow.invoke(5, cfg()) == 0 + 1 + 4 + 9 + 16
    assert seen["is_future"] is True
    assert seen["waited"] == (5, 0)


def test_tasks_calling_tasks(saver: Saver) -> None:
    calls: Counter[str] = Counter()

    @task
    def leaf(x: int) -> int:
        calls["leaf"] += 1
        return x + 1

    @task
    def middle(x: int) -> int:
        calls["middle"] += 1
        return leaf(x).result() * leaf(x + 10).result()

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> int:
        return middle(x).result() + middle(x + 1).result()

    updates = list(workflow.stream(1, cfg(), stream_mode="updates"))
    assert updates[-1] == {"workflow": 2 * 12 + 3 * 13}
    assert sorted(u["leaf"] for u in updates if "leaf" in u) == [2, 3, 12, 13]
    assert calls == {"leaf": 4, "middle": 2}


def test_entrypoint_inside_entrypoint_has_its_own_namespace(saver: Saver) -> None:
    @task
    def double(x: int) -> int:
        return x * 2

    @entrypoint()
    def child(x: int) -> int:
        return double(x).result() + 1

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> int:
        return child.invoke(x) * 10

    assert parent.invoke(3, cfg("plain")) == 70
    chunks = list(parent.stream(3, cfg("ns"), stream_mode="updates", subgraphs=True))
    assert chunks[-1] == ((), {"parent": 70})
    inner = chunks[:-1]
    assert [c[1] for c in inner] == [{"double": 6}, {"child": 7}]
    (ns,) = {c[0] for c in inner}
    assert len(ns) == 1 and ns[0].startswith("parent:")
    # the child saved its own checkpoints under that namespace
    saved = saver.get_tuple({"configurable": {"thread_id": "ns", "checkpoint_ns": ns[0]}})
    assert saved is not None
    assert saved.checkpoint["channel_values"]["__end__"] == 7
    top = saver.get_tuple(cfg("ns"))
    assert top is not None and top.checkpoint["channel_values"]["__end__"] == 70


def test_interrupt_inside_a_nested_entrypoint_resumes_through_the_parent(saver: Saver) -> None:
    runs: Counter[int] = Counter()

    @task
    def double(x: int) -> int:
        runs[x] += 1
        return x * 2

    @entrypoint()
    def child(x: int) -> int:
        return double(x).result() + interrupt("child?")

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> int:
        return child.invoke(double(100).result() + x)

    first = parent.invoke(1, cfg())
    assert [i.value for i in first["__interrupt__"]] == ["child?"]
    assert parent.invoke(Command(resume=5), cfg()) == 402 + 5
    assert runs == {100: 1, 201: 1}


def test_thousand_tasks_in_flight(saver: Saver) -> None:
    @task
    def ident(i: int) -> int:
        return i

    @entrypoint(checkpointer=saver)
    def fan_out(n: int) -> int:
        futures = [ident(i) for i in range(n)]
        return sum(f.result() for f in futures)

    assert fan_out.invoke(1000, cfg()) == sum(range(1000))


# the entrypoint is a Pregel


def test_invoke_stream_and_batch(saver: Saver) -> None:
    @task
    def inc(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> int:
        return inc(x).result() * 2

    assert workflow.invoke(1, cfg("i")) == 4
    assert list(workflow.stream(1, cfg("s"))) == [{"inc": 2}, {"workflow": 4}]
    assert list(workflow.stream(1, cfg("v"), stream_mode="values")) == [4]
    assert list(workflow.stream(2, cfg("m"), stream_mode=["updates", "values"])) == [
        ("updates", {"inc": 3}),
        ("updates", {"workflow": 6}),
        ("values", 6),
    ]
    assert workflow.batch([1, 2, 3], [cfg(f"b{i}") for i in range(3)]) == [4, 6, 8]


def test_state_history_and_update_state(saver: Saver) -> None:
    @entrypoint(checkpointer=saver)
    def accumulate(x: int, *, previous: int | None) -> int:
        return (previous or 0) + x

    assert accumulate.invoke(1, cfg()) == 1
    assert accumulate.invoke(2, cfg()) == 3
    state = accumulate.get_state(cfg())
    assert state.values == 3
    assert state.next == ()
    assert state.metadata is not None and state.metadata["source"] == "loop"
    history = list(accumulate.get_state_history(cfg()))
    assert [h.metadata["source"] for h in history if h.metadata] == ["loop", "input"] * 2
    assert [h.values for h in history] == [3, 1, 1, None]
    assert history[0].parent_config == history[1].config

    accumulate.update_state(cfg(), 100)
    state = accumulate.get_state(cfg())
    assert state.values == 100
    assert state.metadata is not None and state.metadata["source"] == "update"
    assert accumulate.invoke(5, cfg()) == 105  # the update became `previous`


def test_state_while_interrupted(saver: Saver) -> None:
    @entrypoint(checkpointer=saver)
    def ask(x: int) -> int:
        return x + interrupt({"need": "number"})

    result = ask.invoke(1, cfg())
    (pending,) = result["__interrupt__"]
    state = ask.get_state(cfg())
    assert state.next == ("ask",)
    assert state.interrupts == (pending,)
    assert state.tasks[0].name == "ask" and state.tasks[0].interrupts == (pending,)
    assert ask.invoke(Command(resume=41), cfg()) == 42
    assert ask.get_state(cfg()).next == ()


def test_updates_stream_yields_each_task_as_it_finishes(saver: Saver) -> None:
    consumer_saw_first = threading.Event()

    @task
    def first(x: int) -> int:
        return x + 1

    @task
    def second(x: int) -> int:
        return x * 10

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> int:
        a = first(x).result()
        # the consumer sets this only once it has received {"first": ...}:
        # if updates were held back until the run ends, this would time out
        if not consumer_saw_first.wait(10):
            raise TimeoutError("the first task's update never reached the consumer")
        return second(a).result()

    received = []
    for chunk in workflow.stream(1, cfg(), stream_mode="updates"):
        received.append(chunk)
        if chunk == {"first": 2}:
            consumer_saw_first.set()
    assert received == [{"first": 2}, {"second": 20}, {"workflow": 20}]


def test_custom_stream_from_injected_writer_and_get_stream_writer(saver: Saver) -> None:
    @task
    def step(x: int, writer: Any) -> int:
        writer({"task": x})
        get_stream_writer()({"task-via-config": x})
        return x + 1

    @entrypoint(checkpointer=saver)
    def workflow(x: int, *, writer: Any) -> int:
        writer("start")
        y = step(x).result()
        get_stream_writer()(f"end {y}")
        return y

    assert list(workflow.stream(1, cfg("c"), stream_mode="custom")) == [
        "start",
        {"task": 1},
        {"task-via-config": 1},
        "end 2",
    ]
    assert list(workflow.stream(1, cfg("m"), stream_mode=["custom", "updates"])) == [
        ("custom", "start"),
        ("custom", {"task": 1}),
        ("custom", {"task-via-config": 1}),
        ("updates", {"step": 2}),
        ("custom", "end 2"),
        ("updates", {"workflow": 2}),
    ]
    # nobody streams "custom": writing is a no-op
    assert workflow.invoke(1, cfg("n")) == 2


# injection


def test_previous_and_final(saver: Saver) -> None:
    seen: list[Any] = []

    @entrypoint(checkpointer=saver)
    def counter(x: int, *, previous: Any) -> Any:
        seen.append(previous)
        total = (previous or 0) + x
        return entrypoint.final(value=f"total {total}", save=total)

    assert counter.invoke(1, cfg()) == "total 1"
    assert counter.invoke(2, cfg()) == "total 3"
    assert counter.invoke(3, cfg()) == "total 6"
    assert seen == [None, 1, 3]
    assert counter.get_state(cfg()).values == "total 6"
    assert counter.invoke(1, cfg("other")) == "total 1"  # previous is per thread


def test_config_runtime_and_store_injection(saver: Saver) -> None:
    store = InMemoryStore()
    store.put(("users",), "u1", {"name": "Ada"})
    got: dict[str, Any] = {}

    @task
    def in_task(x: int, config: Any, store: Any, runtime: Runtime[Any]) -> int:
        got["task_config"] = config
        got["task_store"] = store
        got["task_runtime"] = runtime
        got["task_get_config"] = get_config()
        got["task_get_store"] = get_store()
        return x

    @entrypoint(checkpointer=saver, store=store)
    def workflow(x: int, *, config: Any, store: Any, runtime: Runtime[Any], previous: Any) -> Any:
        got["config"] = config
        got["runtime"] = runtime
        got["previous"] = previous
        item = store.get(("users",), "u1")
        return [item.value["name"], in_task(x).result()]

    config = {**cfg("inj"), "metadata": {"who": "test"}}
    assert workflow.invoke(7, config, context={"user": "u1"}) == ["Ada", 7]
    assert got["config"]["configurable"]["thread_id"] == "inj"
    assert got["config"]["metadata"]["who"] == "test"
    assert got["task_config"]["configurable"]["thread_id"] == "inj"
    assert got["task_config"]["configurable"]["checkpoint_ns"].startswith("in_task:")
    assert got["task_get_config"] == got["task_config"]
    assert got["task_store"] is store and got["task_get_store"] is store
    runtime = got["runtime"]
    assert isinstance(runtime, Runtime)
    assert runtime.context == {"user": "u1"}
    assert runtime.store is store
    assert runtime.previous is None and got["previous"] is None
    assert got["task_runtime"].store is store
    workflow.invoke(8, cfg("inj"))
    assert got["runtime"].previous == ["Ada", 7] == got["previous"]


def test_explicit_argument_beats_injection(saver: Saver) -> None:
    @task
    def echo(config: Any = None, store: Any = None, *, writer: Any = None) -> Any:
        if isinstance(store, InMemoryStore):
            store = "injected store"
        return [config, store, writer if isinstance(writer, str) else callable(writer)]

    store = InMemoryStore()

    @entrypoint(checkpointer=saver, store=store)
    def workflow(x: int) -> Any:
        return [
            echo("mine").result(),
            echo(config="kw", store="s", writer="w").result(),
            echo().result()[0]["configurable"]["thread_id"],
        ]

    assert workflow.invoke(0, cfg("e")) == [
        ["mine", "injected store", True],
        ["kw", "s", "w"],
        "e",
    ]


# durable replay


def test_resume_replays_saved_tasks_without_running_or_saving_them(
    saver: Saver, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: Counter[str] = Counter()
    entry_runs = []

    task_ids: dict[str, str] = {}

    @task
    def step(name: str) -> str:
        runs[name] += 1
        task_ids[name] = get_config()["configurable"]["__pregel_task_id"]
        return name.upper()

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> list[str]:
        entry_runs.append(x)
        a = step("a").result()
        b, c = step("b"), step("c")
        answer = interrupt("continue?")
        d = step("d").result()
        return [a, b.result(), c.result(), answer, d]

    puts = count_put_writes(saver, monkeypatch)
    first = workflow.invoke(1, cfg())
    assert [i.value for i in first["__interrupt__"]] == ["continue?"]
    assert runs == {"a": 1, "b": 1, "c": 1}
    saved = {task_ids[n] for n in "abc"}
    assert saved <= set(puts)
    assert len(puts) == 4  # a, b, c and the entrypoint's interrupt

    puts.clear()
    assert workflow.invoke(Command(resume="yes"), cfg()) == ["A", "B", "C", "yes", "D"]
    assert runs == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert len(entry_runs) == 2  # the entrypoint ran again from the top
    assert not saved & set(puts), "a replayed task was written to the saver again"
    # only the resume value, d and the entrypoint's return were written
    assert len(puts) == 3
    assert task_ids["d"] in puts


def test_rerun_after_a_failure_reuses_saved_results(saver: Saver) -> None:
    runs: Counter[str] = Counter()
    broken = [True]

    @task
    def fine(x: int) -> int:
        runs["fine"] += 1
        return x

    @task
    def fragile(x: int) -> int:
        runs["fragile"] += 1
        if broken[0]:
            raise KeyError("not yet")
        return x * 100

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> int:
        return fine(x).result() + fragile(x).result()

    with pytest.raises(KeyError, match="not yet"):
        workflow.invoke(2, cfg())
    broken[0] = False
    assert workflow.invoke(None, cfg()) == 202
    assert runs == {"fine": 1, "fragile": 2}


# interrupts


def test_interrupts_in_sequence_resumed_one_command_each(saver: Saver) -> None:
    runs: Counter[str] = Counter()

    @task
    def step(x: Any) -> Any:
        runs[repr(x)] += 1
        return x

    @entrypoint(checkpointer=saver)
    def form(x: int) -> dict[str, Any]:
        name = interrupt("name?")
        step(name).result()
        age = interrupt("age?")
        step(age).result()
        city = interrupt("city?")
        return {"name": name, "age": age, "city": city}

    asked = []
    result = form.invoke(1, cfg())
    for answer in ["Ada", 36, "London"]:
        (pending,) = result["__interrupt__"]
        asked.append(pending.value)
        result = form.invoke(Command(resume=answer), cfg())
    assert asked == ["name?", "age?", "city?"]
    assert result == {"name": "Ada", "age": 36, "city": "London"}
    assert runs == {"'Ada'": 1, "36": 1}


def test_interrupt_inside_a_task(saver: Saver) -> None:
    runs: Counter[str] = Counter()

    @task
    def approve(item: str) -> str:
        runs[item] += 1
        verdict = interrupt(f"approve {item}?")
        return f"{item}: {verdict}"

    @entrypoint(checkpointer=saver)
    def review(items: list[str]) -> list[str]:
        return [approve(i).result() for i in items]

    result = review.invoke(["x", "y"], cfg())
    assert result == {"__interrupt__": [Interrupt("approve x?", result["__interrupt__"][0].id)]}
    result = review.invoke(Command(resume="ok"), cfg())
    assert [i.value for i in result["__interrupt__"]] == ["approve y?"]
    assert review.invoke(Command(resume="no"), cfg()) == ["x: ok", "y: no"]
    assert runs == {"x": 2, "y": 2}


def test_parallel_interrupts_surface_once_each_and_resume_by_id(saver: Saver) -> None:
    runs: Counter[int] = Counter()

    @task
    def ask(i: int) -> tuple[int, Any]:
        runs[i] += 1
        return (i, interrupt(f"q{i}"))

    @entrypoint(checkpointer=saver)
    def survey(n: int) -> list[Any]:
        futures = [ask(i) for i in range(n)]
        return [f.result() for f in futures]

    result = survey.invoke(3, cfg())
    pending = result["__interrupt__"]
    assert sorted(i.value for i in pending) == ["q0", "q1", "q2"]
    assert len({i.id for i in pending}) == 3
    ids = {i.value: i.id for i in pending}
    with pytest.raises(ValueError, match="3 interrupts are pending"):
        survey.invoke(Command(resume="ambiguous"), cfg())
    partial = survey.invoke(Command(resume={ids["q0"]: "a", ids["q2"]: "c"}), cfg())
    assert [(i.value, i.id) for i in partial["__interrupt__"]] == [("q1", ids["q1"])]
    assert survey.invoke(Command(resume={ids["q1"]: "b"}), cfg()) == [(0, "a"), (1, "b"), (2, "c")]
    assert runs == {0: 2, 1: 3, 2: 2}

    # the same interrupts, each once, on the stream of another thread
    streamed = [
        i
        for chunk in survey.stream(3, cfg("s"), stream_mode="updates")
        for i in chunk.get("__interrupt__", ())
    ]
    assert sorted(i.value for i in streamed) == ["q0", "q1", "q2"]
    assert len({i.id for i in streamed}) == 3
    # once some are answered, a single value answers the one left
    by_value = {i.value: i.id for i in streamed}
    survey.invoke(Command(resume={by_value["q0"]: "x", by_value["q1"]: "y"}), cfg("s"))
    assert survey.invoke(Command(resume="z"), cfg("s")) == [(0, "x"), (1, "y"), (2, "z")]


# failures and retries


def test_failing_task_raises_at_result_and_the_caller_may_go_on(saver: Saver) -> None:
    @task
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    @task
    def fine(x: int) -> int:
        return x

    @entrypoint(checkpointer=saver)
    def tolerant(x: int) -> Any:
        failing = boom(x)
        ok = fine(x)
        ignored = boom(x + 1)  # never looked at: its failure is nobody's business
        try:
            failing.result()
        except ValueError as exc:
            caught = str(exc)
        assert ignored is not None
        return [caught, ok.result()]

    assert tolerant.invoke(1, cfg("t")) == ["bad 1", 1]
    assert tolerant.get_state(cfg("t")).values == ["bad 1", 1]

    @entrypoint(checkpointer=saver)
    def strict(x: int) -> int:
        return boom(x).result()

    with pytest.raises(ValueError, match="bad 3") as caught:
        strict.invoke(3, cfg("s"))
    notes = getattr(caught.value, "__notes__", [])
    assert any("boom" in n for n in notes)


def test_task_retry_policy(saver: Saver) -> None:
    attempts: Counter[str] = Counter()

    @task(retry_policy=fast_retry(3))
    def flaky(name: str, fail_times: int) -> str:
        attempts[name] += 1
        if attempts[name] <= fail_times:
            raise ValueError(f"{name} attempt {attempts[name]}")
        return name

    @task(retry_policy=[fast_retry(5, KeyError), fast_retry(2, ValueError)])
    def picky(x: int) -> int:
        attempts["picky"] += 1
        raise ValueError("never works")

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> Any:
        out = [flaky("twice", 2).result()]
        try:
            flaky("always", 99).result()
        except ValueError as exc:
            out.append(str(exc))
        try:
            picky(x).result()
        except ValueError as exc:
            out.append(str(exc))
        return out

    assert workflow.invoke(0, cfg()) == ["twice", "always attempt 3", "never works"]
    assert attempts == {"twice": 3, "always": 3, "picky": 2}


def test_entrypoint_retry_policy(saver: Saver) -> None:
    attempts = []

    @entrypoint(checkpointer=saver, retry_policy=fast_retry(3, OSError))
    def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) < 3:
            raise OSError("transient")
        return x

    assert flaky.invoke(9, cfg("ok")) == 9
    assert len(attempts) == 3

    attempts.clear()

    @entrypoint(checkpointer=saver, retry_policy=fast_retry(2, OSError))
    def hopeless(x: int) -> int:
        attempts.append(x)
        raise OSError("down")

    with pytest.raises(OSError, match="down"):
        hopeless.invoke(1, cfg("no"))
    assert len(attempts) == 2


# cache


def test_cached_task_hit_skips_the_body_and_is_marked_in_the_stream(saver: Saver) -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy())
    def slow_square(x: int) -> int:
        runs.append(x)
        return x * x

    @entrypoint(checkpointer=saver, cache=InMemoryCache())
    def workflow(x: int) -> int:
        return slow_square(x).result() + slow_square(x + 1).result()

    assert list(workflow.stream(2, cfg("a"), stream_mode="updates")) == [
        {"slow_square": 4},
        {"slow_square": 9},
        {"workflow": 13},
    ]
    assert runs == [2, 3]
    assert list(workflow.stream(2, cfg("b"), stream_mode="updates")) == [
        {"slow_square": 4, "__metadata__": {"cached": True}},
        {"slow_square": 9, "__metadata__": {"cached": True}},
        {"workflow": 13},
    ]
    assert workflow.invoke(3, cfg("c")) == 9 + 16
    assert runs == [2, 3, 4]


def test_cache_ttl_expires() -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy(ttl=1))
    def fetch(x: int) -> int:
        runs.append(x)
        return x

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> int:
        return fetch(x).result()

    workflow.invoke(1)
    workflow.invoke(1)
    assert runs == [1]
    time.sleep(1.05)
    workflow.invoke(1)
    assert runs == [1, 1]


def test_cache_ttl_expires_on_the_cache_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(memory_cache, "_now", lambda: now[0])
    runs: list[int] = []

    @task(cache_policy=CachePolicy(ttl=60))
    def fetch(x: int) -> int:
        runs.append(x)
        return x

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> int:
        return fetch(x).result()

    workflow.invoke(1)
    now[0] += 59
    workflow.invoke(1)
    assert runs == [1]
    now[0] += 2
    workflow.invoke(1)
    assert runs == [1, 1]


def test_cache_key_func() -> None:
    runs: list[tuple[int, str]] = []

    @task(cache_policy=CachePolicy(key_func=lambda x, note: str(x)))
    def lookup(x: int, note: str) -> str:
        runs.append((x, note))
        return f"{x}:{note}"

    @entrypoint(cache=InMemoryCache())
    def workflow(note: str) -> str:
        return str(lookup(1, note).result())

    # the note is not part of the key: the second run hits the first's entry
    assert workflow.invoke("first") == "1:first"
    assert workflow.invoke("second") == "1:first"
    assert runs == [(1, "first")]


def test_clear_cache_forces_a_rerun() -> None:
    runs: list[int] = []
    other_runs: list[int] = []

    @task(cache_policy=CachePolicy())
    def compute(x: int) -> int:
        runs.append(x)
        return x + 1

    @task(cache_policy=CachePolicy())
    def other(x: int) -> int:
        other_runs.append(x)
        return x

    cache: InMemoryCache[Any] = InMemoryCache()

    @entrypoint(cache=cache)
    def workflow(x: int) -> int:
        return compute(x).result() + other(x).result()

    workflow.invoke(1)
    workflow.invoke(1)
    assert runs == [1] and other_runs == [1]
    compute.clear_cache(cache)
    workflow.invoke(1)
    assert runs == [1, 1]
    assert other_runs == [1]  # only compute's entries were dropped


_CROSS_PROCESS = """
import sys
from pathlib import Path

from pregelkit.cache.sqlite import SqliteCache
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy

cache_path, log_path = sys.argv[1], Path(sys.argv[2])


@task(cache_policy=CachePolicy())
def expensive(x):
    with log_path.open("a") as log:
        log.write(f"ran {x}\\n")
    return x * 7


@entrypoint(cache=SqliteCache(path=cache_path))
def workflow(x):
    return [expensive(x).result(), expensive(x + 1).result()]


print(workflow.invoke(6))
"""


def test_sqlite_cache_is_shared_across_processes(tmp_path: Path) -> None:
    script = tmp_path / "cached_workflow.py"
    script.write_text(_CROSS_PROCESS)
    cache_file, log = tmp_path / "cache.db", tmp_path / "executions.log"

    def run() -> str:
        done = subprocess.run(
            [sys.executable, str(script), str(cache_file), str(log)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run() == "[42, 49]"
    assert log.read_text().splitlines() == ["ran 6", "ran 7"]
    assert run() == "[42, 49]"
    assert log.read_text().splitlines() == ["ran 6", "ran 7"]  # no new executions


def test_cache_hit_is_replayed_from_the_saver_on_resume(
    saver: Saver, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy())
    def cached(x: int) -> int:
        runs.append(x)
        return x * 3

    cache: InMemoryCache[Any] = InMemoryCache()

    @entrypoint(checkpointer=saver, cache=cache)
    def workflow(x: int) -> Any:
        y = cached(x).result()
        return [y, interrupt("go?")]

    workflow.invoke(1, cfg("warm"))
    assert runs == [1]
    first = workflow.invoke(1, cfg("t"))  # a cache hit, then an interrupt
    assert "__interrupt__" in first and runs == [1]
    cache.clear()
    assert workflow.invoke(Command(resume="go"), cfg("t")) == [3, "go"]
    assert runs == [1]  # the hit was saved with the thread: no cache needed on resume


def test_durability_modes_all_resume(saver: Saver) -> None:
    runs: Counter[str] = Counter()

    @task
    def step(x: str) -> str:
        runs[x] += 1
        return x

    @entrypoint(checkpointer=saver)
    def workflow(x: str) -> list[str]:
        a = step(x).result()
        return [a, interrupt("more?")]

    for mode in ("sync", "async", "exit"):
        config = cfg(mode)
        assert "__interrupt__" in workflow.invoke(mode, config, durability=mode)
        assert workflow.invoke(Command(resume=1), config, durability=mode) == [mode, 1]
    assert runs == {"sync": 1, "async": 1, "exit": 1}


def test_a_checkpointer_needs_a_thread_id() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def needs_thread(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="needs a thread id"):
        needs_thread.invoke(1)
