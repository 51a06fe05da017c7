"""What a run tells its caller: the stream events of the loop.

``LoopEvents`` is a base of ``PregelLoop``: every event a run emits (values,
updates, task starts and results, checkpoints, debug, interrupts) is shaped
here, and nested runs relay theirs to the parent's stream.
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
from pregelkit.channels.base import BaseChannel
from pregelkit.checkpoint.base import Checkpoint, CheckpointMetadata, copy_checkpoint
from pregelkit.pregel._algo import Planner, apply_writes, prepare_next_tasks
from pregelkit.pregel._io import (
    map_output_updates,
    read_channels,
    task_result_event,
    task_start_event,
)
from pregelkit.pregel._read import PregelNode
from pregelkit.types import Interrupt, PregelExecutableTask

if TYPE_CHECKING:
    from pregelkit.pregel.main import Pregel

__all__ = ["Emit", "LoopEvents", "tee"]

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


class LoopEvents:
    """The events of one run, sent to its caller's stream (and a parent's)."""

    stream: Emit | None
    stream_modes: frozenset[str]
    stream_keys: Any
    output_keys: Any
    checkpoint_pending_writes: list[tuple[str, str, Any]]
    ns: str
    ns_tuple: tuple[str, ...]
    _relay: tuple[Emit, frozenset[str]] | None
    _lock: threading.Lock
    _interrupt_ids: set[str]
    interrupts: list[Interrupt]
    step: int
    graph: Pregel
    nodes: Mapping[str, PregelNode]
    channels: dict[str, BaseChannel[Any, Any, Any]]
    trigger_to_nodes: Mapping[str, Sequence[str]]
    checkpoint: Checkpoint
    checkpoint_metadata: CheckpointMetadata
    checkpoint_config: dict[str, Any]
    prev_checkpoint_config: dict[str, Any] | None
    tasks: dict[str, PregelExecutableTask]
    _next_version: Any

    def _emit(self, mode: str, payload: Any) -> None:
        if mode in self.stream_modes and self.stream is not None:
            self.stream(self.ns_tuple, mode, payload)

    def _emit_at(self, below: tuple[str, ...], mode: str, payload: Any) -> None:
        if mode in self.stream_modes and self.stream is not None:
            self.stream(self.ns_tuple + below, mode, payload)

    def _forward(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        if self._relay is not None:  # a nested run's events go up, not to its caller
            relay, modes = self._relay
            if mode in modes:
                relay(ns, mode, payload)
        elif mode in self.stream_modes and self.stream is not None:
            self.stream(ns, mode, payload)

    def _emit_interrupts(self, interrupts: Sequence[Interrupt]) -> None:
        fresh = []
        with self._lock:
            for i in interrupts:
                if i.id not in self._interrupt_ids:
                    self._interrupt_ids.add(i.id)
                    self.interrupts.append(i)
                    fresh.append(i)
        if fresh and self.stream is not None:
            self._emit("updates", {INTERRUPT: tuple(fresh)})
            if "values" in self.stream_modes:
                # as LangGraph: the values as they stand with the interrupts
                # beside them, or the interrupts alone for a single channel
                current = read_channels(self.channels, self.output_keys)
                if isinstance(current, dict):
                    # a copy: a single channel's value may be the user's dict
                    self._emit("values", {**current, INTERRUPT: tuple(fresh)})
                else:
                    self._emit("values", {INTERRUPT: tuple(fresh)})

    def _emit_interrupted_values(self) -> None:
        """At an interrupt, as LangGraph: the values with the writes of the
        step's tasks that finished applied (to copies: the run saves nothing
        more), when they changed an output channel."""
        if "values" not in self.stream_modes or not any(t.writes for t in self.tasks.values()):
            return
        channels = {k: c.copy() for k, c in self.channels.items()}
        updated = apply_writes(
            copy_checkpoint(self.checkpoint),
            channels,
            self.tasks.values(),
            self._next_version,
            self.trigger_to_nodes,
        )
        keys = (self.output_keys,) if isinstance(self.output_keys, str) else self.output_keys
        if not updated.isdisjoint(keys):
            self._emit("values", read_channels(channels, self.output_keys))

    def _output_writes(
        self, task: PregelExecutableTask, writes: Sequence[tuple[str, Any]], cached: bool
    ) -> None:
        interrupted = writes[0][0] == INTERRUPT
        if interrupted:
            self._emit_interrupts([i for c, v in writes if c == INTERRUPT for i in v])
        if self.stream is None:
            return
        modes = self.stream_modes
        if EVENTS in modes and not cached and writes[0][0] != ERROR and not interrupted:
            # before the update it makes, as LangGraph's on_chain_end comes first
            self._emit(EVENTS, ("end", task, writes))
        if "updates" in modes and writes[0][0] != ERROR and not interrupted:
            # the run's output keys, as LangGraph: an invoke's updates hold
            # its output channels, a stream's its stream channels
            update = map_output_updates(self.output_keys, task, writes, cached)
            if update is not None:
                self._emit("updates", update)
        if not cached and ("tasks" in modes or "debug" in modes):
            event = task_result_event(task, writes, self.stream_keys)
            self._emit("tasks", event)
            self._emit_debug("task_result", event)

    def _task_started(self, task: PregelExecutableTask) -> None:
        event = task_start_event(task)
        self._emit("tasks", event)
        self._emit_debug("task", event)

    def _emit_debug(self, kind: str, payload: Any, step: int | None = None) -> None:
        if "debug" in self.stream_modes:
            self._emit(
                "debug",
                {
                    "step": self.step if step is None else step,
                    "timestamp": utc_now_iso(),
                    "type": kind,
                    "payload": payload,
                },
            )

    def _emit_checkpoint(self, tasks: Iterable[PregelExecutableTask] | None = None) -> None:
        """Stream the checkpoint the next step starts from, as LangGraph does
        when it plans that step: with the tasks planned from it (``tasks``, or
        planned here), their interrupts and results so far."""
        if "checkpoints" in self.stream_modes or "debug" in self.stream_modes:
            event = self._checkpoint_event(tasks)
            self._emit("checkpoints", event)
            self._emit_debug("checkpoint", event, event["metadata"].get("step", self.step - 1))

    def _checkpoint_event(self, tasks: Iterable[Any] | None) -> dict[str, Any]:
        if tasks is None:
            # the tasks this checkpoint leads to, as get_state() would show them
            planner = Planner(
                checkpoint=self.checkpoint,
                processes=self.nodes,
                channels=self.channels,
                step=self.step,
                ns=self.ns,
                run=None,
                node_order=self.graph.node_order,
            )
            tasks = prepare_next_tasks(
                self.checkpoint,
                planner,
                for_execution=False,
                trigger_to_nodes=self.trigger_to_nodes,
            ).values()
        interrupts: dict[str, list[dict[str, Any]]] = {}
        for tid, chan, value in self.checkpoint_pending_writes:
            if chan == INTERRUPT:
                interrupts.setdefault(tid, []).extend(
                    {"value": i.value, "id": i.id, "response_schema": i.response_schema}
                    for i in value
                )
        keys = (self.output_keys,) if isinstance(self.output_keys, str) else self.output_keys
        listed = []
        for t in tasks:
            entry: dict[str, Any] = {"id": t.id, "name": t.name}
            result = [(c, v) for c, v in getattr(t, "writes", ()) if c in keys]
            if result:
                entry["result"] = dict(result)
            entry["interrupts"] = tuple(interrupts.get(t.id, ()))
            entry["state"] = None
            listed.append(entry)
        return {
            "config": self._config_for(self.checkpoint["id"]),
            "parent_config": self._parent_config(),
            "values": read_channels(self.channels, self.stream_keys),
            "metadata": dict(self.checkpoint_metadata),
            "next": [t["name"] for t in listed],
            "tasks": listed,
        }

    def _config_for(self, checkpoint_id: str) -> dict[str, Any]:
        """A checkpoint's config as LangGraph streams it: its keys in
        LangGraph's order, so that a program printing it prints the same."""
        conf = self.checkpoint_config[CONF]
        thread_id = conf.get(CONFIG_KEY_THREAD_ID)
        return {
            CONF: {
                CONFIG_KEY_CHECKPOINT_NS: self.ns,
                # a string, as the saver stores it (a UUID thread id included)
                CONFIG_KEY_THREAD_ID: None if thread_id is None else str(thread_id),
                CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
            }
        }

    def _parent_config(self) -> dict[str, Any] | None:
        parent = self.prev_checkpoint_config
        if parent is None:
            return None
        parent_id = parent.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
        return None if parent_id is None else self._config_for(parent_id)
