"""The run core stepped by hand: no thread, no saver call, no event loop.

Each test drives ``pregel._core.loop.PregelLoop`` as a performer would: it takes
the effects the core returns or yields, checks them, and feeds back what
making them would answer (a loaded checkpoint is built from the effects of
an earlier run). The saver handed to the core refuses every call, so an
effect made behind the test's back fails it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Generator, Sequence
from typing import Any

import pytest

from pregelkit._internal._constants import CALL, CONF, INTERRUPT, NULL_TASK_ID, RESUME, RETURN
from pregelkit.cache.memory import InMemoryCache
from pregelkit.channels import LastValue
from pregelkit.checkpoint.base import CheckpointTuple
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import (
    GraphInterrupt,
    NondeterminismError,
    NothingToResumeError,
    StorageError,
)
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel._core.effects import (
    Effect,
    LoadCheckpoint,
    OpenThread,
    ReadCache,
    Save,
    SaveCheckpoint,
    SaveWrites,
    WriteCache,
)
from pregelkit.pregel._core.loop import PregelLoop
from pregelkit.pregel._graph.call import Call, FnSpec
from pregelkit.types import CachePolicy, Command, Interrupt, PregelExecutableTask

THREAD = {CONF: {"thread_id": "t"}}


class NoIO:
    """A saver the core may ask what it is, never to do anything."""

    has_thread_control = False
    records_attempts = False

    def __init__(self) -> None:
        self.get_next_version = InMemorySaver().get_next_version

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the core called the saver's {name}")


class NoCache(InMemoryCache):
    """A cache the core may hold, never call."""

    def get(self, keys: Any) -> Any:
        raise AssertionError("the core read the cache")

    def set(self, pairs: Any) -> None:
        raise AssertionError("the core wrote the cache")


def graph() -> Pregel:
    return Pregel(
        nodes={"double": NodeBuilder().subscribe_only("a").do(lambda v: v).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )


def core(
    app: Pregel,
    inp: Any,
    *,
    durability: str = "sync",
    cache: Any = None,
    events: list[tuple[str, Any]] | None = None,
) -> PregelLoop:
    sink = None if events is None else (lambda ns, mode, payload: events.append((mode, payload)))
    return PregelLoop(
        inp,
        graph=app,
        config={**THREAD, CONF: dict(THREAD[CONF])},
        stream=sink,
        stream_modes=frozenset({"values", "updates"}),
        checkpointer=NoIO(),  # type: ignore[arg-type]
        store=None,
        cache=cache,
        durability=durability,
        interrupt_before=(),
        interrupt_after=(),
        is_async=False,
    )


def start(run: PregelLoop, saved: CheckpointTuple | None = None) -> tuple[list[Effect], PregelLoop]:
    """Step the core's start-up: answer its load with ``saved``; the effects it yielded."""
    steps: Generator[Effect, Any, None] = run.start()
    seen: list[Effect] = []
    answer = None
    while True:
        try:
            effect = steps.send(answer)
        except StopIteration:
            return seen, run
        seen.append(effect)
        answer = saved if isinstance(effect, LoadCheckpoint) else None


def saved_state(run: PregelLoop, saves: Sequence[Save]) -> CheckpointTuple:
    """What a saver answers after making ``saves``: the core's last
    checkpoint with the writes saved since."""
    last = [s for s in saves if isinstance(s, SaveCheckpoint)][-1]
    pending = [(s.task_id, c, v) for s in saves if isinstance(s, SaveWrites) for c, v in s.writes]
    config = {CONF: {**THREAD[CONF], "checkpoint_ns": "", "checkpoint_id": last.checkpoint["id"]}}
    return CheckpointTuple(config, run.checkpoint, last.metadata, None, pending)


def test_an_input_is_saved_then_each_step_saves_its_writes_then_its_checkpoint() -> None:
    events: list[tuple[str, Any]] = []
    run = core(graph(), 3, events=events)
    effects, run = start(run)
    opening, load, first = effects
    # a root run with a saver opens its thread first: its lock and its gate in one call
    assert isinstance(opening, OpenThread) and (opening.thread_id, opening.lock) == ("t", True)
    assert isinstance(load, LoadCheckpoint) and load.config[CONF]["thread_id"] == "t"
    assert load.config is opening.config  # what open_thread may read ahead
    assert isinstance(first, SaveCheckpoint) and first.wait == "sync"
    assert first.metadata["source"] == "input" and first.metadata["step"] == -1
    assert first.checkpoint["channel_values"] == {"a": 3}
    assert run.tick() and [t.name for t in run.tasks.values()] == ["double"]
    (task,) = run.tasks.values()
    (save,) = run.put_writes(task.id, [("b", 3)])
    assert isinstance(save, SaveWrites)
    assert (save.task_id, save.writes, save.wait) == (task.id, [("b", 3)], "sync")
    assert save.who == f"task 'double' (id {task.id})"
    assert save.config[CONF]["checkpoint_id"] == first.checkpoint["id"]
    task.writes.append(("b", 3))
    (step,) = run.after_tick()
    assert isinstance(step, SaveCheckpoint) and step.metadata["step"] == 0
    assert step.versions.keys() == {"b"} and step.checkpoint["channel_values"] == {"b": 3}
    assert not run.tick() and run.status == "done"
    assert run.finish(None) == (False, [])
    assert events == [("updates", {"double": 3}), ("values", 3)]


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_durability_is_the_cores_decision(durability: str) -> None:
    _, run = start(core(graph(), 3, durability=durability))
    run.tick()
    (task,) = run.tasks.values()
    writes = run.put_writes(task.id, [("b", 3)])
    task.writes.append(("b", 3))
    after = run.after_tick()
    run.tick()
    _, at_exit = run.finish(None)
    if durability == "async":
        assert [(type(e), e.wait) for e in [*writes, *after]] == [
            (SaveWrites, "async"),
            (SaveCheckpoint, "async"),
        ]
        assert at_exit == []
    else:  # nothing saved until the run ends, then the last checkpoint and the writes it keeps
        assert list(writes) == [] and after == []
        assert [type(e) for e in at_exit] == [SaveCheckpoint]
        checkpoint = at_exit[0]
        assert isinstance(checkpoint, SaveCheckpoint) and checkpoint.metadata["step"] == 0
        assert checkpoint.versions.keys() == {"a", "b"}


def test_an_interrupt_is_saved_and_a_resume_answers_it() -> None:
    app = graph()
    _, run = start(core(app, 1))
    run.tick()
    (task,) = run.tasks.values()
    asked = Interrupt(value="why?", id="0" * 32)
    saves = [*run.put_writes(task.id, [(INTERRUPT, (asked,))])]
    assert run.interrupts == [asked]
    suppress, effects = run.finish(GraphInterrupt((asked,)))
    assert suppress and effects == []
    saved = saved_state(run, [*saves, SaveCheckpoint({}, run.checkpoint, {"step": -1}, {}, "sync")])

    # the resume: checked against the saved interrupt, then saved as the input's
    effects, again = start(core(app, Command(resume="because")), saved)
    _, _, resume = effects
    assert isinstance(resume, SaveWrites) and resume.task_id == NULL_TASK_ID
    assert resume.writes == [(RESUME, "because")] and resume.wait == "sync"
    assert again.run.resume_slot.value == "because" and again.run.resuming
    assert again.tick() and [t.id for t in again.tasks.values()] == [task.id]


def test_a_resume_with_nothing_waiting_is_refused_before_anything_is_saved() -> None:
    app = graph()
    _, run = start(core(app, 1))
    run.tick()
    (task,) = run.tasks.values()
    saves = [*run.put_writes(task.id, [("b", 1)])]
    task.writes.append(("b", 1))
    saves += run.after_tick()
    steps = core(app, Command(resume="late")).start()
    assert isinstance(next(steps), OpenThread)
    assert isinstance(steps.send(None), LoadCheckpoint)
    with pytest.raises(NothingToResumeError):
        steps.send(saved_state(run, saves))


def workflow() -> Pregel:
    @entrypoint(checkpointer=False)
    def wf(x: int) -> int:
        return x

    return wf


def call(name: str, *args: Any, cached: bool = False) -> Call:
    return Call(
        FnSpec(lambda *a: a),
        args,
        {},
        name=name,
        identity=name,
        cache_policy=CachePolicy() if cached else None,
    )


def entry_task(run: PregelLoop) -> PregelExecutableTask:
    assert run.tick()
    (task,) = run.tasks.values()
    return task


def test_a_resumed_run_replays_a_recorded_call_and_refuses_another_one_at_its_place() -> None:
    app = workflow()
    _, run = start(core(app, 1))
    parent = entry_task(run)
    pushed, effects = run.calls.accept(parent, 0, call("fetch", 1))
    assert effects == () and pushed.id in run.tasks  # a new call: a task of the step
    saves = [*run.put_writes(pushed.id, [(RETURN, 10), (CALL, "fetch")])]
    assert [(e.task_id, e.writes) for e in saves if isinstance(e, SaveWrites)] == [
        (pushed.id, [(RETURN, 10), (CALL, "fetch")])
    ]
    saved = saved_state(run, [*saves, SaveCheckpoint({}, run.checkpoint, {"step": -1}, {}, "sync")])

    _, again = start(core(app, None), saved)
    replayed, effects = again.calls.accept(entry_task(again), 0, call("fetch", 1))
    # a replayed call is its saved writes: no task is made for a call that does not run
    assert effects == () and replayed == [(RETURN, 10)] and pushed.id not in again.tasks

    _, other = start(core(app, None), saved)
    with pytest.raises(NondeterminismError):
        other.calls.accept(entry_task(other), 0, call("store", 1))


def test_a_retried_attempt_replays_the_calls_its_first_attempt_finished() -> None:
    _, run = start(core(workflow(), 1))
    parent = entry_task(run)
    first, _ = run.calls.accept(parent, 0, call("fetch", 1))
    assert run.calls.recorded(parent, 0) == (first.id, None)
    run.calls.records.remember(first.id, [(RETURN, 10), (CALL, "fetch")])
    assert run.calls.recorded(parent, 0) == (first.id, "fetch")
    second, effects = run.calls.accept(parent, 0, call("fetch", 1))
    assert effects == () and second == [(RETURN, 10)]


def test_a_cache_hit_is_the_tasks_result_and_is_saved_as_its_writes() -> None:
    app = workflow()
    _, run = start(core(app, 1, cache=NoCache()))
    parent = entry_task(run)
    pushed, effects = run.calls.accept(parent, 0, call("fetch", 1, cached=True))
    (read,) = effects
    assert isinstance(read, ReadCache) and pushed.id not in run.tasks
    hit, saves = run.calls.take(pushed, [(RETURN, 7), (CALL, "earlier")])
    assert hit and list(pushed.writes) == [(RETURN, 7), (CALL, "fetch")]
    (save,) = saves
    assert (
        isinstance(save, SaveWrites) and save.writes == list(pushed.writes) and save.wait == "async"
    )

    # a miss runs the call; its result goes to the cache, then to the saver
    miss, _ = run.calls.accept(parent, 1, call("fetch", 2, cached=True))
    assert run.calls.take(miss, None) == (False, ())
    fill, write = run.put_writes(miss.id, [(RETURN, 9), (CALL, "fetch")])
    assert isinstance(fill, WriteCache) and isinstance(write, SaveWrites)
    (key,) = fill.pairs
    assert fill.fresh[key] == [(RETURN, 9), (CALL, "fetch")]  # served to a same-run call
    twin, effects = run.calls.accept(parent, 2, call("fetch", 2, cached=True))
    assert list(twin.writes) == [(RETURN, 9), (CALL, "fetch")]
    assert [type(e) for e in effects] == [SaveWrites]


def test_a_finished_runs_core_goes_at_its_end_not_with_the_cyclic_gc() -> None:
    """The core's parts hold no reference back to it: in a cycle, every
    run's state (checkpoint, channels, tasks) would stay until a collection."""

    @task(cache_policy=CachePolicy())
    def one(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=InMemorySaver(), cache=InMemoryCache())
    def main(x: int) -> int:
        return one(x).result() + one(x).result()

    def cores() -> int:
        return sum(1 for obj in gc.get_objects() if type(obj) is PregelLoop)

    main.invoke(1, THREAD)
    gc.collect()
    gc.disable()
    try:
        before = cores()
        for i in range(5):
            main.invoke(i, {CONF: {"thread_id": f"t{i}"}})
        deadline = time.monotonic() + 5
        # the last run's core may be held a while longer (its executor's poll)
        while (left := cores() - before) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        gc.enable()
    assert left <= 1


def test_a_failed_save_stops_the_run_naming_what_was_not_saved() -> None:
    _, run = start(core(graph(), 3, durability="async"))
    run.tick()
    (task,) = run.tasks.values()
    (save,) = run.put_writes(task.id, [("b", 3)])
    # the performer made it and it failed; the step's checkpoint is then skipped
    run.faults.record(StorageError("disk full"), f"the writes of {save.who}")
    run.faults.skip("the checkpoint of step 0")
    with pytest.raises(StorageError) as failed:
        run.after_tick()
    assert "disk full" in str(failed.value)
    assert failed.value.not_saved == [
        f"the writes of task 'double' (id {task.id})",
        "the checkpoint of step 0",
    ]
    with pytest.raises(StorageError):
        run.check_saved()
