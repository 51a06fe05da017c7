"""What a running task can reach: its run, its interrupts, its calls.

One ``RunContext`` is shared by every task of a loop run; each task gets a
small ``TaskScope``. Code inside a task finds its scope through a context
variable (``pregelkit._internal._current.CURRENT``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_TASK_ID,
    CONFIG_KEY_THREAD_ID,
    NS_END,
    NS_SEP,
    RESUME,
)
from pregelkit._internal._ids import interrupt_id
from pregelkit._internal._typing import MISSING
from pregelkit.errors import GraphInterrupt
from pregelkit.types import Interrupt

if TYPE_CHECKING:
    from pregelkit.pregel._exec.remote import RemoteExecutor
    from pregelkit.pregel._exec.runner import PregelRunner
    from pregelkit.pregel._exec.stop import RunStop
    from pregelkit.pregel._exec.timeout import Attempt
    from pregelkit.types import PregelExecutableTask


def mapped_key(resume_map: dict[str, Any], iid: str, ns: str, index: int) -> str | None:
    """The key of ``resume_map`` that answers call ``index`` (id ``iid``) of
    the task at ``ns``, if any. A thread saved before each call had its own
    id waits at a later call under its namespace's id, the first call's; the
    map was checked to name only pending ids, so that id is this call's (an
    answer re-sent for the first call never gets here)."""
    if iid in resume_map:
        return iid
    if index:
        legacy = interrupt_id(ns)
        if legacy in resume_map:
            return legacy
    return None


class ResumeSlot:
    """The run's one global resume value: consumed by the first interrupt that needs it.

    Shared with nested graphs, so a resume given to the parent reaches the
    subgraph task that is waiting for it.
    """

    __slots__ = ("_lock", "value")

    def __init__(self, value: Any = MISSING) -> None:
        self.value = value
        self._lock = threading.Lock()

    def take(self) -> Any:
        with self._lock:
            value, self.value = self.value, MISSING
            return value


class RunContext:
    """Per-run facts every task needs; filled by the loop, read by tasks."""

    __slots__ = (
        "__weakref__",
        "base_config",
        "cache",
        "channel_names",
        "checkpoint_id",
        "checkpointer",
        "durability",
        "emit",
        "emit_at",
        "emit_raw",
        "executor",
        "is_async",
        "previous",
        "resume_map",
        "resume_slot",
        "resume_writes",
        "resuming",
        "run_id",
        "runner",
        "stale_park",
        "stop",
        "store",
        "stream_modes",
        "stream_subgraphs",
        "wait_saves",
        "workflow",
    )

    def __init__(
        self,
        *,
        base_config: dict[str, Any],
        channel_names: frozenset[str],
        emit: Callable[[str, Any], None] | None,
        stream_modes: frozenset[str],
        is_async: bool,
        store: Any = None,
        checkpointer: Any = None,
        cache: Any = None,
    ) -> None:
        self.base_config = base_config
        self.channel_names = channel_names
        self.emit = emit
        self.stream_modes = stream_modes
        self.is_async = is_async
        self.store = store
        self.checkpointer = checkpointer
        self.cache = cache
        self.previous: Any = None
        self.resume_map: dict[str, Any] | None = None
        self.resume_slot = ResumeSlot()
        self.resume_writes: dict[str, list[Any]] = {}
        self.runner: PregelRunner | None = None
        """The runner of the run's steps: task calls are scheduled through it."""
        self.stop: RunStop | None = None
        """The run's ``pregel._exec.stop.RunStop``, shared with its nested runs."""
        self.resuming = False
        self.checkpoint_id: str | None = None
        self.emit_raw: Callable[[tuple[str, ...], str, Any], None] | None = None
        self.emit_at: Callable[[tuple[str, ...], str, Any], None] | None = None
        """Emits in a namespace below the run's (set with ``emit``)."""
        self.stream_subgraphs = False
        self.executor: RemoteExecutor | None = None
        """Where task bodies run (``pregel._exec.remote``); None: here, on the pool."""
        self.run_id: str | None = None
        """Set when the run records or traces attempts; nested runs share it."""
        self.durability = "async"
        """When the run saves (``invoke(durability=...)``): its children save so too."""
        self.stale_park = False
        """The run resumed a thread whose earlier run died while it waited in
        its process: that run's queue row is this one's to take over or drop."""
        self.workflow: str | None = None
        """The name of the root graph (what a worker resumes the thread with)."""
        self.wait_saves: Callable[[], Any] | None = None
        """Waits until the saver calls the run made so far are made (async
        run: returns an awaitable): a durable wait's queue row must not be
        saved before the writes it resumes from (``waits.parked``)."""


class TaskScope:
    """One task's counters and resume values; the target of ``interrupt()``."""

    __slots__ = (
        "_config",
        "_ns",
        "attempt",
        "attempt_number",
        "call_counter",
        "call_prefix",
        "caller",
        "first_attempt_time",
        "interrupt_counter",
        "parent_ns",
        "resume",
        "run",
        "step",
        "task",
    )

    def __init__(
        self, run: RunContext, task: PregelExecutableTask, parent_ns: str, step: int
    ) -> None:
        self.run = run
        self.task = task
        self.parent_ns = parent_ns
        """The namespace of the graph the task runs in (its own is ``ns``)."""
        self._ns: str | None = None
        self.step = step
        self.call_counter = 0
        self.interrupt_counter = 0
        self.call_prefix: tuple[Any, bytes, str] | None = None
        """What the ids of this task's calls share: (the step's planner, the
        bytes hashed before a call's position, this task's path as a string);
        kept by ``_plan.algo.call_position``."""
        saved = run.resume_writes.get(task.id)
        self.resume: list[Any] = list(saved) if saved else []
        self._config: dict[str, Any] | None = None
        self.attempt_number = 1
        self.first_attempt_time: float | None = None
        self.attempt: Attempt | None = None
        """The bounded attempt this task runs under, if any."""
        self.caller: TaskScope | None = None
        """The scope of the task that called this one (a functional-API call)."""

    @property
    def ns(self) -> str:
        """The task's checkpoint namespace, made when first asked for (by its
        config, an interrupt, a nested graph): most task calls never ask."""
        ns = self._ns
        if ns is None:
            task, parent = self.task, self.parent_ns
            ns = (
                f"{parent}{NS_SEP}{task.name}{NS_END}{task.id}"
                if parent
                else f"{task.name}{NS_END}{task.id}"
            )
            self._ns = ns
        return ns

    @property
    def config(self) -> dict[str, Any]:
        """The task's config, built on first use: most tasks never ask for it."""
        if self._config is None:
            base = self.run.base_config
            task = self.task
            metadata = dict(base.get("metadata", {}))
            thread_id = base.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
            if thread_id is not None:
                metadata["thread_id"] = thread_id  # as LangGraph's task metadata
            self._config = {
                **base,
                "metadata": {
                    **metadata,
                    "langgraph_step": self.step,
                    "langgraph_node": task.name,
                    "langgraph_triggers": tuple(task.triggers),
                    "langgraph_path": task.path[:3],
                    "langgraph_checkpoint_ns": self.ns,
                },
                CONF: {
                    **base.get(CONF, {}),
                    CONFIG_KEY_TASK_ID: task.id,
                    CONFIG_KEY_CHECKPOINT_NS: self.ns,
                },
            }
        return self._config

    def next_call_index(self) -> int:
        idx = self.call_counter
        self.call_counter = idx + 1
        return idx

    def interrupt(self, value: Any, *, response_schema: dict[str, Any] | None = None) -> Any:
        """Return this interrupt's resume value, or stop the task with GraphInterrupt."""
        idx = self.interrupt_counter
        self.interrupt_counter = idx + 1
        if idx < len(self.resume):
            return self.resume[idx]
        # the id is made only here, for a call not yet answered: a run that
        # never interrupts, or replays its answers, never hashes one
        iid = Interrupt.from_ns(value, self.ns, index=idx, response_schema=response_schema)
        answer = self.answer(iid.id, idx)
        if answer is MISSING:
            raise GraphInterrupt((iid,))
        self.resume.append(answer)
        self.task.writes.append((RESUME, list(self.resume)))
        return answer

    def answer(self, iid: str, index: int = 0) -> Any:
        """The resume value given for interrupt ``iid``, the task's ``index``-th
        (by id, else the run's one value), taken so that no other interrupt gets
        it; MISSING if none."""
        run = self.run
        answer = MISSING
        if run.resume_map is not None:
            key = mapped_key(run.resume_map, iid, self.ns, index)
            if key is not None:
                answer = run.resume_map.pop(key, MISSING)
        if answer is MISSING:
            answer = run.resume_slot.take()
        return answer

    def heartbeat(self) -> None:
        """Progress: restart the ``idle_timeout`` clock of the running attempt."""
        attempt = self.attempt
        if attempt is not None:
            attempt.heartbeat()

    def runtime(self) -> Any:
        from pregelkit.runtime import ExecutionInfo, RunControl, Runtime

        stop = self.run.stop
        thread_id = self.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
        control = None
        if stop is not None:
            control = stop.control
            if control is None:
                control = stop.control = RunControl()
                control._attach(stop)
        return Runtime(
            context=self.config.get("context"),
            store=self.run.store,
            stream_writer=self.stream_writer,
            previous=self.run.previous,
            heartbeat=self.heartbeat,
            control=control,
            execution_info=ExecutionInfo(
                checkpoint_id=self.run.checkpoint_id or "",
                checkpoint_ns=self.ns,
                task_id=self.task.id,
                thread_id=None if thread_id is None else str(thread_id),
                run_id=self.run.run_id,
                node_attempt=self.attempt_number,
                node_first_attempt_time=self.first_attempt_time or time.time(),
            ),
        )

    def stream_writer(self, chunk: Any) -> None:
        attempt = self.attempt
        if attempt is not None:
            if attempt.is_dead():
                return  # the attempt timed out: its body may run on, but writes nothing
            attempt.progress()
        run = self.run
        emit = run.emit
        if emit is not None and "custom" in run.stream_modes:
            if self.caller is None:
                emit("custom", chunk)
            elif run.emit_at is not None:
                run.emit_at(self.callers(), "custom", chunk)

    def callers(self) -> tuple[str, ...]:
        """The namespace a call's custom chunks carry, as in LangGraph: its
        callers, outermost first, each ``name:task id``."""
        names = []
        scope = self.caller
        while scope is not None:
            names.append(f"{scope.task.name}:{scope.task.id}")
            scope = scope.caller
        return tuple(reversed(names))
