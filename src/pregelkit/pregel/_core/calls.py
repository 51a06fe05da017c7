"""Task calls (the functional API): what each call of a running task becomes.

A resumed run finds, among the saved pending writes, the writes of tasks
that finished (replayed instead of run again), the records of the task
calls they made (a call at the same position with the same identity is
replayed, another one is a ``NondeterminismError``) and the input's own
writes. ``CallRecords`` keeps them for one step.

``TaskCalls``, a part of the run core, decides each call: its saved writes
(a replay), a cache hit, or a new task of the step; and gives the step's
tasks the cache answers their writes. Like the core it makes no I/O: it
returns the effects (cache reads, saves) a performer makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CALL, ERROR, INTERRUPT, NULL_TASK_ID, RESUME, SCHEDULED
from pregelkit.pregel._core.effects import CacheKey, ReadCache, Save, SaveWrites
from pregelkit.pregel._core.lanes import writer_name
from pregelkit.pregel._graph.call import Call
from pregelkit.pregel._plan.algo import (
    Planner,
    call_position,
    is_done_write,
    legacy_push_call_id,
    prepare_push_call,
    push_call_id,
    task_path_str,
)
from pregelkit.pregel._plan.replay import check_ended, identity_of, replays
from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    from pregelkit.pregel._core.cache import TaskCache
    from pregelkit.pregel._core.failed_saves import RunFaults
    from pregelkit.pregel._core.records import AttemptRecords
    from pregelkit.pregel._core.stream import StreamOutput
    from pregelkit.pregel._exec.stop import RunStop

__all__ = ["CallRecords", "TaskCalls"]

Writes = list[tuple[str, Any]]


class CallRecords:
    """The saved writes and call records of the step a run resumes."""

    __slots__ = ("done", "null", "records")

    def __init__(self) -> None:
        self.done: dict[str, list[tuple[str, Any]]] = {}
        """The writes of tasks that finished, by task id."""
        self.records: dict[str, Any] = {}
        """The call records, by the id of the call."""
        self.null: list[tuple[str, Any]] = []
        """The writes of the input (a Command's update), applied with the step."""

    def index(self, pending: Sequence[tuple[str, str, Any]], resumes: dict[str, Any]) -> None:
        """Sort the saved ``pending`` writes; resume values go to ``resumes``."""
        done: dict[str, list[tuple[str, Any]]] = {}
        for tid, chan, value in pending:
            if chan == RESUME:
                if tid != NULL_TASK_ID:
                    resumes[tid] = value
            elif chan == CALL:
                self.records[tid] = value
            elif tid == NULL_TASK_ID:
                if chan not in (ERROR, INTERRUPT, SCHEDULED):
                    self.null.append((chan, value))
            elif is_done_write(chan):
                bucket = done.get(tid)
                if bucket is None:
                    done[tid] = [(chan, value)]
                else:
                    bucket.append((chan, value))
        self.done = done

    def clear(self) -> None:
        """The step is over (or a new input starts afresh)."""
        self.done = {}
        self.records = {}
        self.null = []

    def replayed(
        self,
        planner: Planner,
        parent: PregelExecutableTask,
        idx: int,
        call: Call,
        call_id: str,
    ) -> list[tuple[str, Any]] | None:
        """The saved writes of call ``idx`` of ``parent`` (id ``call_id``) if
        this is a replay of it; a call of another identity at a recorded
        position raises ``NondeterminismError``."""
        done = self.done.get(call_id)
        record = self.records.get(call_id)
        if done is not None and record == call.call_id:
            return done  # the common replay: the same call, finished (what ``replays`` says)
        if done is None and record is None and self.done:
            done = self.done.get(legacy_push_call_id(planner, parent, idx, call.name))
        if (done is not None or record is not None) and replays(
            done, record, call.call_id, idx, parent.name
        ):
            return done if done is not None else [(CALL, record)]
        return None

    def recorded(
        self, planner: Planner, parent: PregelExecutableTask, idx: int
    ) -> tuple[str, str | None]:
        """The id of the call ``parent`` makes at ``idx``, and the identity
        recorded there by the run this one resumes (None if nothing is)."""
        tid = push_call_id(planner, parent, idx)
        return tid, identity_of(self.records.get(tid))

    def remember(self, task_id: str, writes: list[tuple[str, Any]]) -> None:
        """A finished call, replayed if its caller runs again in this step (a
        retried attempt) instead of running twice."""
        done = [w for w in writes if w[0] != CALL]
        if done:
            self.done[task_id] = done
        self.records[task_id] = next((v for c, v in writes if c == CALL), None)


class TaskCalls:
    """The task calls of a run's steps, and its tasks the cache answers.

    Built once per run from the core's other parts; ``begin`` hands it what
    it needs of each step: a new call becomes one of the step's tasks, and
    a task's writes taken from the cache are saved like those of a task
    that ran (at the step's checkpoint, or at exit)."""

    __slots__ = (
        "at_exit",
        "attempts",
        "cached",
        "config",
        "faults",
        "is_async",
        "out",
        "pending",
        "planner",
        "records",
        "saved",
        "stop",
        "stream_keys",
        "tasks",
    )

    planner: Planner
    tasks: dict[str, PregelExecutableTask]
    config: dict[str, Any]
    pending: list[tuple[str, str, Any]]

    def __init__(
        self,
        cached: TaskCache,
        faults: RunFaults,
        stop: RunStop,
        attempts: AttemptRecords,
        out: StreamOutput,
        stream_keys: str | Sequence[str],
        is_async: bool,
        saved: bool,
        at_exit: bool,
    ) -> None:
        self.records = CallRecords()
        self.cached = cached
        self.faults = faults
        self.stop = stop
        self.attempts = attempts
        self.out = out
        self.stream_keys = stream_keys
        self.is_async = is_async
        self.saved = saved
        """The run has a saver."""
        self.at_exit = at_exit
        """It saves at exit (``durability="exit"``): writes wait in ``pending``."""

    def begin(
        self,
        planner: Planner,
        tasks: dict[str, PregelExecutableTask],
        config: dict[str, Any],
        pending: list[tuple[str, str, Any]],
    ) -> None:
        """A step starts: its facts, its tasks (where a new call goes), the
        config of its checkpoint and the core's pending writes."""
        self.planner = planner
        self.tasks = tasks
        self.config = config
        self.pending = pending

    def accept(
        self, parent: PregelExecutableTask, idx: int, call: Call
    ) -> tuple[PregelExecutableTask | Writes, Sequence[Save | ReadCache]]:
        """Create the task for a call made by a running task, with what the
        performer must do for it. A call whose writes were saved before (a
        replay) gets them back instead of a task: it will not run, and its
        caller needs only its result. A cache hit is a task holding its
        writes. A call with a cache key not answered from this run's fresh
        results comes with a ``ReadCache`` (the performer then hands the
        answer to ``take``; an async run's runner reads it later,
        ``alookup_call``). Once the run is asked to stop, no call starts (but for a suspend:
        ``RunStop.refuses_calls``)."""
        planner = self.planner
        faults = self.faults
        if faults.failure is not None:  # raise_if_failed, without its frame: once per call
            raise faults.error(planner.step)
        stop = self.stop
        if stop.reason is not None and stop.refuses_calls():
            raise stop.refuse(parent)
        position = call_position(planner, parent, idx)
        records = self.records
        if (records.done or records.records) and (
            replayed := records.replayed(planner, parent, idx, call, position[0])
        ) is not None:
            attempts = self.attempts
            if attempts.log is not None or attempts.hooks is not None or self.out.shows_starts:
                self._replayed(parent, idx, call, position, replayed)
            return replayed, _NONE
        pushed = prepare_push_call(planner, parent, idx, call, position, scoped=True)
        if pushed.cache_key is not None and self.cached.cache is not None:
            key = (pushed.cache_key.ns, pushed.cache_key.key)
            hit = self.cached.fresh.get(key)
            if hit:
                return pushed, self._take_cached(pushed, hit)
            if self.is_async:
                # the runner reads the cache with ``aget`` (``alookup_call``):
                # a sync read here would hold up the event loop
                return pushed, _NONE
            return pushed, [ReadCache([key])]
        self.tasks[pushed.id] = pushed  # _push_new, without its frame: once per call
        if self.out.shows_starts:
            self.out.started(pushed, planner.step)
        return pushed, _NONE

    def _replayed(
        self,
        parent: PregelExecutableTask,
        idx: int,
        call: Call,
        position: tuple[str, str],
        writes: Writes,
    ) -> None:
        """Record and stream a replayed call as a task that ended at once.
        Its task is made only for whom it is shown to (attempt hooks, the
        ``tasks`` and ``debug`` streams): the attempt log needs its id and name.
        (``accept`` asks only when one of them is there.)"""
        attempts = self.attempts
        out = self.out
        shown = out.shows_starts
        step = self.planner.step
        if attempts.hooks is not None or shown:
            pushed = prepare_push_call(self.planner, parent, idx, call, position, scoped=False)
            pushed.writes.extend(writes)
            attempts.instant(pushed, step, "replayed")
            if shown:
                # as LangGraph streams it: the call starts again, its result
                # comes from the record (no task_result event)
                out.started(pushed, step)
        elif attempts.log is not None:
            attempts.log.instant(position[0], call.name, step, "replayed")

    def key(self, pushed: PregelExecutableTask) -> tuple[CacheKey, Writes | None]:
        """The cache key of a call ``accept`` left unread, and the answer
        this run's fresh results give (None: read the cache)."""
        key = self.cached.key_of(pushed)
        assert key is not None
        return key, self.cached.fresh.get(key) or None

    def take(self, pushed: PregelExecutableTask, hit: Writes | None) -> tuple[bool, Sequence[Save]]:
        """The cache's answer for a call: a hit makes its writes the task's,
        a miss makes it a task of the step like any other."""
        if hit:
            return True, self._take_cached(pushed, hit)
        self._push_new(pushed)
        return False, _NONE

    def _take_cached(self, pushed: PregelExecutableTask, hit: Writes) -> Sequence[Save]:
        """A call answered by the cache. The cached writes carry the identity
        of the call that filled the cache; this position records this call."""
        writes = [w for w in hit if w[0] != CALL]
        call = pushed.proc
        assert type(call) is Call
        writes.append((CALL, call.call_id))
        pushed.writes.extend(writes)
        return self._cached(pushed, writes)

    def _push_new(self, pushed: PregelExecutableTask) -> PregelExecutableTask:
        self.tasks[pushed.id] = pushed
        if self.out.shows_starts:
            self.out.started(pushed, self.planner.step)
        return pushed

    def cache_hits(
        self, wanted: dict[CacheKey, PregelExecutableTask], found: dict[CacheKey, Writes]
    ) -> list[Save]:
        """The step's tasks the cache answered (``found``, the answer to
        ``ReadCache`` of ``wanted``) take its writes; returns their saves."""
        effects: list[Save] = []
        for task, writes in self.cached.hits(wanted, found):
            task.writes.extend(writes)
            effects.extend(self._cached(task, writes))
        return effects

    def _cached(self, task: PregelExecutableTask, writes: Writes) -> Sequence[Save]:
        """A task answered by the cache: streamed (marked cached), recorded
        as an attempt that did not run, and saved as the task's writes, so
        a replay needs no cache."""
        planner = self.planner
        self.out.writes(task, writes, True, planner.channels, self.stream_keys, planner.step)
        attempts = self.attempts
        if attempts.log is not None or attempts.hooks is not None:
            attempts.instant(task, planner.step, "cached")
        if not self.saved:
            return _NONE
        writes = list(task.writes)
        if self.at_exit:
            self.pending.extend((task.id, c, v) for c, v in writes)
            return _NONE
        path = task_path_str(task.path)
        who = writer_name(task, task.id)
        return (SaveWrites(self.config, writes, task.id, path, who, (), "async"),)

    def recorded(self, parent: PregelExecutableTask, idx: int) -> tuple[str, str | None]:
        """The id of the call ``parent`` makes at ``idx``, and the identity
        recorded there by the run this one resumes (None if nothing is)."""
        return self.records.recorded(self.planner, parent, idx)

    def ended(self, parent: PregelExecutableTask, calls: int) -> None:
        """``parent`` returned after ``calls`` calls: raise
        ``NondeterminismError`` if the run this one resumes recorded a call
        after them. A run that resumes nothing has no records and pays one
        dict check per task."""
        if self.records.records:
            check_ended(self.records.recorded(self.planner, parent, calls)[1], calls, parent.name)


_NONE: tuple[Save, ...] = ()
"""No effect."""
