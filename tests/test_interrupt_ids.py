"""Interrupt ids: one per ``interrupt()`` call, stable, never confused.

An answer is matched to its question by id. Two questions sharing an id (as
two calls in one function once did) let an answer sent twice, say by a
double-clicked button, answer the next question too; a resume naming an id
that is not pending is refused before anything is saved.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.channels import LastValue, Topic
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import (
    AmbiguousResumeError,
    InterruptNotPendingError,
    UnknownInterruptError,
)
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import Command, Interrupt, interrupt

Saver = BaseCheckpointSaver[Any]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Saver]:
    if request.param == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "state.db")) as sqlite_saver:
            yield sqlite_saver


def cleanup_flow(saver: Saver, deleted: list[str]) -> Any:
    @task
    def delete(what: str) -> str:
        deleted.append(what)
        return what

    @entrypoint(checkpointer=saver)
    def cleanup(_: int) -> list[str]:
        done = []
        if interrupt("delete the staging data?") == "yes":
            done.append(delete("staging").result())
        if interrupt("delete the PRODUCTION data?") == "yes":
            done.append(delete("production").result())
        return done

    return cleanup


def by_id(interrupts: Any) -> list[Interrupt]:
    """Interrupts in id order: the order of several tasks' interrupts is the
    order the tasks stopped or were saved in, not significant."""
    return sorted(interrupts, key=lambda i: i.id)


def saved(saver: Saver, config: dict[str, Any]) -> Any:
    """Everything the thread has saved: its checkpoints and their pending writes."""
    return [
        (t.checkpoint["id"], sorted(map(repr, t.pending_writes or ()))) for t in saver.list(config)
    ]


def test_two_interrupts_in_one_function_get_their_own_ids(saver: Saver) -> None:
    flow = cleanup_flow(saver, [])
    (staging,) = flow.invoke(1, cfg())["__interrupt__"]
    (production,) = flow.invoke(Command(resume={staging.id: "no"}), cfg())["__interrupt__"]
    assert production.value == "delete the PRODUCTION data?"
    assert production.id != staging.id
    assert len(production.id) == 32 and int(production.id, 16) >= 0


def test_a_double_clicked_answer_is_refused_not_given_to_the_next_question(
    saver: Saver,
) -> None:
    deleted: list[str] = []
    flow = cleanup_flow(saver, deleted)
    (staging,) = flow.invoke(1, cfg())["__interrupt__"]
    click = Command(resume={staging.id: "yes"})
    (production,) = flow.invoke(click, cfg())["__interrupt__"]
    assert deleted == ["staging"]
    before = saved(saver, cfg())

    with pytest.raises(InterruptNotPendingError) as info:
        flow.invoke(click, cfg())  # the same answer, sent again
    assert deleted == ["staging"]  # production was not deleted
    assert saved(saver, cfg()) == before  # nothing was saved either
    assert flow.get_state(cfg()).interrupts == (production,)
    error = info.value
    assert isinstance(error, UnknownInterruptError) and isinstance(error, ValueError)
    assert (error.reason, error.interrupt_ids) == ("not_pending", (staging.id,))
    assert error.pending_ids == (production.id,) and error.pending == (production,)
    assert f"{production.id}: 'delete the PRODUCTION data?'" in str(error)

    # a map naming the pending interrupt and the answered one is refused whole
    with pytest.raises(InterruptNotPendingError):
        flow.invoke(Command(resume={production.id: "yes", staging.id: "yes"}), cfg())
    assert deleted == ["staging"] and saved(saver, cfg()) == before

    assert flow.invoke(Command(resume={production.id: "no"}), cfg()) == ["staging"]


def test_ids_are_langgraphs_the_first_of_a_task_keeps_its_namespace_id() -> None:
    """LangGraph 1.2 hashes the task's namespace for its first interrupt and
    ``namespace|index`` for a later one; a client may hold ids of either."""

    @entrypoint(checkpointer=InMemorySaver())
    def ask(_: int) -> list[Any]:
        return [interrupt("a"), interrupt("b"), interrupt("c")]

    ids = [ask.invoke(1, cfg())["__interrupt__"][0].id]
    for answer in ("x", "y"):
        ids.append(ask.invoke(Command(resume=answer), cfg())["__interrupt__"][0].id)
    (waiting,) = ask.get_state(cfg()).tasks
    ns = f"{waiting.name}:{waiting.id}"

    def h(text: str) -> str:
        return xxhash.xxh3_128_hexdigest(text.encode())

    assert ids == [h(ns), h(f"{ns}|1"), h(f"{ns}|2")]
    assert Interrupt.from_ns("a", ns).id == ids[0]
    assert Interrupt.from_ns("c", ns, index=2).id == ids[2]


def test_ids_are_stable_across_replays_and_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    with SqliteSaver.from_conn_string(path) as first_saver:
        flow = cleanup_flow(first_saver, [])
        (staging,) = flow.invoke(1, cfg())["__interrupt__"]
        (production,) = flow.invoke(Command(resume="no"), cfg())["__interrupt__"]
        # running the waiting thread again asks the same question, with the same id
        assert flow.invoke(None, cfg())["__interrupt__"] == [production]
    with SqliteSaver.from_conn_string(path) as second_saver:
        again = cleanup_flow(second_saver, [])
        assert again.get_state(cfg()).interrupts == (production,)
        with pytest.raises(InterruptNotPendingError):
            again.invoke(Command(resume={staging.id: "yes"}), cfg())
        assert again.invoke(Command(resume={production.id: "yes"}), cfg()) == ["production"]


def test_ids_differ_between_nodes_subgraphs_tasks_and_the_entrypoint() -> None:
    def node(name: str) -> Any:
        def ask(_: str) -> str:
            return f"{name}:{interrupt(name + '1')},{interrupt(name + '2')}"

        return ask

    inner = Pregel(
        nodes={"i": NodeBuilder().subscribe_only("x").do(node("sub")).write_to("out")},
        channels={"x": LastValue(str), "out": LastValue(str)},
        input_channels="x",
        output_channels="out",
    )
    app = Pregel(
        nodes={
            **{n: NodeBuilder().subscribe_only("a").do(node(n)).write_to("out") for n in "pq"},
            "sub": NodeBuilder().subscribe_only("a").do(inner).write_to("out"),
        },
        channels={"a": LastValue(str), "out": Topic(str)},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    seen: dict[str, str] = {}
    pending = app.invoke("go", cfg())["__interrupt__"]
    while pending:
        for i in pending:
            assert seen.setdefault(i.value, i.id) == i.id
        result = app.invoke(Command(resume={i.id: "ok" for i in pending}), cfg())
        pending = result.get("__interrupt__", []) if isinstance(result, dict) else []
    assert sorted(seen) == ["p1", "p2", "q1", "q2", "sub1", "sub2"]
    assert len(set(seen.values())) == 6

    @task
    def step(_: int) -> Any:
        return interrupt("task")

    @entrypoint(checkpointer=InMemorySaver())
    def flow(n: int) -> Any:
        return [step(n).result(), interrupt("entrypoint")]

    (in_task,) = flow.invoke(1, cfg())["__interrupt__"]
    (in_entrypoint,) = flow.invoke(Command(resume="x"), cfg())["__interrupt__"]
    assert in_entrypoint.value == "entrypoint" and in_entrypoint.id != in_task.id


def test_one_value_for_several_interrupts_names_them_all() -> None:
    @task
    def ask(question: str) -> Any:
        return interrupt(question)

    @entrypoint(checkpointer=InMemorySaver())
    def survey(questions: list[str]) -> list[Any]:
        return [f.result() for f in [ask(q) for q in questions]]

    pending = survey.invoke(["name?", "age?\nin years"], cfg())["__interrupt__"]
    with pytest.raises(AmbiguousResumeError) as info:
        survey.invoke(Command(resume="Ada"), cfg())
    error = info.value
    assert isinstance(error, UnknownInterruptError) and isinstance(error, ValueError)
    assert isinstance(error, RuntimeError)  # what LangGraph raises for it
    assert error.reason == "ambiguous" and set(error.pending_ids) == {i.id for i in pending}
    text = str(error)
    assert "2 interrupts are pending" in text and "nothing was applied" in text
    for i in pending:
        assert f"{i.id}: {i.value!r}" in text  # newlines stay escaped: one line each
    assert survey.get_state(cfg()).interrupts == tuple(pending)


def test_resume_errors_survive_pickling_with_their_fields() -> None:
    pending = [Interrupt("q?", "b" * 32)]
    for error in (InterruptNotPendingError(["a" * 32], pending), AmbiguousResumeError(pending)):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert (copy.reason, copy.interrupt_ids, copy.pending_ids, copy.pending) == (
            error.reason,
            error.interrupt_ids,
            error.pending_ids,
            error.pending,
        )


def test_a_long_question_is_cut_in_the_error() -> None:
    question = {"text": "x" * 500}
    error = AmbiguousResumeError([Interrupt(question, "c" * 32), Interrupt(2, "d" * 32)])
    line = next(line for line in str(error).splitlines() if "c" * 32 in line)
    assert len(line) < 100 and line.endswith("…")


# several tasks interrupting in one step: what invoke returns, what get_state shows


def test_several_nodes_interrupting_in_one_step_invoke_and_get_state_agree() -> None:
    def asker(name: str) -> Any:
        return lambda _: f"{name}:{interrupt(name + '1')},{interrupt(name + '2')}"

    app = Pregel(
        nodes={n: NodeBuilder().subscribe_only("a").do(asker(n)).write_to("out") for n in "ba"},
        channels={"a": LastValue(str), "out": Topic(str)},
        input_channels="a",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )
    out = app.invoke("go", cfg())["__interrupt__"]
    state = app.get_state(cfg())
    # invoke: every pending interrupt once, in the order the tasks stopped in
    assert sorted(i.value for i in out) == ["a1", "b1"]
    # get_state: each task with its interrupt, in the step's task order, and
    # all of them in that order
    assert state.next == ("b", "a")
    assert [(t.name, [i.value for i in t.interrupts]) for t in state.tasks] == [
        ("b", ["b1"]),
        ("a", ["a1"]),
    ]
    assert state.interrupts == tuple(i for t in state.tasks for i in t.interrupts)
    assert by_id(state.interrupts) == by_id(out)
    ids = {i.value: i.id for i in out}

    # answering one: its task asks its next question, the other still waits
    out = app.invoke(Command(resume={ids["a1"]: "x"}), cfg())["__interrupt__"]
    assert sorted(i.value for i in out) == ["a2", "b1"]
    assert ids["b1"] in {i.id for i in out}
    state = app.get_state(cfg())
    assert [i.value for i in state.interrupts] == ["b1", "a2"]
    assert by_id(state.interrupts) == by_id(out)
    assert by_id(app.invoke(None, cfg(), version="v2").interrupts) == by_id(out)


def test_task_calls_interrupting_together_are_all_returned_and_listed() -> None:
    @task
    def ask(question: str) -> Any:
        return interrupt(question)

    @entrypoint(checkpointer=InMemorySaver())
    def survey(questions: list[str]) -> list[Any]:
        return [f.result() for f in [ask(q) for q in questions]]

    out = survey.invoke(["q0", "q1", "q2"], cfg())["__interrupt__"]
    state = survey.get_state(cfg())
    assert sorted(i.value for i in out) == ["q0", "q1", "q2"]
    assert by_id(state.interrupts) == by_id(out)
    # the planned task is the entrypoint: it carries the interrupt it was
    # waiting on (the first result it asked for); the others are its calls'
    (waiting,) = state.tasks
    assert waiting.name == "survey" and [i.value for i in waiting.interrupts] == ["q0"]


# Hypothesis: any number of tasks, each asking any number of questions


@st.composite
def surveys(draw: st.DrawFn) -> list[int]:
    return draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=surveys(), data=st.data())
def test_any_subset_of_answers_goes_exactly_to_its_questions(
    plan: list[int], data: st.DataObject
) -> None:
    """Tasks asking 0-3 questions each, answered a random subset at a time:
    every question has one id of its own, the same each time it is shown; an
    answer reaches only the question it names; a re-sent answer is refused."""

    @task
    def ask(i: int, count: int) -> list[Any]:
        return [interrupt(f"t{i}q{k}") for k in range(count)]

    @entrypoint(checkpointer=InMemorySaver())
    def flow(counts: list[int]) -> Any:
        answers = [f.result() for f in [ask(i, c) for i, c in enumerate(counts)]]
        return answers, interrupt("done?")

    ids: dict[str, str] = {}
    answered: set[str] = set()
    out = flow.invoke(plan, cfg())
    while isinstance(out, dict):
        pending = out["__interrupt__"]
        # the same interrupts, whatever order the tasks stopped or were saved in
        state = flow.get_state(cfg()).interrupts
        assert by_id(state) == by_id(pending)
        for i in pending:
            assert ids.setdefault(i.value, i.id) == i.id  # stable
            assert i.value not in answered  # an answered question is not asked again
        assert len(set(ids.values())) == len(ids)  # distinct
        # a replay of the waiting thread asks the same questions with the same ids
        assert by_id(flow.invoke(None, cfg())["__interrupt__"]) == by_id(pending)
        if answered:
            stale = ids[data.draw(st.sampled_from(sorted(answered)))]
            with pytest.raises(InterruptNotPendingError):
                flow.invoke(Command(resume={stale: "again"}), cfg())
        # drawn from a fixed order: tasks stop in any order, and Hypothesis
        # replays an example only if the same draws give the same choices
        in_order = sorted(pending, key=lambda i: i.value)
        chosen = data.draw(
            st.lists(st.sampled_from(in_order), min_size=1, unique_by=lambda i: i.id)
        )
        out = flow.invoke(Command(resume={i.id: f"answer to {i.value}" for i in chosen}), cfg())
        answered |= {i.value for i in chosen}
        still = {i.value for i in out["__interrupt__"]} if isinstance(out, dict) else set()
        assert {i.value for i in pending} - answered <= still
    expected = [[f"answer to t{i}q{k}" for k in range(c)] for i, c in enumerate(plan)]
    assert out == (expected, "answer to done?")
    assert len(ids) == sum(plan) + 1


def test_a_thread_saved_when_a_tasks_calls_shared_an_id_is_answered_by_that_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before each call had its own id, a task's second question carried its
    namespace's id, the first's; a thread saved then waits at it."""
    import pregelkit.types as types

    flow = cleanup_flow(InMemorySaver(), [])
    with monkeypatch.context() as old_code:
        old_code.setattr(
            types, "interrupt_id", lambda ns, index=0: xxhash.xxh3_128_hexdigest(ns.encode())
        )
        (staging,) = flow.invoke(1, cfg())["__interrupt__"]
        (production,) = flow.invoke(Command(resume="no"), cfg())["__interrupt__"]
    assert production.id == staging.id  # as saved by the old code
    assert flow.invoke(Command(resume={production.id: "yes"}), cfg()) == ["production"]


def test_async_resume_refuses_an_id_that_is_not_pending() -> None:
    flow = cleanup_flow(InMemorySaver(), [])

    async def attempt() -> None:
        (staging,) = (await flow.ainvoke(1, cfg()))["__interrupt__"]
        answered = await flow.ainvoke(Command(resume={staging.id: "no"}), cfg())
        (production,) = answered["__interrupt__"]
        with pytest.raises(InterruptNotPendingError):
            await flow.ainvoke(Command(resume={staging.id: "yes"}), cfg())
        assert await flow.ainvoke(Command(resume={production.id: "no"}), cfg()) == []

    asyncio.run(attempt())
