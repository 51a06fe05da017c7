"""The run core: one run's checkpoint, channels, step and pending writes.

``PregelLoop`` plans the steps of a run (``tick``, ``after_tick``,
``finish``) and records task writes (``put_writes``); its part ``calls``
decides task calls (``TaskCalls.accept``). It makes no I/O: where it needs a
saver, a cache or the thread's mark it returns effects (``_core.effects``),
or, to start, yields them (``start``) and is sent the answers. The
performers in ``_core.perform`` make them; a test can step the core with no
saver, thread or event loop.

Its parts are objects built here, each with its own state: the input
(``_core.input.RunInput``), task calls, their records and replay
(``_core.calls``), the cache (``_core.cache``), run control
(``_core.mark.ThreadMark``) and attempt records (``_core.records``), stream
output (``_core.stream``); ``_core.lineage`` holds the ids of its
checkpoints and how their channels are versioned, and ``_core.nested`` what
a nested run takes from its parent.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    EVENTS,
    INPUT,
    INTERRUPT,
    NS_SEP,
    NULL_TASK_ID,
    PREVIOUS,
)
from pregelkit._internal._current import CURRENT
from pregelkit._internal._ids import utc_now_iso, uuid6
from pregelkit._internal._typing import MISSING
from pregelkit.cache.base import BaseCache
from pregelkit.channels.base import BaseChannel
from pregelkit.checkpoint.base import (
    LATEST_VERSION,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    copy_checkpoint,
    empty_checkpoint,
)
from pregelkit.errors import GraphInterrupt, NondeterminismError
from pregelkit.pregel._core.cache import TaskCache
from pregelkit.pregel._core.calls import TaskCalls
from pregelkit.pregel._core.effects import (
    Effect,
    LoadCheckpoint,
    Save,
    SaveCheckpoint,
    SaveWrites,
    Wait,
)
from pregelkit.pregel._core.failed_saves import RunFaults
from pregelkit.pregel._core.input import RunInput
from pregelkit.pregel._core.lanes import writer_name
from pregelkit.pregel._core.lineage import Lineage
from pregelkit.pregel._core.mark import ThreadMark
from pregelkit.pregel._core.nested import inherit
from pregelkit.pregel._core.records import AttemptRecords
from pregelkit.pregel._core.stream import (
    Emit,
    StreamOutput,
    checkpoint_event,
    interrupted_values,
    tee,
)
from pregelkit.pregel._exec.stop import LETS_TASKS_FINISH, RunStop
from pregelkit.pregel._graph.call import Call
from pregelkit.pregel._graph.scope import RunContext, TaskScope
from pregelkit.pregel._plan.algo import (
    Planner,
    PregelTaskWrites,
    apply_writes,
    increment,
    prepare_next_tasks,
    should_interrupt,
    task_path_str,
)
from pregelkit.pregel._plan.io import read_channels
from pregelkit.types import Interrupt, PregelExecutableTask

if TYPE_CHECKING:
    from pregelkit.pregel._graph.protocol import RunGraph

__all__ = ["PregelLoop"]

Status = Literal["input", "pending", "done", "interrupt_before", "interrupt_after", "out_of_steps"]


class PregelLoop:
    """One run of a graph: input, supersteps, checkpoints, exit."""

    def __init__(
        self,
        input: Any,
        *,
        graph: RunGraph,
        config: dict[str, Any],
        stream: Emit | None,
        stream_modes: frozenset[str],
        checkpointer: BaseCheckpointSaver[Any] | None,
        store: Any,
        cache: BaseCache[Any] | None,
        durability: str,
        interrupt_before: Sequence[str] | str,
        interrupt_after: Sequence[str] | str,
        is_async: bool,
        stream_subgraphs: bool = False,
    ) -> None:
        self.graph = graph
        self.durability = durability
        self.status: Status = "input"
        self.tasks: dict[str, PregelExecutableTask] = {}
        self.updated_channels: set[str] | None = None
        self.checkpoint_pending_writes: list[tuple[str, str, Any]] = []
        parent = CURRENT.get()
        self.parent_scope: TaskScope | None = parent
        relay = None
        if parent is not None:
            config, checkpointer, store, cache, relay = inherit(
                parent, config, checkpointer, store, cache, graph.checkpointer is not False
            )
            # ``stream`` stays this run's own caller (a nested ``invoke`` reads its
            # output from it); when the parent streams subgraphs, events go to
            # the parent's stream as well, each sink getting its own modes.
            if relay is not None:
                stream = tee(stream, stream_modes, *relay)
                stream_modes = stream_modes | relay[1]
                stream_subgraphs = True
        self.cached = TaskCache(cache)
        self.input = RunInput(
            input,
            graph.input_channels,
            (interrupt_before, interrupt_after),
            parent is not None,
            parent is not None and parent.run.resuming,
        )
        conf = config.get(CONF, {})
        ns: str = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        self.out = StreamOutput(
            stream,
            stream_modes,
            tuple(ns.split(NS_SEP)) if ns else (),
            relay,
            graph.output_channels,
        )
        modes = self.out.modes
        self._checkpoints_shown = "checkpoints" in modes or "debug" in modes
        self.checkpointer = checkpointer
        thread_id = conf.get(CONFIG_KEY_THREAD_ID)
        self.faults = RunFaults(None if thread_id is None else str(thread_id))
        if checkpointer is not None and thread_id is None:
            raise ValueError(
                "this graph has a checkpointer, so it needs a thread id: pass "
                "config={'configurable': {'thread_id': '...'}}"
            )
        self.checkpoint_config: dict[str, Any] = {
            **config,
            CONF: {**conf, CONFIG_KEY_CHECKPOINT_NS: ns},
        }
        self.run = RunContext(
            base_config=config,
            channel_names=frozenset(graph.channels),
            emit=self.out.emit if stream is not None else None,
            stream_modes=stream_modes,
            is_async=is_async,
            store=store,
            checkpointer=checkpointer,
            cache=cache,
        )
        self.run.emit_raw = self.out.forward
        self.run.emit_at = self.out.emit_at if stream is not None else None
        self.run.stream_subgraphs = stream_subgraphs
        self.run.durability = durability
        self.run.workflow = parent.run.workflow if parent else getattr(graph, "name", None)
        self.run.executor = getattr(graph, "executor", None) or (
            parent.run.executor if parent else None
        )
        if parent is not None:
            self.run.resume_slot = parent.run.resume_slot
            self.run.resume_map = parent.run.resume_map
        # a nested run stops with the run it is part of
        stop = parent.run.stop if parent is not None else None
        self.run.stop = stop = RunStop() if stop is None else stop
        self.mark = ThreadMark(stop, config, checkpointer, parent is not None)
        self.attempts = AttemptRecords(
            checkpointer,
            None if thread_id is None else str(thread_id),
            ns,
            parent,
            self.run,
            starts=durability != "exit",
        )
        self.calls = TaskCalls(
            self.cached,
            self.faults,
            stop,
            self.attempts,
            self.out,
            graph.stream_channels_asis,
            is_async,
            checkpointer is not None,
            durability == "exit",
        )

    # what the core is asked about
    @property
    def config(self) -> dict[str, Any]:
        return self.run.base_config

    @property
    def ns(self) -> str:
        """The run's checkpoint namespace ("" for a root run)."""
        ns: str = self.checkpoint_config[CONF][CONFIG_KEY_CHECKPOINT_NS]
        return ns

    @property
    def is_nested(self) -> bool:
        return self.parent_scope is not None

    @property
    def run_stop(self) -> RunStop:
        """The run's stop, shared with its nested runs."""
        return self.mark.stop

    @property
    def wait(self) -> Wait:
        """How a save waits (at exit too: ``durability="exit"`` saves on the lane then)."""
        return "sync" if self.durability == "sync" else "async"

    @property
    def output_keys(self) -> str | Sequence[str]:
        return self.out.output_keys

    @property
    def interrupts(self) -> list[Interrupt]:
        return self.out.interrupts

    @property
    def prev_checkpoint_config(self) -> dict[str, Any] | None:
        return self.lineage.prev_config

    # start-up
    def start(self) -> Generator[Effect, Any, None]:
        """The run's start: open the thread (its lock, its mark), load its checkpoint (and
        the latest, when the caller names a past one), take the input
        (``RunInput`` says how) and save what it writes; the answers of
        reads are sent back (nothing is sent for a save)."""
        saved: CheckpointTuple | None = None
        newest: CheckpointTuple | None = None
        if self.checkpointer is not None:
            gate = yield self.mark.opening(self.checkpoint_config)
            if gate is not None:
                self.mark.opened(gate[0], gate[1], resuming=self.input.input is None)
                # a dead process's parked wait: this run takes it over (waits.parked)
                self.run.stale_park = gate[1] == "parked"
            saved = yield LoadCheckpoint(self.checkpoint_config)
            latest = self.input.latest_config(self.checkpoint_config)
            if saved is not None and latest is not None:
                newest = yield LoadCheckpoint(latest)
                saved = self.input.replay(saved, newest)
        self._setup(saved, newest)
        start = self.input.start(
            self.run,
            self.checkpoint["channel_versions"],
            self.checkpoint_pending_writes,
            self.calls.records.done,
            self.channels,
            self.checkpoint_metadata.get("source"),
        )
        for writes in (start.resume, start.update):
            if writes:
                yield from self.put_writes(NULL_TASK_ID, writes)
        if start.update:
            self.calls.records.null.extend(start.update)
        if start.input is None:
            self.updated_channels = yield from self._resume(start.forks)
        else:
            self.checkpoint_pending_writes = []
            self.calls.records.clear()
            self.run.resume_writes.clear()
            changed: set[str] = set()
            # no values chunk for the input itself: LangGraph shows values after
            # each step (and where a resumed run stands), not the input written
            self.updated_channels = self._apply(
                [PregelTaskWrites((), INPUT, start.input, ())], changed
            )
            if (checkpoint := self._put_checkpoint({"source": "input"}, changed)) is not None:
                yield checkpoint
        accepted = self.mark.accepted()
        if accepted is not None:
            yield accepted

    def _setup(self, saved: CheckpointTuple | None, latest: CheckpointTuple | None) -> None:
        """The run's state from the checkpoint it starts from (``saved``)."""
        asked = self.checkpoint_config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)
        if saved is None and asked and not self.is_nested:
            raise ValueError(
                f"checkpoint_id {asked!r} names no checkpoint of thread "
                f"{self.checkpoint_config[CONF].get(CONFIG_KEY_THREAD_ID)!r}: check the id "
                "(get_state_history lists them), or leave it out to resume the latest one"
            )
        if saved is None:
            saved = CheckpointTuple(self.checkpoint_config, empty_checkpoint(), {"step": -2})
        else:
            conf = self.checkpoint_config[CONF]
            self.checkpoint_config = {
                **self.checkpoint_config,
                # the thread id as the caller gave it (a UUID stays a UUID)
                CONF: {
                    **conf,
                    **saved.config.get(CONF, {}),
                    **{k: conf[k] for k in (CONFIG_KEY_THREAD_ID,) if k in conf},
                },
            }
        cp = saved.checkpoint
        self.checkpoint: Checkpoint = copy_checkpoint(cp)
        self.checkpoint_metadata: CheckpointMetadata = saved.metadata
        self.input.addressed = bool(asked) and not self.is_nested
        self.input.replays_past = latest is not None and latest.checkpoint["id"] != cp["id"]
        parents: dict[str, str] = dict(self.run.base_config.get(CONF, {}).get("checkpoint_map", {}))
        if self.parent_scope is not None:
            pconf = self.parent_scope.run.base_config.get(CONF, {})
            pns = pconf.get(CONFIG_KEY_CHECKPOINT_NS, "")
            if (pid := self.parent_scope.run.checkpoint_id) is not None:
                parents[pns] = pid
        saver = self.checkpointer
        self.lineage = lineage = Lineage(
            max(cp["id"], latest.checkpoint["id"] if latest else ""),
            cp["id"] if saved.pending_writes is not None else None,
            saved.parent_config,
            parents,
            saver.get_next_version if saver is not None else increment,
        )
        values = self.checkpoint["channel_values"]
        channels: dict[str, BaseChannel[Any, Any, Any]] = {}
        live = lineage.live_ephemeral
        for name, spec in self.graph.channels.items():
            c = spec.from_checkpoint(values.get(name, MISSING))
            c.key = name
            channels[name] = c
            if c.clears_on_step and c.is_available():
                live.add(name)
        self.channels = channels
        versions = self.checkpoint["channel_versions"]
        lineage.max_version = max(versions.values()) if versions else None
        self.step = int(saved.metadata.get("step", -2)) + 1
        recursion_limit = int(self.run.base_config.get("recursion_limit", 25))
        self.stop = self.step + recursion_limit + 1
        pending = list(saved.pending_writes or ())
        self.checkpoint_pending_writes = pending
        self.calls.records.index(pending, self.run.resume_writes)
        if PREVIOUS in channels and channels[PREVIOUS].is_available():
            self.run.previous = channels[PREVIOUS].get()
        self.run.checkpoint_id = self.checkpoint["id"]

    def _resume(self, forks: bool) -> Generator[Effect, Any, set[str] | None]:
        """Resuming: plan every node, as nothing says what changed last.

        ``forks``: the run goes on from a checkpoint the caller named (time
        travel), so it first saves a ``fork`` checkpoint, a copy of that one, as
        LangGraph does: the new branch starts there, and the named checkpoint's
        history stays as it was."""
        self.run.resuming = True
        versions = self.checkpoint["channel_versions"]
        self.checkpoint["versions_seen"][INTERRUPT] = dict(versions)
        if forks and (save := self._put_checkpoint({"source": "fork"}, set())) is not None:
            yield save
        if "values" in self.out.modes:
            # as LangGraph does: a resumed run first shows where it stands
            # (None, or an empty dict, when nothing is written yet)
            self.out.emit("values", read_channels(self.channels, self.output_keys))
        return None

    def _apply(self, tasks: Sequence[Any], changed: set[str]) -> set[str]:
        """Apply ``tasks``' writes; the channels updated (``changed``: whose version moved)."""
        lineage = self.lineage
        updated = apply_writes(
            self.checkpoint,
            self.channels,
            tasks,
            lineage.next_version,
            self.graph.trigger_to_nodes,
            live_ephemeral=lineage.live_ephemeral,
            changed=changed,
            max_version=lineage.max_version,
        )
        if changed:
            # max() of the changed versions, as a loop: a generator a step cost more
            versions = self.checkpoint["channel_versions"]
            top = None
            for c in changed:
                if c in versions and (top is None or versions[c] > top):
                    top = versions[c]
            lineage.max_version = top  # apply_writes versions every channel it changes
        return updated

    # steps
    def tick(self) -> bool:
        """Plan the next step; False when the run is over (done or out of steps)."""
        self.faults.raise_if_failed(self.step)
        if self.step > self.stop:
            self.status = "out_of_steps"
            self._emit_checkpoint()
            return False
        graph = self.graph
        planner = Planner(
            checkpoint=self.checkpoint,
            processes=graph.nodes,
            channels=self.channels,
            step=self.step,
            ns=self.ns,
            run=self.run,
            node_order=graph.node_order,
            retry_policy=graph.retry_policy,
            cache_policy=graph.cache_policy,
        )
        self.tasks = prepare_next_tasks(  # type: ignore[assignment]
            self.checkpoint,
            planner,
            for_execution=True,
            trigger_to_nodes=graph.trigger_to_nodes,
            updated_channels=self.updated_channels,
        )
        self.calls.begin(
            planner, self.tasks, self.checkpoint_config, self.checkpoint_pending_writes
        )
        self._emit_checkpoint(self.tasks.values())
        if not self.tasks:
            self.status = "done"
            return False
        self.status = "pending"
        done_writes = self.calls.records.done
        if done_writes:
            attempts = self.attempts
            listened = attempts.log is not None or attempts.hooks is not None
            for tid, task in self.tasks.items():
                if (done := done_writes.get(tid)) is not None:
                    task.writes.extend(done)
                    if listened:
                        attempts.instant(task, self.step, "replayed")
        before = self.input.interrupts[0]
        if before and should_interrupt(self.checkpoint, before, self.tasks.values()):
            self.status = "interrupt_before"
            raise GraphInterrupt()
        out = self.out
        if out.shows_starts:
            # every task of the step, as LangGraph: those a resume replays too
            for task in self.tasks.values():
                out.started(task, self.step)
        if done_writes and out.sink is not None:
            # as LangGraph: the updates of tasks whose saved writes a resume
            # takes instead of running them, marked cached
            keys = graph.stream_channels_asis
            for task in self.tasks.values():
                if task.writes:
                    out.writes(task, task.writes, True, self.channels, keys, self.step)
        if EVENTS in out.modes:
            out.emit(EVENTS, ("step", None, self.step))
        return True

    def pending(self) -> list[PregelExecutableTask]:
        """The step's tasks still to run (not replayed, not answered by the cache)."""
        pending = []  # a loop: a comprehension's function costs more than a step's few tasks
        for t in self.tasks.values():
            if not t.writes:
                pending.append(t)
        return pending

    def after_tick(self) -> list[Save]:
        """Finish the step: apply its writes; returns the saves of its
        buffered attempt records and of the new checkpoint."""
        self.faults.raise_if_failed(self.step)
        tasks: list[Any] = list(self.tasks.values())
        records = self.calls.records
        if records.null:
            tasks.append(PregelTaskWrites((), INPUT, records.null, ()))
        changed: set[str] = set()
        self.updated_channels = self._apply(tasks, changed)
        out = self.out
        keys = out.output_keys
        if "values" in out.modes and not self.updated_channels.isdisjoint(
            [keys] if isinstance(keys, str) else keys
        ):
            out.emit("values", read_channels(self.channels, keys))
        self.checkpoint_pending_writes = []
        records.clear()
        self.run.resume_writes.clear()
        self.run.resuming = False
        finished = self.tasks
        self.tasks = {}
        effects: list[Save] = []
        wait: Wait = "sync" if self.durability == "sync" else "async"
        if self.durability != "exit" and (rows := self.attempts.buffered(wait)) is not None:
            effects.append(rows)
        if (save := self._put_checkpoint({"source": "loop"}, changed)) is not None:
            effects.append(save)
        after = self.input.interrupts[1]
        if after and should_interrupt(self.checkpoint, after, finished.values()):
            self.status = "interrupt_after"
            self._emit_checkpoint()
        return effects

    def _emit_checkpoint(self, tasks: Iterable[PregelExecutableTask] | None = None) -> None:
        """Stream the checkpoint the next step starts from (``checkpoint_event``)."""
        out = self.out
        if "checkpoints" in out.modes or "debug" in out.modes:
            event = checkpoint_event(self, tasks)
            out.emit("checkpoints", event)
            out.debug("checkpoint", event, event["metadata"].get("step", self.step - 1))

    def go_on(self) -> None:
        """After the step's saves are made: an ``interrupt_after`` node ran."""
        if self.status == "interrupt_after":
            raise GraphInterrupt()

    def _put_checkpoint(
        self, metadata: CheckpointMetadata, changed: set[str]
    ) -> SaveCheckpoint | None:
        if self.checkpointer is None and not self._checkpoints_shown:
            # nothing saves or shows this checkpoint: the versions it would
            # hold are the ones already kept, and its id would only name the
            # step's tasks, whose ids hold the step already. The run's first
            # checkpoint stands for all its steps (no id, time or values a step)
            self.step += 1
            return None
        lineage = self.lineage
        metadata["step"] = self.step
        metadata["parents"] = lineage.parents
        values = self.checkpoint["channel_values"]
        channels = self.channels
        for chan in changed:
            v = channels[chan].checkpoint()
            if v is MISSING:
                values.pop(chan, None)
            else:
                values[chan] = v
        lineage.unsaved |= changed
        self.checkpoint = Checkpoint(
            v=LATEST_VERSION,
            id=uuid6(clock_seq=self.step, after=lineage.last_id),
            ts=utc_now_iso(),
            channel_values=values,
            channel_versions=self.checkpoint["channel_versions"],
            versions_seen=self.checkpoint["versions_seen"],
        )
        self.checkpoint_metadata = metadata
        self.run.checkpoint_id = lineage.last_id = self.checkpoint["id"]
        save = None
        if self.checkpointer is not None and self.durability != "exit":
            save = self._save_checkpoint()
        self.step += 1
        return save

    def _save_checkpoint(self) -> SaveCheckpoint:
        cp = self.checkpoint
        versions = cp["channel_versions"]
        values = cp["channel_values"]
        lineage = self.lineage
        # loops rather than comprehensions: each of those made a function and
        # a frame, twice a run, for the one or two channels a step changes
        new_versions = {}
        new_values = {}
        for k in lineage.unsaved:
            if k in versions:
                new_versions[k] = versions[k]
                if k in values:
                    new_values[k] = values[k]
        lineage.unsaved = set()
        seen = {}
        for k, v in cp["versions_seen"].items():
            seen[k] = dict(v)
        snapshot = Checkpoint(
            v=cp["v"],
            id=cp["id"],
            ts=cp["ts"],
            channel_values=new_values,
            channel_versions=dict(versions),
            versions_seen=seen,
        )
        config = self.checkpoint_config
        lineage.prev_config = config if config[CONF].get(CONFIG_KEY_CHECKPOINT_ID) else None
        self.checkpoint_config = {
            **config,
            CONF: {**config[CONF], CONFIG_KEY_CHECKPOINT_ID: cp["id"]},
        }
        lineage.saved_id = cp["id"]
        metadata = dict(self.checkpoint_metadata)
        run_meta = self.run.base_config.get("metadata")
        if run_meta:
            for k, v in run_meta.items():
                if not k.startswith("__") and isinstance(v, (str, int, float, bool)):
                    metadata.setdefault(k, v)
        wait: Wait = "sync" if self.durability == "sync" else "async"
        return SaveCheckpoint(config, snapshot, metadata, new_versions, wait)

    # writes
    def put_writes(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> Sequence[Save]:
        """Record a task's writes: in memory and on the stream; returns their
        saves (to the cache, then to the saver, the last effect)."""
        if not writes:
            return _NONE
        stop = self.mark.stop
        if stop.reason is not None and (
            task_id in stop.refused
            or (writes[0][0] == ERROR and stop.reason not in LETS_TASKS_FINISH)
            or stop.abandoned
        ):
            return _NONE  # a task cut short by the stop (or by what stopping did to it)
        log = self.attempts.log
        ok = writes[0][0] not in (ERROR, INTERRUPT)
        if log is not None and not ok:
            log.end_with(task_id, writes)
        if task_id == NULL_TASK_ID:
            chans = {c for c, _ in writes}
            self.checkpoint_pending_writes = [
                w
                for w in self.checkpoint_pending_writes
                if not (w[0] == NULL_TASK_ID and w[1] in chans)
            ]
        if task_id == NULL_TASK_ID or (self.durability == "exit" and self.checkpointer):
            # only "exit" durability saves them later; otherwise they are in
            # the saver already and keeping them would only feed the GC
            self.checkpoint_pending_writes.extend([(task_id, c, v) for c, v in writes])
        fill = None
        task = self.tasks.get(task_id)
        if task is not None:
            out = self.out
            if out.shows_writes or writes[0][0] == INTERRUPT:  # else it streams nothing
                out.writes(
                    task, writes, False, self.channels, self.graph.stream_channels_asis, self.step
                )
            if ok and task.cache_key is not None and self.cached.cache is not None:
                fill = self.cached.write(task, list(writes))
            if type(task.proc) is Call:
                # a finished call writes no channel, so after_tick has nothing to
                # apply: forget it now rather than keep every call of the run alive
                self.tasks.pop(task_id, None)
        elif writes[0][0] == INTERRUPT:
            interrupts = [i for c, v in writes if c == INTERRUPT for i in v]
            self.out.interrupted(interrupts, self.channels)
        if self.checkpointer is None or self.durability == "exit":
            if log is not None and ok:
                log.end(task_id, "ok")  # saved at exit
            return _NONE if fill is None else (fill,)
        path = (task.path_str or task_path_str(task.path)) if task is not None else ""
        save = SaveWrites(
            self.checkpoint_config,
            list(writes),
            task_id,
            path,
            writer_name(task, task_id),
            () if log is None else log.end_ok(task_id) if ok else log.take(),
            "sync" if self.durability == "sync" else "async",
        )
        return (save,) if fill is None else (fill, save)

    def check_saved(self) -> None:
        """Raise the run's storage failure, if a save has failed: asked before
        every task body starts (``raise_if_failed``, without its frame)."""
        faults = self.faults
        if faults.failure is not None:
            raise faults.error(self.step)

    # exit
    def finish(self, exc: BaseException | None) -> tuple[bool, list[Save]]:
        """Decide what exiting means: whether to swallow ``exc``, and the
        saves the run still owes (its writes, with ``durability="exit"``)."""
        effects: list[Save] = []
        wait = self.wait
        if (rows := self.attempts.at_exit(exc, wait)) is not None:
            effects.append(rows)
        if isinstance(exc, NondeterminismError):
            # nothing this resume did is saved: the old code can still resume
            return False, effects
        done = self.status == "done"
        if (mark := self.mark.at_exit(exc, done, wait)) is not None:
            effects.append(mark)
        if self.checkpointer is not None and self.durability == "exit":
            lineage = self.lineage
            if lineage.saved_id != self.checkpoint["id"] or lineage.unsaved:
                effects.append(self._save_checkpoint())
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for tid, chan, value in self.checkpoint_pending_writes:
                by_task.setdefault(tid, []).append((chan, value))
            for tid, writes in by_task.items():
                task = self.tasks.get(tid)
                path = (task.path_str or task_path_str(task.path)) if task is not None else ""
                who = writer_name(task, tid)
                effects.append(SaveWrites(self.checkpoint_config, writes, tid, path, who, (), wait))
        if isinstance(exc, GraphInterrupt):
            out = self.out
            if (
                not self.is_nested
                and out.sink is not None
                and "values" in out.modes
                and (values := interrupted_values(self)) is not MISSING
            ):
                out.emit("values", values)
            if exc.interrupts:
                out.interrupted(exc.interrupts, self.channels)
            elif not out.interrupts:
                out.emit("updates", {INTERRUPT: ()})
            return not self.is_nested, effects
        return False, effects


_NONE: tuple[Save, ...] = ()
"""No effect."""
