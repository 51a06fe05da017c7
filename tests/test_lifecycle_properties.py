"""Random sequences of actions on random small workflows: before and after
each action, the status ``pregelkit threads`` shows and what ``get_state``
says agree, and what the action does is what the lifecycle table
(docs/guides/lifecycle.md) says for the state the thread was in.

The actions are the table's (through the API or the CLI, at random), plus
a worker serving the queue, and a run stopped at a random update (its
reader leaves the stream, which stops the run as Ctrl-C does: what finished
is saved, the thread is left pending)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lifecycle_flows
from lifecycle_harness import TERMINAL, Harness, read_table
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.worker import Worker

TABLE = read_table()
ANSWERS = ("resume", "answer", "submit resume")
ACTIONS = ("run", "resume", "answer", "cancel", "uncancel", "delete", "submit", "submit resume")
_threads = itertools.count()


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    """A ``lifecycle_flows.varied`` spec: steps, maybe a question, maybe a failure."""
    steps = draw(st.integers(1, 3))
    spec: dict[str, Any] = {"steps": steps}
    if draw(st.booleans()):
        spec["ask"] = draw(st.integers(0, steps - 1))
    if draw(st.booleans()):
        spec["fail"] = draw(st.integers(0, steps - 1))
    return spec


steps = st.one_of(
    st.tuples(st.sampled_from(ACTIONS), st.sampled_from(["api", "cli"])),
    st.tuples(st.just("worker"), st.just("")),
    st.tuples(st.just("stop"), st.integers(0, 3).map(str)),
)


def agrees_with_get_state(status: str, snapshot: Any) -> bool:
    """What ``get_state`` shows for a thread ``threads`` lists as ``status``
    (docs/guides/lifecycle.md, "Reading the state from get_state")."""
    meta = snapshot.metadata
    stopped = (meta or {}).get("stopped")
    errors = any(t.error for t in snapshot.tasks)
    if status in ("queued", "running"):
        return True  # the queue's to tell
    if status in ("cancelled", "drained"):
        return stopped == status or (meta is None and status == "cancelled")
    if stopped is not None:
        return False
    if status == "interrupted":
        return bool(snapshot.interrupts)
    if status == "failed":
        return errors and not snapshot.interrupts
    if status == "done":
        return meta is not None and not snapshot.tasks
    if status == "pending":
        return bool(snapshot.tasks) and not snapshot.interrupts and not errors
    return False


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = str(tmp_path_factory.mktemp("lifecycle") / "random.sqlite")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        yield path, saver


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    spec=workflows(),
    first=st.sampled_from(["run", "submit", "stop"]),
    rest=st.lists(steps, max_size=7),
)
def test_random_sequences_agree_with_the_table(
    spec: dict[str, Any],
    first: str,
    rest: list[tuple[str, str]],
    database: tuple[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, saver = database
    harness = Harness(
        url,
        saver,
        lambda: capfd.readouterr(),
        entry="lifecycle_flows:varied",
        input=spec,
        strict=False,
    )
    thread = f"random-{next(_threads)}"
    start = (first, "api") if first != "stop" else ("stop", "1")
    history: list[str] = []
    for action, how in [start, *rest]:
        state = harness.status(thread)
        snapshot = harness.wf.get_state(harness.cfg(thread))
        if state is None:
            if history:
                return  # deleted: the thread is new again, out of the table
            state = "new"
        else:
            assert agrees_with_get_state(state, snapshot), (history, state, snapshot)
        history.append(f"{state}: {action} {how}")
        if action == "worker":
            Worker([lifecycle_flows.varied], saver, concurrency=2).run_until_idle()
            after = harness.status(thread)
            assert after not in ("queued", "running"), (history, after)
            continue
        saved = harness.saved(thread)
        if action == "stop":
            if state != "new" and TABLE[state]["run"][0] != "runs":
                continue
            _stop_at(harness, thread, int(how))
            assert harness.status(thread) in ("pending", *TERMINAL), (history, saved)
            continue
        if state == "new":
            if action not in ("run", "submit"):
                continue
            expected = "runs" if action == "run" else "queues"
        elif state == "cancelled" and how == "cli" and action in ANSWERS:
            # `pregelkit resume` is the explicit ask: the saved state's row
            # (cancelled before it ever ran, nothing was saved to resume)
            expected = TABLE[saved][action][1] if saved is not None else "refused"
        else:
            expected = TABLE[state][action][0 if how == "api" else 1]
        run_before = harness.run_id(thread)
        if how == "cli" and run_before is not None and expected in ("continues", "answers"):
            expected = "queues"  # its runs go through the queue: so does its resume
        result = harness.act(how, action, thread)
        why = harness.disagreement(expected, state, thread, result, run_before)
        assert why is None, (history, expected, why)


def _stop_at(harness: Harness, thread: str, cut: int) -> None:
    """Run from the input and leave the stream after ``cut`` updates."""
    lifecycle_flows.RAN.clear()
    try:
        for seen, _ in enumerate(
            harness.wf.stream(harness.input, harness.cfg(thread), stream_mode="updates")
        ):
            if seen >= cut:
                break
    except ValueError:
        pass  # the step that fails once failed: the thread is failed
