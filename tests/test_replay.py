"""Replay is checked, not assumed: what a resumed run compares with the run it resumes.

Each test records a thread with one version of a workflow, stops it at an
interrupt, and resumes it with another version (or the same one), as a user
who edits code between runs would. Subprocess tests (edited module files, a
clock set back) are in ``test_replay_processes.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import (
    InvalidUpdateError,
    NondeterminismError,
    NothingToResumeError,
    ReplayedTaskError,
)
from pregelkit.func import deprecate_patch, entrypoint, patched, task
from pregelkit.types import Command, RetryPolicy, interrupt

Saver = BaseCheckpointSaver[Any]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class Log:
    """Which task bodies ran, in order."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []

    def tasks(self) -> tuple[Any, Any, Any]:
        @task
        def a(x: Any) -> str:
            self.ran.append(("a", x))
            return f"a{x}"

        @task
        def b(x: Any) -> str:
            self.ran.append(("b", x))
            return f"b{x}"

        @task
        def c(x: Any) -> str:
            self.ran.append(("c", x))
            return f"c{x}"

        return a, b, c


def record(saver: Saver, body: Callable[[Any], list[Any]]) -> Any:
    """Record a thread whose entrypoint runs ``body`` and then asks a question."""

    @entrypoint(checkpointer=saver)
    def wf(n: Any) -> dict[str, Any]:
        got = body(n)
        answer = interrupt("ok?")
        return {"got": got, "answer": answer}

    return wf


# identity checks


def test_swapped_calls_are_a_nondeterminism_error_naming_both(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()
    v1 = record(saver, lambda n: [a(n).result(), b(n).result()])
    v1.invoke(1, cfg())
    v2 = record(saver, lambda n: [b(n).result(), a(n).result()])
    log.ran.clear()
    with pytest.raises(NondeterminismError) as err:
        v2.invoke(Command(resume="yes"), cfg())
    assert err.value.position == 0
    assert "'a'" in err.value.recorded and "'b'" in err.value.new
    assert "call #0" in str(err.value)
    assert log.ran == []  # the swapped call neither ran nor got a's result
    # the thread is untouched: the old code resumes it and gets its own result
    assert v1.invoke(Command(resume="yes"), cfg()) == {"got": ["a1", "b1"], "answer": "yes"}
    assert log.ran == []


def test_changed_arguments_are_a_nondeterminism_error(saver: Saver) -> None:
    log = Log()
    a, _, _ = log.tasks()
    v1 = record(saver, lambda n: [a({"k": n, "j": 2}).result()])
    v1.invoke(1, cfg())
    v2 = record(saver, lambda n: [a({"k": n + 1, "j": 2}).result()])
    with pytest.raises(NondeterminismError, match=r"arguments of digest"):
        v2.invoke(Command(resume="y"), cfg())
    # equal dicts in another key order are the same call
    v3 = record(saver, lambda n: [a({"j": 2, "k": n}).result()])
    assert v3.invoke(Command(resume="y"), cfg())["got"] == ["a{'k': 1, 'j': 2}"]
    assert len(log.ran) == 1


def test_inserted_call_before_a_recorded_one_is_an_error(saver: Saver) -> None:
    log = Log()
    a, b, c = log.tasks()
    v1 = record(saver, lambda n: [a(n).result(), b(n).result()])
    v1.invoke(1, cfg())
    v2 = record(saver, lambda n: [a(n).result(), c(n).result(), b(n).result()])
    with pytest.raises(NondeterminismError) as err:
        v2.invoke(Command(resume="y"), cfg())
    assert err.value.position == 1


def test_call_appended_after_the_recorded_ones_runs(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()
    v1 = record(saver, lambda n: [a(n).result()])
    v1.invoke(1, cfg())

    @entrypoint(checkpointer=saver)
    def wf(n: int) -> dict[str, Any]:  # the same name: the same node
        got = [a(n).result()]
        answer = interrupt("ok?")
        got.append(b(n).result())
        return {"got": got, "answer": answer}

    v2 = wf

    log.ran.clear()
    assert v2.invoke(Command(resume="y"), cfg()) == {"got": ["a1", "b1"], "answer": "y"}
    assert log.ran == [("b", 1)]


def test_last_recorded_call_removed_is_an_error(saver: Saver) -> None:
    """The new code returns without making a call the recorded run made (and
    whose side effects happened): refused like any other edit, not a result
    that silently leaves the recorded call out."""
    log = Log()
    a, b, _ = log.tasks()
    v1 = record(saver, lambda n: [a(n).result(), b(n).result()])
    v1.invoke(1, cfg())
    v2 = record(saver, lambda n: [a(n).result()])
    log.ran.clear()
    with pytest.raises(NondeterminismError) as err:
        v2.invoke(Command(resume="y"), cfg())
    assert err.value.position == 1
    assert "'b'" in err.value.recorded and "nothing" in err.value.new
    assert log.ran == []
    assert v1.invoke(Command(resume="y"), cfg()) == {"got": ["a1", "b1"], "answer": "y"}
    assert log.ran == []


def test_nested_task_that_drops_its_last_call_is_an_error(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()

    def version(calls_b: bool) -> Any:
        @task
        def outer(n: int) -> list[str]:
            got = [a(n).result()]
            if calls_b:
                got.append(b(n).result())
            got.append(interrupt("inner?"))
            return got

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> list[str]:
            return outer(n).result()

        return wf

    version(True).invoke(1, cfg())
    with pytest.raises(NondeterminismError) as err:
        version(False).invoke(Command(resume="y"), cfg())
    assert err.value.parent == "outer" and err.value.position == 1
    assert version(True).invoke(Command(resume="y"), cfg()) == ["a1", "b1", "y"]


def test_undigestable_arguments_fall_back_to_the_name(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()
    lock_like = object()
    v1 = record(saver, lambda n: [a(n).result(), b(lock_like).result()[:1]])
    v1.invoke(1, cfg())
    other = object()
    v2 = record(saver, lambda n: [a(n).result(), b(other).result()[:1]])
    log.ran.clear()
    assert v2.invoke(Command(resume="y"), cfg())["got"] == ["a1", "b"]
    assert log.ran == []


def test_nondeterminism_is_raised_even_if_the_entrypoint_catches_it(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()
    v1 = record(saver, lambda n: [a(n).result()])
    v1.invoke(1, cfg())

    def swallow(n: int) -> list[Any]:
        try:
            return [b(n).result()]
        except Exception:
            return ["swallowed"]

    v2 = record(saver, swallow)
    with pytest.raises(NondeterminismError):
        v2.invoke(Command(resume="y"), cfg())
    assert v1.invoke(Command(resume="y"), cfg())["got"] == ["a1"]


def test_nested_calls_are_checked(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()

    def outer_v(inner: Any) -> Any:
        @task
        def outer(n: int) -> str:
            return str(inner(n).result())

        return outer

    outer1 = outer_v(a)
    v1 = record(saver, lambda n: [outer1(n).result()])
    v1.invoke(1, cfg())
    outer2 = outer_v(b)
    v2 = record(saver, lambda n: [outer2(n).result()])
    # the outer call is the same and replays; its nested call is not re-checked
    # because the outer result is recorded: the recorded result stands
    assert v2.invoke(Command(resume="y"), cfg())["got"] == ["a1"]


def test_nested_call_swapped_inside_an_unfinished_task_is_an_error(saver: Saver) -> None:
    log = Log()
    a, b, _ = log.tasks()

    def outer_v(first: Any, second: Any) -> Any:
        @task
        def outer(n: int) -> list[str]:
            got = [first(n).result()]
            got.append(interrupt("inner?"))
            got.append(second(n).result())
            return got

        return outer

    outer1 = outer_v(a, b)

    def version(outer: Any) -> Any:
        @entrypoint(checkpointer=saver)
        def wf(n: int) -> list[str]:
            return list(outer(n).result())

        return wf

    v1 = version(outer1)
    v1.invoke(1, cfg())
    v2 = version(outer_v(b, a))

    with pytest.raises(NondeterminismError) as err:
        v2.invoke(Command(resume="x"), cfg())
    assert err.value.parent == "outer"
    assert v1.invoke(Command(resume="x"), cfg()) == ["a1", "x", "b1"]


def test_async_swap_is_an_error_and_the_old_code_still_resumes(
    arun: Callable[[Any], Any],
) -> None:
    saver = InMemorySaver()
    ran: list[str] = []

    @task
    async def a(x: int) -> str:
        ran.append("a")
        return f"a{x}"

    @task
    async def b(x: int) -> str:
        ran.append("b")
        return f"b{x}"

    def version(first: Any, second: Any) -> Any:
        @entrypoint(checkpointer=saver)
        async def wf(n: int) -> list[Any]:
            got = [await first(n), await second(n)]
            return [*got, interrupt("ok?")]

        return wf

    v1, v2 = version(a, b), version(b, a)
    arun(v1.ainvoke(1, cfg()))
    with pytest.raises(NondeterminismError):
        arun(v2.ainvoke(Command(resume="y"), cfg()))
    assert arun(v1.ainvoke(Command(resume="y"), cfg())) == ["a1", "b1", "y"]
    assert ran == ["a", "b"]


# patched / deprecate_patch


def test_patched_is_false_for_threads_recorded_before_the_patch(saver: Saver) -> None:
    log = Log()
    a, b, c = log.tasks()
    v1 = record(saver, lambda n: [a(n).result(), b(n).result()])
    v1.invoke(1, cfg("old"))

    def with_patch(n: int) -> list[Any]:
        got = [a(n).result()]
        got.append(c(n).result() if patched("use-c") else b(n).result())
        return got

    v2 = record(saver, with_patch)
    v2.invoke(1, cfg("new"))
    log.ran.clear()
    assert v2.invoke(Command(resume="y"), cfg("old"))["got"] == ["a1", "b1"]
    assert v2.invoke(Command(resume="y"), cfg("new"))["got"] == ["a1", "c1"]
    assert log.ran == []


def test_patch_decided_true_stays_true_on_replay(saver: Saver) -> None:
    log = Log()
    _, b, c = log.tasks()
    seen: list[bool] = []

    def with_patch(n: int) -> list[Any]:
        flag = patched("p")
        seen.append(flag)
        return [(c if flag else b)(n).result()]

    wf = record(saver, with_patch)
    wf.invoke(1, cfg())
    wf.invoke(Command(resume="y"), cfg())
    assert seen == [True, True]
    assert log.ran == [("c", 1)]


def test_deprecate_patch_consumes_the_marker_and_records_nothing_new(saver: Saver) -> None:
    log = Log()
    a, b, c = log.tasks()

    def with_patch(n: int) -> list[Any]:
        return [c(n).result() if patched("p") else b(n).result(), a(n).result()]

    record(saver, with_patch).invoke(1, cfg("marked"))

    def deprecated(n: int) -> list[Any]:
        deprecate_patch("p")
        return [c(n).result(), a(n).result()]

    v3 = record(saver, deprecated)
    log.ran.clear()
    assert v3.invoke(Command(resume="y"), cfg("marked"))["got"] == ["c1", "a1"]
    assert log.ran == []
    v3.invoke(1, cfg("fresh"))
    assert v3.invoke(Command(resume="y"), cfg("fresh"))["got"] == ["c1", "a1"]
    assert log.ran == [("c", 1), ("a", 1)]


def test_patched_outside_a_run_and_with_a_bad_id() -> None:
    with pytest.raises(RuntimeError, match=r"patched\(\)"):
        patched("x")

    @entrypoint(checkpointer=InMemorySaver())
    def wf(n: int) -> bool:
        return patched(n)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="non-empty string"):
        wf.invoke(1, cfg())


# failures


def test_handled_task_failure_is_replayed_not_rerun(saver: Saver) -> None:
    attempts: list[int] = []

    @task
    def charge(x: int) -> int:
        attempts.append(x)
        raise KeyError(f"card {x} declined")

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> dict[str, Any]:
        try:
            charge(x).result()
            outcome = "charged"
        except KeyError as exc:
            outcome = f"handled {type(exc).__name__}: {exc}"
        return {"outcome": outcome, "answer": interrupt("ok?")}

    first = wf.invoke(7, cfg())
    assert "__interrupt__" in first
    out = wf.invoke(Command(resume="y"), cfg())
    assert out == {"outcome": "handled KeyError: 'card 7 declined'", "answer": "y"}
    assert attempts == [7]


class PaymentError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"payment failed with code {code}")
        self.code = code


def test_handled_failure_of_a_user_exception_keeps_its_class(saver: Saver) -> None:
    runs: list[int] = []

    @task
    def pay(x: int) -> int:
        runs.append(x)
        raise PaymentError(x)

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> str:
        try:
            pay(x).result()
            msg = "paid"
        except PaymentError as exc:
            msg = str(exc)
        interrupt("go?")
        return msg

    wf.invoke(3, cfg())
    assert wf.invoke(Command(resume=1), cfg()) == "payment failed with code 3"
    assert runs == [3]


def test_failure_that_ended_the_run_is_retried_on_the_next_invoke(saver: Saver) -> None:
    calls: list[int] = []

    @task
    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise ConnectionError("down")
        return x * 10

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        return int(flaky(x).result())

    with pytest.raises(ConnectionError):
        wf.invoke(4, cfg())
    assert wf.invoke(None, cfg()) == 40
    assert calls == [4, 4]


def test_unknown_exception_class_is_rebuilt_as_a_stand_in() -> None:
    from pregelkit.pregel._plan.replay import encode_failure, rebuild_failure

    record = encode_failure("t#1", PaymentError(5), handled=True)
    record[1] = "not_allowed_module"
    rebuilt = rebuild_failure(record)
    assert isinstance(rebuilt, ReplayedTaskError)
    assert rebuilt.type_name == "not_allowed_module.PaymentError"
    assert "code 5" in str(rebuilt)


# entrypoint retry


def test_entrypoint_retry_runs_a_finished_task_once(saver: Saver) -> None:
    charges: list[int] = []
    attempts = {"n": 0}

    @task
    def charge(x: int) -> str:
        charges.append(x)
        return f"receipt-{x}"

    @entrypoint(
        checkpointer=saver,
        retry_policy=RetryPolicy(
            retry_on=ValueError, max_attempts=3, initial_interval=0.001, jitter=False
        ),
    )
    def wf(x: int) -> str:
        receipt = charge(x).result()
        attempts["n"] += 1
        if attempts["n"] < 3:
            raise ValueError("email service down")
        return receipt

    assert wf.invoke(5, cfg()) == "receipt-5"
    assert charges == [5]
    assert attempts["n"] == 3


# resume and checkpoint ids


def test_resume_of_a_finished_thread_is_an_error(saver: Saver) -> None:
    ran: list[int] = []

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        ran.append(x)
        return x

    assert wf.invoke(1, cfg()) == 1
    with pytest.raises(NothingToResumeError, match="nothing in this thread is waiting"):
        wf.invoke(Command(resume="late"), cfg())
    assert ran == [1]
    assert wf.get_state(cfg()).values == 1


def test_resume_after_a_failure_without_interrupt_is_an_error(saver: Saver) -> None:
    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        wf.invoke(1, cfg())
    with pytest.raises(NothingToResumeError):
        wf.invoke(Command(resume="x"), cfg())


def test_unknown_checkpoint_id_is_an_error_and_the_thread_is_untouched(saver: Saver) -> None:
    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        return x + 1

    wf.invoke(1, cfg())
    before = [s.config for s in wf.get_state_history(cfg())]
    bad = "1ef00000-0000-6000-8000-000000000000"
    conf = {"configurable": {"thread_id": "t", "checkpoint_id": bad}}
    with pytest.raises(ValueError, match=bad):
        wf.invoke(5, conf)
    assert [s.config for s in wf.get_state_history(cfg())] == before
    assert wf.get_state(cfg()).values == 2


def test_checkpoint_ids_increase_when_the_clock_goes_back(
    saver: Saver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pregelkit._internal._ids as ids

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> int:
        return x

    wf.invoke(1, cfg())
    first = saver.get_tuple(cfg())
    assert first is not None
    # a fresh process whose clock is an hour behind
    monkeypatch.setattr(ids, "_last_ts", 0)
    now = ids.time.time_ns()
    monkeypatch.setattr(ids.time, "time_ns", lambda: now - 3600 * 10**9)
    wf.invoke(2, cfg())
    latest = saver.get_tuple(cfg())
    assert latest is not None
    assert latest.checkpoint["id"] > first.checkpoint["id"]
    assert wf.get_state(cfg()).values == 2


# state after a failed step


def test_get_state_after_two_writers_to_one_value() -> None:
    from pregelkit.channels.last_value import LastValue
    from pregelkit.pregel._graph.nodes import NodeBuilder
    from pregelkit.pregel.main import Pregel

    saver = InMemorySaver()
    one = NodeBuilder().subscribe_only("start").do(lambda x: x + 1).write_to("out")
    two = NodeBuilder().subscribe_only("start").do(lambda x: x + 2).write_to("out")
    graph = Pregel(
        nodes={"one": one, "two": two},
        channels={"start": LastValue(int), "out": LastValue(int)},
        input_channels="start",
        output_channels="out",
        checkpointer=saver,
    )
    with pytest.raises(InvalidUpdateError):
        graph.invoke(1, cfg())
    state = graph.get_state(cfg())
    assert "out" not in state.values  # the step that failed applied nothing
    assert sorted(state.next) == ["one", "two"]
    history = list(graph.get_state_history(cfg()))
    assert history


def test_get_state_after_a_reducer_raised() -> None:
    import operator

    from pregelkit.channels.binop import BinaryOperatorAggregate
    from pregelkit.channels.last_value import LastValue
    from pregelkit.pregel._graph.nodes import NodeBuilder
    from pregelkit.pregel.main import Pregel

    def picky(a: int, b: int) -> int:
        if b > 10:
            raise ValueError("too big")
        return operator.add(a, b)

    saver = InMemorySaver()
    node = NodeBuilder().subscribe_only("start").do(lambda x: x * 100).write_to("total")
    graph = Pregel(
        nodes={"n": node},
        channels={"start": LastValue(int), "total": BinaryOperatorAggregate(int, picky)},
        input_channels="start",
        output_channels="total",
        checkpointer=saver,
    )
    with pytest.raises(ValueError, match="too big"):
        graph.invoke(1, cfg())
    state = graph.get_state(cfg())
    assert state.next == ("n",)
    assert list(graph.get_state_history(cfg()))


def test_many_runs_of_identity_digest_are_stable() -> None:
    from pregelkit.pregel._plan.replay import call_identity

    x = call_identity("t", ({"b": [1, 2.5, None], "a": {3, 1}},), {"k": b"x"})
    y = call_identity("t", ({"a": {1, 3}, "b": [1, 2.5, None]},), {"k": b"x"})
    assert x == y and "#" in x
    assert call_identity("t", (1,), {}) != call_identity("t", ("1",), {})
    assert call_identity("t", (True,), {}) != call_identity("t", (1,), {})
    assert call_identity("t", (list(range(20_000)),), {}) == "t"


# attacks: other durabilities, async, fan-out, caches


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_refused_resume_saves_nothing_whatever_the_durability(durability: str) -> None:
    saver = InMemorySaver()
    log = Log()
    a, b, c = log.tasks()
    v1 = record(saver, lambda n: [a(n).result(), b(n).result()])
    v1.invoke(1, cfg(), durability=durability)  # type: ignore[arg-type]
    stored = {k: dict(v) for k, v in saver.writes.items()}
    history = [s.config for s in v1.get_state_history(cfg())]

    def fanned(n: int) -> list[Any]:
        first = a(n).result()  # matches the record
        futures = [c(i) for i in range(5)]  # the first of these does not
        return [first, *(f.result() for f in futures)]

    with pytest.raises(NondeterminismError):
        record(saver, fanned).invoke(
            Command(resume="y"),
            cfg(),
            durability=durability,  # type: ignore[arg-type]
        )
    assert [s.config for s in v1.get_state_history(cfg())] == history
    # all that is new is the answer given to the pending interrupt (kept, like
    # any resume value, so it survives a crash): no task record changed
    after = {k: dict(v) for k, v in saver.writes.items()}
    new = [
        (key, row[1]) for k, v in after.items() for key, row in v.items() if key not in stored[k]
    ]
    assert new in ([], [(("00000000-0000-0000-0000-000000000000", -4), "__resume__")])
    assert all(after[k][key] == row for k, v in stored.items() for key, row in v.items())
    log.ran.clear()
    assert v1.invoke(Command(resume="y"), cfg())["got"] == ["a1", "b1"]
    assert log.ran == []


def test_async_handled_failure_patched_and_retry(arun: Callable[[Any], Any]) -> None:
    saver = InMemorySaver()
    runs: list[str] = []
    attempts = {"n": 0}

    @task
    async def charge(x: int) -> str:
        runs.append(f"charge{x}")
        if x < 0:
            raise ValueError(f"negative amount {x}")
        return f"charged{x}"

    @entrypoint(
        checkpointer=saver,
        retry_policy=RetryPolicy(retry_on=OSError, max_attempts=2, initial_interval=0.001),
    )
    async def wf(x: int) -> list[Any]:
        got: list[Any] = [await charge(x)]
        try:
            await charge(-x)
        except ValueError as exc:
            got.append(str(exc))
        got.append(patched("p"))
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise OSError("flaky")
        got.append(interrupt("ok?"))
        return got

    first = arun(wf.ainvoke(2, cfg()))
    assert "__interrupt__" in first
    assert runs == ["charge2", "charge-2"]  # the retried attempt replayed both
    out = arun(wf.ainvoke(Command(resume="y"), cfg()))
    assert out == ["charged2", "negative amount -2", True, "y"]
    assert runs == ["charge2", "charge-2"]


def test_fan_out_with_handled_failures_replays_each(saver: Saver) -> None:
    runs: list[int] = []

    @task
    def risky(i: int) -> int:
        runs.append(i)
        if i % 2:
            raise ZeroDivisionError(f"odd {i}")
        return i

    @entrypoint(checkpointer=saver)
    def wf(n: int) -> list[Any]:
        futures = [risky(i) for i in range(n)]
        out: list[Any] = []
        for f in futures:
            try:
                out.append(f.result())
            except ZeroDivisionError as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return [*out, interrupt("ok?")]

    wf.invoke(4, cfg())
    assert sorted(runs) == [0, 1, 2, 3]
    out = wf.invoke(Command(resume="y"), cfg())
    assert out == [0, "ZeroDivisionError: odd 1", 2, "ZeroDivisionError: odd 3", "y"]
    assert sorted(runs) == [0, 1, 2, 3]


def test_failure_handled_inside_a_nested_task_is_replayed(saver: Saver) -> None:
    runs: list[str] = []

    @task
    def inner(x: int) -> int:
        runs.append("inner")
        raise LookupError("not found")

    @task
    def outer(x: int) -> str:
        try:
            inner(x).result()
            return "found"
        except LookupError:
            return interrupt("what now?")

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> str:
        return str(outer(x).result())

    wf.invoke(1, cfg())
    assert wf.invoke(Command(resume="skip"), cfg()) == "skip"
    assert runs == ["inner"]


def test_cache_hit_at_a_new_position_is_not_a_mismatch() -> None:
    from pregelkit.cache.memory import InMemoryCache
    from pregelkit.types import CachePolicy

    runs: list[Any] = []

    @task(cache_policy=CachePolicy(key_func=lambda x, note: str(x)))
    def lookup(x: int, note: str) -> int:
        runs.append((x, note))
        return x * 2

    saver, cache = InMemorySaver(), InMemoryCache()

    @entrypoint(checkpointer=saver, cache=cache)
    def wf(note: str) -> list[Any]:
        return [lookup(1, note).result(), interrupt("ok?")]

    wf.invoke("first", cfg("one"))
    wf.invoke("second", cfg("two"))  # a cache hit, with other arguments
    assert runs == [(1, "first")]
    assert wf.invoke(Command(resume="y"), cfg("two")) == [2, "y"]
    assert wf.invoke(Command(resume="y"), cfg("one")) == [2, "y"]
    assert runs == [(1, "first")]


def test_failure_with_unplain_arguments_keeps_its_message(saver: Saver) -> None:
    class Payload:
        def __repr__(self) -> str:
            return "<payload>"

    @task
    def parse(x: int) -> int:
        raise ValueError(Payload(), x)

    @entrypoint(checkpointer=saver)
    def wf(x: int) -> list[Any]:
        try:
            parse(x).result()
        except ValueError as exc:
            caught = str(exc)
        return [caught, interrupt("ok?")]

    first = wf.invoke(3, cfg())
    assert "__interrupt__" in first
    assert wf.invoke(Command(resume="y"), cfg()) == ["(<payload>, 3)", "y"]
