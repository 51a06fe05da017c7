"""Random code edits between an interrupt and its resume: an error or the new code's result.

Hypothesis records a workflow (a sequence of task calls with one
``interrupt()`` among them, some calls made in parallel), edits its code
(swap two steps, insert a call, delete one, change an argument, or several of
these), and resumes the recorded thread with the edited code. The resume must
either raise ``NondeterminismError`` (and leave the thread resumable by the
old code, with the old code's result), or return exactly what a fresh run of
the edited code returns: never recorded results of the old code mixed into
the new one.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import NondeterminismError
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt

RUNS: Counter[tuple[str, Any]] = Counter()


def _body(name: str, x: Any) -> str:
    RUNS[(name, repr(x))] += 1
    return f"{name}({x!r})"


@task
def a(x: Any) -> str:
    return _body("a", x)


@task
def b(x: Any) -> str:
    return _body("b", x)


@task
def c(x: Any) -> str:
    return _body("c", x)


TASKS = {"a": a, "b": b, "c": c}

# a step is ("call", name, arg) | ("par", [(name, arg), ...]) | ("ask",)
Step = tuple[Any, ...]

args = st.one_of(
    st.integers(0, 3),
    st.sampled_from(["x", "y"]),
    st.dictionaries(st.sampled_from("kj"), st.integers(0, 1)),
)
calls = st.tuples(st.sampled_from(sorted(TASKS)), args)
steps = st.one_of(
    calls.map(lambda nc: ("call", *nc)),
    st.lists(calls, min_size=2, max_size=3).map(lambda cs: ("par", cs)),
)


@st.composite
def programs(draw: st.DrawFn) -> list[Step]:
    body = draw(st.lists(steps, min_size=1, max_size=6))
    at = draw(st.integers(0, len(body)))
    return [*body[:at], ("ask",), *body[at:]]


@st.composite
def edited(draw: st.DrawFn, program: list[Step]) -> list[Step]:
    new = list(program)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["swap", "insert", "delete", "arg", "rename"]))
        calls_at = [i for i, s in enumerate(new) if s[0] == "call"]
        if kind == "swap" and len(new) > 1:
            i = draw(st.integers(0, len(new) - 2))
            new[i], new[i + 1] = new[i + 1], new[i]
        elif kind == "insert":
            i = draw(st.integers(0, len(new)))
            new.insert(i, draw(steps))
        elif kind == "delete" and calls_at:
            del new[draw(st.sampled_from(calls_at))]
        elif kind == "arg" and calls_at:
            i = draw(st.sampled_from(calls_at))
            new[i] = ("call", new[i][1], draw(args))
        elif kind == "rename" and calls_at:
            i = draw(st.sampled_from(calls_at))
            new[i] = ("call", draw(st.sampled_from(sorted(TASKS))), new[i][2])
    return new


def build(program: list[Step], saver: BaseCheckpointSaver[Any]) -> Any:
    @entrypoint(checkpointer=saver)
    def workflow(_: Any) -> list[Any]:
        out: list[Any] = []
        for step in program:
            if step[0] == "call":
                out.append(TASKS[step[1]](step[2]).result())
            elif step[0] == "par":
                futures = [TASKS[name](arg) for name, arg in step[1]]
                out.append([f.result() for f in futures])
            else:
                out.append(interrupt("go?"))
        return out

    return workflow


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def to_the_end(wf: Any, thread: str) -> Any:
    out = wf.invoke(0, cfg(thread))
    if isinstance(out, dict) and "__interrupt__" in out:
        out = wf.invoke(Command(resume="yes"), cfg(thread))
    return out


def check_edit(saver: BaseCheckpointSaver[Any], program: list[Step], new: list[Step]) -> None:
    thread = uuid.uuid4().hex
    old_wf, new_wf = build(program, saver), build(new, saver)
    assert "__interrupt__" in old_wf.invoke(0, cfg(thread))
    try:
        resumed = new_wf.invoke(Command(resume="yes"), cfg(thread))
    except NondeterminismError:
        # refused: the old code still finishes the thread, with its own result
        assert old_wf.invoke(Command(resume="yes"), cfg(thread)) == to_the_end(
            old_wf, uuid.uuid4().hex
        )
        return
    assert resumed == to_the_end(new_wf, uuid.uuid4().hex)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edit_between_interrupt_and_resume_never_mixes(data: st.DataObject) -> None:
    program = data.draw(programs())
    new = data.draw(edited(program))
    check_edit(InMemorySaver(), program, new)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edit_never_mixes_on_sqlite(data: st.DataObject) -> None:
    program = data.draw(programs())
    new = data.draw(edited(program))
    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteSaver.from_conn_string(str(Path(tmp) / "state.db")) as saver,
    ):
        check_edit(saver, program, new)


def test_unedited_code_always_resumes() -> None:
    saver = InMemorySaver()
    program: list[Step] = [("call", "a", 1), ("par", [("b", 2), ("c", {"k": 1})]), ("ask",)]
    RUNS.clear()
    check_edit(saver, program, list(program))
    assert RUNS[("a", "1")] == 2  # once recorded, once for the fresh comparison run
