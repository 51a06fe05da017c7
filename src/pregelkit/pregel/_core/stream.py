"""What a run tells its caller: its stream parts.

``StreamOutput`` shapes every stream part a run emits (values, updates,
task starts and results, checkpoints, debug, interrupts) and sends it to
the caller's sink; nested runs relay theirs to the parent's stream. The
sink is in memory (the driver's queue), so emitting is not an effect of
the core: the part is handed the sink when the run is built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    EVENTS,
    INTERRUPT,
)
from pregelkit._internal._ids import utc_now_iso
from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.checkpoint.base import copy_checkpoint
from pregelkit.pregel._plan.algo import apply_writes, tasks_to_show
from pregelkit.pregel._plan.io import (
    map_output_updates,
    read_channels,
    task_result_event,
    task_start_event,
)
from pregelkit.types import Interrupt, PregelExecutableTask

if TYPE_CHECKING:
    from pregelkit.pregel._core.loop import PregelLoop

__all__ = ["Emit", "StreamOutput", "checkpoint_event", "tee"]

Emit = Callable[[tuple[str, ...], str, Any], None]


def tee(
    local: Emit | None, local_modes: frozenset[str], relay: Emit, relay_modes: frozenset[str]
) -> Emit:
    """An emitter sending each event to the sinks whose modes want it."""

    def emit(ns: tuple[str, ...], mode: str, payload: Any) -> None:
        if local is not None and mode in local_modes:
            local(ns, mode, payload)
        if mode in relay_modes:
            relay(ns, mode, payload)

    return emit


_WRITES_SHOWN = frozenset((EVENTS, "updates", "tasks", "debug"))
"""The modes a task's writes are streamed in (``StreamOutput.writes``)."""


class StreamOutput:
    """The stream parts of one run, sent to its caller's sink (and a parent's)."""

    __slots__ = (
        "_ids",
        "_lock",
        "interrupts",
        "modes",
        "ns",
        "output_keys",
        "relay",
        "shows_starts",
        "shows_writes",
        "sink",
    )

    def __init__(
        self,
        sink: Emit | None,
        modes: frozenset[str],
        ns: tuple[str, ...],
        relay: tuple[Emit, frozenset[str]] | None,
        output_keys: str | Sequence[str],
    ) -> None:
        # ``relay``: a nested run's parent stream, and the modes it wants
        self.sink, self.modes, self.ns, self.relay = sink, modes, ns, relay
        self.output_keys = output_keys
        self.shows_starts = "tasks" in modes or "debug" in modes
        """Whether task starts are streamed (asked for every replayed call)."""
        self.shows_writes = sink is not None and not modes.isdisjoint(_WRITES_SHOWN)
        """Whether ``writes`` streams anything of a task's writes but its
        interrupts (asked for every finished task call)."""
        self.interrupts: list[Interrupt] = []
        """The run's interrupts, each once."""
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def emit(self, mode: str, payload: Any) -> None:
        if mode in self.modes and self.sink is not None:
            self.sink(self.ns, mode, payload)

    def emit_at(self, below: tuple[str, ...], mode: str, payload: Any) -> None:
        if mode in self.modes and self.sink is not None:
            self.sink(self.ns + below, mode, payload)

    def forward(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        if self.relay is not None:  # a nested run's parts go up, not to its caller
            relay, modes = self.relay
            if mode in modes:
                relay(ns, mode, payload)
        elif mode in self.modes and self.sink is not None:
            self.sink(ns, mode, payload)

    def interrupted(
        self, interrupts: Sequence[Interrupt], channels: Mapping[str, BaseChannel[Any, Any, Any]]
    ) -> None:
        """Interrupts raised (each told once), with the values beside them."""
        fresh = []
        with self._lock:
            for i in interrupts:
                if i.id not in self._ids:
                    self._ids.add(i.id)
                    self.interrupts.append(i)
                    fresh.append(i)
        if fresh and self.sink is not None:
            self.emit("updates", {INTERRUPT: tuple(fresh)})
            if "values" in self.modes:
                # as LangGraph: the values as they stand with the interrupts
                # beside them, or the interrupts alone for a single channel
                current = read_channels(channels, self.output_keys)
                if isinstance(current, dict):
                    # a copy: a single channel's value may be the user's dict
                    self.emit("values", {**current, INTERRUPT: tuple(fresh)})
                else:
                    self.emit("values", {INTERRUPT: tuple(fresh)})

    def writes(
        self,
        task: PregelExecutableTask,
        writes: Sequence[tuple[str, Any]],
        cached: bool,
        channels: Mapping[str, BaseChannel[Any, Any, Any]],
        stream_keys: str | Sequence[str],
        step: int,
    ) -> None:
        """A task's writes: its update, its result, or its interrupts."""
        interrupted = writes[0][0] == INTERRUPT
        if interrupted:
            self.interrupted([i for c, v in writes if c == INTERRUPT for i in v], channels)
        if self.sink is None:
            return
        modes = self.modes
        if EVENTS in modes and not cached and writes[0][0] != ERROR and not interrupted:
            # before the update it makes, as LangGraph's on_chain_end comes first
            self.emit(EVENTS, ("end", task, writes))
        if "updates" in modes and writes[0][0] != ERROR and not interrupted:
            # the run's output keys, as LangGraph: an invoke's updates hold
            # its output channels, a stream's its stream channels
            update = map_output_updates(self.output_keys, task, writes, cached)
            if update is not None:
                self.emit("updates", update)
        if not cached and ("tasks" in modes or "debug" in modes):
            event = task_result_event(task, writes, stream_keys)
            self.emit("tasks", event)
            self.debug("task_result", event, step)

    def started(self, task: PregelExecutableTask, step: int) -> None:
        event = task_start_event(task)
        self.emit("tasks", event)
        self.debug("task", event, step)

    def debug(self, kind: str, payload: Any, step: int) -> None:
        if "debug" in self.modes:
            self.emit(
                "debug",
                {"step": step, "timestamp": utc_now_iso(), "type": kind, "payload": payload},
            )


def interrupted_values(run: PregelLoop) -> Any:
    """At an interrupt, as LangGraph: the values with the writes of the
    step's tasks that finished applied (to copies: the run saves nothing
    more), when they changed an output channel; else MISSING."""
    if not any(t.writes for t in run.tasks.values()):
        return MISSING
    channels = {k: c.copy() for k, c in run.channels.items()}
    updated = apply_writes(
        copy_checkpoint(run.checkpoint),
        channels,
        run.tasks.values(),
        run.lineage.next_version,
        run.graph.trigger_to_nodes,
    )
    keys = (run.output_keys,) if isinstance(run.output_keys, str) else run.output_keys
    if updated.isdisjoint(keys):
        return MISSING
    return read_channels(channels, run.output_keys)


def checkpoint_event(run: PregelLoop, tasks: Iterable[Any] | None) -> dict[str, Any]:
    """The checkpoint the next step starts from, as LangGraph streams it
    when it plans that step: with the tasks planned from it (``tasks``, or
    planned here), their interrupts and results so far."""
    graph = run.graph
    if tasks is None:
        # the tasks this checkpoint leads to, as get_state() would show them
        tasks = tasks_to_show(graph, run.checkpoint, run.channels, run.step, run.ns).values()
    interrupts: dict[str, list[dict[str, Any]]] = {}
    for tid, chan, value in run.checkpoint_pending_writes:
        if chan == INTERRUPT:
            interrupts.setdefault(tid, []).extend(
                {"value": i.value, "id": i.id, "response_schema": i.response_schema} for i in value
            )
    keys = (run.output_keys,) if isinstance(run.output_keys, str) else run.output_keys
    listed = []
    for t in tasks:
        entry: dict[str, Any] = {"id": t.id, "name": t.name}
        result = [(c, v) for c, v in getattr(t, "writes", ()) if c in keys]
        if result:
            entry["result"] = dict(result)
        entry["interrupts"] = tuple(interrupts.get(t.id, ()))
        entry["state"] = None
        listed.append(entry)
    parent = run.prev_checkpoint_config
    parent_id = None if parent is None else parent.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    return {
        "config": _config_for(run, run.checkpoint["id"]),
        "parent_config": None if parent_id is None else _config_for(run, parent_id),
        "values": read_channels(run.channels, graph.stream_channels_asis),
        "metadata": dict(run.checkpoint_metadata),
        "next": [t["name"] for t in listed],
        "tasks": listed,
    }


def _config_for(run: PregelLoop, checkpoint_id: str) -> dict[str, Any]:
    """A checkpoint's config as LangGraph streams it: its keys in
    LangGraph's order, so that a program printing it prints the same."""
    thread_id = run.checkpoint_config[CONF].get(CONFIG_KEY_THREAD_ID)
    return {
        CONF: {
            CONFIG_KEY_CHECKPOINT_NS: run.ns,
            # a string, as the saver stores it (a UUID thread id included)
            CONFIG_KEY_THREAD_ID: None if thread_id is None else str(thread_id),
            CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
        }
    }
