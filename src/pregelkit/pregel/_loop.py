"""The loop: drives supersteps and is the only place that talks to savers.

``PregelLoop`` holds every decision of a run (input, planning, writes,
checkpoints, exit). The sync and async subclasses only say how a saver,
cache or lane call is made: directly or awaited.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from pregelkit._internal._constants import (
    CALL,
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
    RESUME,
    SCHEDULED,
)
from pregelkit._internal._ids import utc_now_iso, uuid6
from pregelkit._internal._scope import CURRENT
from pregelkit._internal._threads import on_loop
from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.checkpoint.base import (
    LATEST_VERSION,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from pregelkit.errors import GraphInterrupt, NondeterminismError
from pregelkit.pregel._algo import (
    Planner,
    PregelTaskWrites,
    apply_writes,
    increment,
    is_done_write,
    prepare_next_tasks,
    should_interrupt,
    task_path_str,
)
from pregelkit.pregel._call import Call
from pregelkit.pregel._control import (
    DRAINED,
)
from pregelkit.pregel._executor import AsyncBackgroundExecutor, BackgroundExecutor
from pregelkit.pregel._faults import RunFaults, asave_now, save_now
from pregelkit.pregel._io import read_channels
from pregelkit.pregel._loop_attempts import LoopAttempts
from pregelkit.pregel._loop_calls import LoopCalls
from pregelkit.pregel._loop_control import LoopControl
from pregelkit.pregel._loop_events import Emit, tee
from pregelkit.pregel._loop_input import LoopInput
from pregelkit.pregel._persist import (
    AsyncSerialLane,
    Awaited,
    SerialLane,
    aput_writes,
    put_writes,
    writer_name,
)
from pregelkit.pregel._scope import RunContext, TaskScope
from pregelkit.types import Interrupt, PregelExecutableTask

if TYPE_CHECKING:
    from pregelkit.pregel.main import Pregel

__all__ = ["AsyncPregelLoop", "PregelLoop", "SyncPregelLoop"]

Status = Literal["input", "pending", "done", "interrupt_before", "interrupt_after", "out_of_steps"]


class PregelLoop(LoopInput, LoopControl, LoopCalls, LoopAttempts):
    """One run of a graph: input, supersteps, checkpoints, exit."""

    def __init__(
        self,
        input: Any,
        *,
        graph: Pregel,
        config: dict[str, Any],
        stream: Emit | None,
        stream_modes: frozenset[str],
        checkpointer: BaseCheckpointSaver[Any] | None,
        store: Any,
        cache: Any,
        durability: str,
        interrupt_before: Sequence[str] | str,
        interrupt_after: Sequence[str] | str,
        is_async: bool,
        stream_subgraphs: bool = False,
    ) -> None:
        self.input = input
        self.graph = graph
        self.nodes = graph.nodes
        self.specs = graph.channels
        self.trigger_to_nodes = graph.trigger_to_nodes
        self.input_keys = graph.input_channels
        self.output_keys = graph.output_channels
        self.stream_keys = graph.stream_channels_asis
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.durability = durability
        self.is_async = is_async
        self.status: Status = "input"
        self.interrupts: list[Interrupt] = []
        self._interrupt_ids: set[str] = set()
        self.output: Any = None
        self.tasks: dict[str, PregelExecutableTask] = {}
        self.updated_channels: set[str] | None = None
        self.live_ephemeral: set[str] = set()
        self._unsaved: set[str] = set()
        self._done_writes: dict[str, list[tuple[str, Any]]] = {}
        self._call_records: dict[str, Any] = {}
        self._null_writes: list[tuple[str, Any]] = []
        self.checkpoint_pending_writes: list[tuple[str, str, Any]] = []
        self.addressed = False
        """The caller named the checkpoint this run starts from."""
        self.replays_past = False
        """The run starts from a checkpoint the thread has moved past."""
        self._lock = threading.Lock()
        self._fresh: dict[tuple[Any, str], list[tuple[str, Any]]] = {}
        """Results of this run on their way to the cache (written in the
        background): a same-run call with the same key is served from here."""
        self._relay: tuple[Emit, frozenset[str]] | None = None

        parent = CURRENT.get()
        self.parent_scope: TaskScope | None = parent
        self.is_nested = parent is not None
        if parent is not None:
            parent_conf = parent.run.base_config.get(CONF, {})
            conf = {**config.get(CONF, {})}
            for key in (CONFIG_KEY_THREAD_ID, "checkpoint_map"):
                if key in parent_conf and key not in conf:
                    conf[key] = parent_conf[key]
            conf[CONFIG_KEY_CHECKPOINT_NS] = parent.ns
            conf.pop(CONFIG_KEY_CHECKPOINT_ID, None)
            config = {**parent.run.base_config, **config, CONF: conf}
            if checkpointer is None and graph.checkpointer is not False:
                checkpointer = parent.run.checkpointer
            store = store if store is not None else parent.run.store
            cache = cache if cache is not None else parent.run.cache
            # ``stream`` stays this run's own caller (a nested ``invoke`` reads its
            # output from it); when the parent streams subgraphs, events go to
            # the parent's stream as well, each sink getting its own modes.
            if parent.run.emit_raw is not None and parent.run.stream_subgraphs:
                relay = (parent.run.emit_raw, parent.run.stream_modes)
                self._relay = relay
                stream = tee(stream, stream_modes, *relay)
                stream_modes = stream_modes | relay[1]
                stream_subgraphs = True
        self.config = config
        conf = config.get(CONF, {})
        self.ns: str = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        self.ns_tuple: tuple[str, ...] = tuple(self.ns.split(NS_SEP)) if self.ns else ()
        self.checkpointer = checkpointer
        self._keep_writes = checkpointer is not None and durability == "exit"
        thread_id = conf.get(CONFIG_KEY_THREAD_ID)
        self.faults = RunFaults(None if thread_id is None else str(thread_id))
        self.store = store
        self.cache = cache
        self.stream = stream
        self.stream_modes = stream_modes
        self.stream_subgraphs = stream_subgraphs
        if checkpointer is not None and conf.get(CONFIG_KEY_THREAD_ID) is None:
            raise ValueError(
                "this graph has a checkpointer, so it needs a thread id: pass "
                "config={'configurable': {'thread_id': '...'}}"
            )
        self.checkpoint_config: dict[str, Any] = {
            **config,
            CONF: {**conf, CONFIG_KEY_CHECKPOINT_NS: self.ns},
        }
        self.run = RunContext(
            base_config=config,
            channel_names=frozenset(self.specs),
            emit=self._emit if stream is not None else None,
            stream_modes=stream_modes,
            is_async=is_async,
            store=store,
            checkpointer=checkpointer,
            cache=cache,
        )
        self.run.emit_raw = self._forward
        self.run.emit_at = self._emit_at if stream is not None else None
        self.run.stream_subgraphs = stream_subgraphs
        self.run.executor = getattr(graph, "executor", None) or (
            parent.run.executor if parent else None
        )
        if parent is not None:
            self.run.resume_slot = parent.run.resume_slot
            self.run.resume_map = parent.run.resume_map
        self._init_control(parent)
        self._init_attempts(parent, thread_id, self.ns)
        self._next_version: Any = (
            checkpointer.get_next_version if checkpointer is not None else increment
        )
        self._max_version: Any = None

    # setup
    def _setup(self, saved: CheckpointTuple | None, latest: CheckpointTuple | None = None) -> None:
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
        self.prev_checkpoint_config = saved.parent_config
        cp = saved.checkpoint
        self.checkpoint: Checkpoint = Checkpoint(
            v=cp["v"],
            id=cp["id"],
            ts=cp["ts"],
            channel_values=dict(cp["channel_values"]),
            channel_versions=dict(cp["channel_versions"]),
            versions_seen={k: dict(v) for k, v in cp["versions_seen"].items()},
        )
        self.checkpoint_metadata: CheckpointMetadata = saved.metadata
        # new ids sort after the thread's newest one, whatever the clock says
        self._last_id: str = max(cp["id"], latest.checkpoint["id"] if latest else "")
        self.addressed = bool(asked) and not self.is_nested
        self.replays_past = latest is not None and latest.checkpoint["id"] != cp["id"]
        self.checkpoint_id_saved = cp["id"] if saved.pending_writes is not None else None
        values = self.checkpoint["channel_values"]
        channels: dict[str, BaseChannel[Any, Any, Any]] = {}
        for name, spec in self.specs.items():
            c = spec.from_checkpoint(values.get(name, MISSING))
            c.key = name
            channels[name] = c
            if c.clears_on_step and c.is_available():
                self.live_ephemeral.add(name)
        self.channels = channels
        versions = self.checkpoint["channel_versions"]
        self._max_version = max(versions.values()) if versions else None
        self.step = int(saved.metadata.get("step", -2)) + 1
        recursion_limit = int(self.config.get("recursion_limit", 25))
        self.stop = self.step + recursion_limit + 1
        self.parents: dict[str, str] = dict(self.config.get(CONF, {}).get("checkpoint_map", {}))
        if self.parent_scope is not None:
            pconf = self.parent_scope.run.base_config.get(CONF, {})
            pns = pconf.get(CONFIG_KEY_CHECKPOINT_NS, "")
            if (pid := self.parent_scope.run.checkpoint_id) is not None:
                self.parents[pns] = pid
        pending = list(saved.pending_writes or ())
        self.checkpoint_pending_writes = pending
        self._index_pending(pending)
        if PREVIOUS in channels and channels[PREVIOUS].is_available():
            self.run.previous = channels[PREVIOUS].get()
        self.updated_channels = self._first()
        self.run.checkpoint_id = self.checkpoint["id"]

    def _latest_config(self) -> dict[str, Any] | None:
        """When the run names a checkpoint, the config of its thread's latest one:
        naming a past checkpoint replays from it instead of resuming it."""
        conf = self.checkpoint_config[CONF]
        if self.is_nested or not conf.get(CONFIG_KEY_CHECKPOINT_ID):
            return None
        return {
            CONF: {
                CONFIG_KEY_THREAD_ID: conf[CONFIG_KEY_THREAD_ID],
                CONFIG_KEY_CHECKPOINT_NS: self.ns,
            }
        }

    @staticmethod
    def _replay(saved: CheckpointTuple, latest: CheckpointTuple | None) -> CheckpointTuple:
        """A past checkpoint is replayed: the tasks planned from it run again (a
        fork), so the writes they saved the first time are not reused."""
        if latest is None or latest.checkpoint["id"] == saved.checkpoint["id"]:
            return saved
        return saved._replace(pending_writes=[])

    def _index_pending(self, pending: Sequence[tuple[str, str, Any]]) -> None:
        done: dict[str, list[tuple[str, Any]]] = {}
        resumes = self.run.resume_writes
        for tid, chan, value in pending:
            if chan == RESUME:
                if tid != NULL_TASK_ID:
                    resumes[tid] = value
            elif chan == CALL:
                self._call_records[tid] = value
            elif tid == NULL_TASK_ID:
                if chan not in (ERROR, INTERRUPT, SCHEDULED):
                    self._null_writes.append((chan, value))
            elif is_done_write(chan):
                bucket = done.get(tid)
                if bucket is None:
                    done[tid] = [(chan, value)]
                else:
                    bucket.append((chan, value))
        self._done_writes = done

    def _apply(self, tasks: Sequence[Any], changed: set[str]) -> set[str]:
        updated = apply_writes(
            self.checkpoint,
            self.channels,
            tasks,
            self._next_version,
            self.trigger_to_nodes,
            live_ephemeral=self.live_ephemeral,
            changed=changed,
            max_version=self._max_version,
        )
        if changed:
            versions = self.checkpoint["channel_versions"]
            self._max_version = max(versions[c] for c in changed if c in versions)
        return updated

    # steps
    def tick(self) -> bool:
        """Plan the next step; False when the run is over (done or out of steps)."""
        self.faults.raise_if_failed(self.step)
        if self.step > self.stop:
            self.status = "out_of_steps"
            self._emit_checkpoint()
            return False
        self.planner = Planner(
            checkpoint=self.checkpoint,
            processes=self.nodes,
            channels=self.channels,
            step=self.step,
            ns=self.ns,
            run=self.run,
            node_order=self.graph.node_order,
            retry_policy=self.graph.retry_policy,
            cache_policy=self.graph.cache_policy,
        )
        self.tasks = prepare_next_tasks(  # type: ignore[assignment]
            self.checkpoint,
            self.planner,
            for_execution=True,
            trigger_to_nodes=self.trigger_to_nodes,
            updated_channels=self.updated_channels,
        )
        self._emit_checkpoint(self.tasks.values())
        if not self.tasks:
            self.status = "done"
            return False
        self.status = "pending"
        if self._done_writes:
            listened = self.attempt_log is not None or self.hooks is not None
            for tid, task in self.tasks.items():
                if (done := self._done_writes.get(tid)) is not None:
                    task.writes.extend(done)
                    if listened:
                        self._attempt_instant(task, "replayed")
        if self.interrupt_before and should_interrupt(
            self.checkpoint, self.interrupt_before, self.tasks.values()
        ):
            self.status = "interrupt_before"
            raise GraphInterrupt()
        if "tasks" in self.stream_modes or "debug" in self.stream_modes:
            # every task of the step, as LangGraph: those a resume replays too
            for task in self.tasks.values():
                self._task_started(task)
        if self._done_writes and self.stream is not None:
            # as LangGraph: the updates of tasks whose saved writes a resume
            # takes instead of running them, marked cached
            for task in self.tasks.values():
                if task.writes:
                    self._output_writes(task, task.writes, True)
        if EVENTS in self.stream_modes:
            self._emit(EVENTS, ("step", None, self.step))
        return True

    def after_tick(self) -> None:
        """Finish the step: apply its writes, save a checkpoint."""
        self.faults.raise_if_failed(self.step)
        tasks: list[Any] = list(self.tasks.values())
        if self._null_writes:
            tasks.append(PregelTaskWrites((), INPUT, self._null_writes, ()))
        changed: set[str] = set()
        self.updated_channels = self._apply(tasks, changed)
        if "values" in self.stream_modes and not self.updated_channels.isdisjoint(
            [self.output_keys] if isinstance(self.output_keys, str) else self.output_keys
        ):
            self._emit("values", read_channels(self.channels, self.output_keys))
        self.checkpoint_pending_writes = []
        self._done_writes = {}
        self._call_records = {}
        self._null_writes = []
        self.run.resume_writes.clear()
        self.run.resuming = False
        finished = self.tasks
        self.tasks = {}
        if self.durability != "exit":
            self._save_buffered()
        self._put_checkpoint({"source": "loop"}, changed)
        if self.interrupt_after and should_interrupt(
            self.checkpoint, self.interrupt_after, finished.values()
        ):
            self.status = "interrupt_after"
            self._emit_checkpoint()
            raise GraphInterrupt()

    def _put_checkpoint(self, metadata: CheckpointMetadata, changed: set[str]) -> None:
        metadata["step"] = self.step
        metadata["parents"] = self.parents
        values = self.checkpoint["channel_values"]
        channels = self.channels
        for chan in changed:
            v = channels[chan].checkpoint()
            if v is MISSING:
                values.pop(chan, None)
            else:
                values[chan] = v
        self._unsaved |= changed
        self.checkpoint = Checkpoint(
            v=LATEST_VERSION,
            id=uuid6(clock_seq=self.step, after=self._last_id),
            ts=utc_now_iso(),
            channel_values=values,
            channel_versions=self.checkpoint["channel_versions"],
            versions_seen=self.checkpoint["versions_seen"],
        )
        self.checkpoint_metadata = metadata
        self.run.checkpoint_id = self._last_id = self.checkpoint["id"]
        if self.checkpointer is not None and self.durability != "exit":
            self._save_checkpoint()
        self.step += 1

    def _save_checkpoint(self) -> None:
        cp = self.checkpoint
        versions = cp["channel_versions"]
        values = cp["channel_values"]
        new_versions = {k: versions[k] for k in self._unsaved if k in versions}
        self._unsaved = set()
        snapshot = Checkpoint(
            v=cp["v"],
            id=cp["id"],
            ts=cp["ts"],
            channel_values={k: values[k] for k in new_versions if k in values},
            channel_versions=dict(versions),
            versions_seen={k: dict(v) for k, v in cp["versions_seen"].items()},
        )
        config = self.checkpoint_config
        self.prev_checkpoint_config = config if config[CONF].get(CONFIG_KEY_CHECKPOINT_ID) else None
        self.checkpoint_config = {
            **config,
            CONF: {**config[CONF], CONFIG_KEY_CHECKPOINT_ID: cp["id"]},
        }
        self.checkpoint_id_saved = cp["id"]
        metadata = dict(self.checkpoint_metadata)
        run_meta = self.config.get("metadata")
        if run_meta:
            for k, v in run_meta.items():
                if not k.startswith("__") and isinstance(v, (str, int, float, bool)):
                    metadata.setdefault(k, v)
        saver = self.checkpointer
        assert saver is not None
        self._persist(saver.put, saver.aput, config, snapshot, metadata, new_versions)

    # writes
    def put_writes(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> Any:
        """Record a task's writes: in memory, on the stream, in the cache, in the saver."""
        if not writes:
            return None
        stop = self.run_stop
        if stop.reason is not None and (
            task_id in stop.refused
            or (writes[0][0] == ERROR and stop.reason != DRAINED)
            or stop.abandoned
        ):
            return None  # a task cut short by the stop (or by what stopping did to it)
        log = self.attempt_log
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
        if self._keep_writes or task_id == NULL_TASK_ID:
            # only "exit" durability saves them later; otherwise they are in
            # the saver already and keeping them would only feed the GC
            self.checkpoint_pending_writes.extend([(task_id, c, v) for c, v in writes])
        task = self.tasks.get(task_id)
        if task is not None:
            self._output_writes(task, writes, False)
            if (
                task.cache_key is not None
                and self.cache is not None
                and writes[0][0] not in (ERROR, INTERRUPT)
            ):
                key = task.cache_key
                full = (key.ns, key.key)
                self._fresh[full] = list(writes)
                pairs = {full: (list(writes), key.ttl)}
                self._background(self._cache_set, self._acache_set, pairs, apart=True)
        elif writes[0][0] == INTERRUPT:
            self._emit_interrupts([i for c, v in writes if c == INTERRUPT for i in v])
        if task is not None and type(task.proc) is Call:
            # a finished call writes no channel, so after_tick has nothing to
            # apply: forget it now rather than keep every call of the run alive
            self.tasks.pop(task_id, None)
        if self.checkpointer is None or self.durability == "exit":
            if log is not None and ok:
                log.end(task_id, "ok")  # saved at exit
            return None
        path = (task.path_str or task_path_str(task.path)) if task is not None else ""
        who = writer_name(task, task_id)
        return self._persist(
            put_writes,
            aput_writes,
            self.checkpointer,
            self.checkpoint_config,
            list(writes),
            task_id,
            path,
            who,
            () if log is None else log.end_ok(task_id) if ok else log.take(),
        )

    # exit
    def _finish(self, exc: BaseException | None) -> bool:
        """Decide what exiting means; return whether to swallow ``exc``."""
        self._close_attempts()
        self._attempts_at_exit(exc)
        if isinstance(exc, NondeterminismError):
            return False  # nothing this resume did is saved: the old code can still resume
        self._mark_drained(exc)
        self._drop_moot_cancel(exc)
        if self.checkpointer is not None and self.durability == "exit":
            if self.checkpoint_id_saved != self.checkpoint["id"] or self._unsaved:
                self._save_checkpoint()
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for tid, chan, value in self.checkpoint_pending_writes:
                by_task.setdefault(tid, []).append((chan, value))
            for tid, writes in by_task.items():
                task = self.tasks.get(tid)
                path = (task.path_str or task_path_str(task.path)) if task is not None else ""
                who = writer_name(task, tid)
                self._persist(
                    put_writes,
                    aput_writes,
                    self.checkpointer,
                    self.checkpoint_config,
                    writes,
                    tid,
                    path,
                    who,
                )
        if isinstance(exc, GraphInterrupt):
            if not self.is_nested and self.stream is not None:
                self._emit_interrupted_values()
            if exc.interrupts:
                self._emit_interrupts(exc.interrupts)
            elif not self.interrupts:
                self._emit("updates", {INTERRUPT: ()})
            return not self.is_nested
        return False

    def check_saved(self) -> None:
        """Raise the run's storage failure, if a save has failed: asked before
        every task body starts."""
        self.faults.raise_if_failed(self.step)

    # how a saver/cache call is made: the subclasses decide
    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _background(
        self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any, apart: bool = False
    ) -> None:
        raise NotImplementedError


class SyncPregelLoop(PregelLoop):
    """The loop for ``invoke``/``stream``: saver calls are plain calls."""

    def __enter__(self) -> SyncPregelLoop:
        self._executor = BackgroundExecutor(self.config)
        self.submit = self._executor.submit
        self._lane = SerialLane(
            self.faults, nullcontext if self.checkpointer is None else self.checkpointer.grouped
        )
        self._thread_lock = None
        if (locker := self._thread_locker()) is not None:
            thread_id = str(self.config[CONF][CONFIG_KEY_THREAD_ID])
            wait = bool(self.config[CONF].get("wait_for_thread", False))
            self._thread_lock = locker.lock_thread(thread_id, wait=wait)
            self._thread_lock.__enter__()
        try:
            self._start_control()
            saved = (
                self.checkpointer.get_tuple(self.checkpoint_config)
                if self.checkpointer is not None
                else None
            )
            saver = self.checkpointer
            newest = None
            if saver is not None and saved is not None and (latest := self._latest_config()):
                newest = saver.get_tuple(latest)
                saved = self._replay(saved, newest)
            self._setup(saved, newest)
            self._accepted_control()
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        self._end_control()
        if self._thread_lock is not None:
            self._thread_lock.__exit__(None, None, None)
            self._thread_lock = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            # tasks still running (a run stopped or failed midway) finish first,
            # so that exiting saves their writes too
            try:
                ctrl_c = self.run_stop.settle(
                    partial(self._executor.__exit__, exc_type, exc_value, traceback), exc_value
                )
            finally:
                suppress = self._finish(exc_value)
            self._lane.wait()
            self.faults.raise_if_failed(self.step)
        finally:
            self._release()
        if ctrl_c is not None and not isinstance(exc_value, KeyboardInterrupt):
            raise ctrl_c
        return suppress

    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        if self.durability == "sync":
            save_now(self.faults, self.step, fn, *args)
        else:
            self._lane.put(fn, *args)
        return None

    def _background(
        self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any, apart: bool = False
    ) -> None:
        self._lane.put(fn, *args, apart=apart)

    def match_cached_writes(self) -> list[PregelExecutableTask]:
        wanted = self._cached_lookup()
        if not wanted:
            return []
        assert self.cache is not None
        return self._apply_cached(wanted, self.cache.get(list(wanted)))


class AsyncPregelLoop(PregelLoop):
    """The loop for ``ainvoke``/``astream``: saver calls are awaited."""

    async def __aenter__(self) -> AsyncPregelLoop:
        import asyncio

        self._executor = AsyncBackgroundExecutor(self.config)
        await self._executor.__aenter__()
        self.submit = self._executor.submit
        self._aloop = asyncio.get_running_loop()
        self._io_wait: list[Awaitable[Any]] = []
        saver = self.checkpointer
        self._lane = AsyncSerialLane(
            self.faults, self._aloop, nullcontext if saver is None else saver.agrouped
        )
        self._thread_lock = None
        if (locker := self._thread_locker()) is not None:
            thread_id = str(self.config[CONF][CONFIG_KEY_THREAD_ID])
            wait = bool(self.config[CONF].get("wait_for_thread", False))
            self._thread_lock = locker.alock_thread(thread_id, wait=wait)
            await self._thread_lock.__aenter__()
        try:
            await self._astart_control()
            saved = (
                await self.checkpointer.aget_tuple(self.checkpoint_config)
                if self.checkpointer is not None
                else None
            )
            saver = self.checkpointer
            newest = None
            if saver is not None and saved is not None and (latest := self._latest_config()):
                newest = await saver.aget_tuple(latest)
                saved = self._replay(saved, newest)
            self._setup(saved, newest)
            await self._aaccepted_control()
            await self.settle()
        except BaseException:
            await self._release()
            raise
        return self

    async def _release(self) -> None:
        try:
            await self._aend_control()
        finally:
            if self._thread_lock is not None:
                await self._thread_lock.__aexit__(None, None, None)
                self._thread_lock = None

    async def settle(self) -> None:
        """Wait for the saver calls that must finish before the run goes on."""
        while self._io_wait:
            pending, self._io_wait = self._io_wait, []
            for aw in pending:
                await aw

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        import asyncio

        try:
            if exc_value is not None:
                self.run_stop.aborted(exc_value)  # as RunStop.settle does for sync runs
            try:
                await self._executor.__aexit__(exc_type, exc_value, traceback)
            except asyncio.CancelledError:
                # cancelled (again) while waiting for tasks still running:
                # walk away from them, as a second Ctrl-C does
                self.run_stop.walk_away()
                raise
            finally:
                suppress = self._finish(exc_value)
            try:
                await self.settle()
            finally:
                await self._lane.wait()
            self.faults.raise_if_failed(self.step)
        finally:
            await self._release()
        return suppress

    def _persist(self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any) -> Any:
        import asyncio

        if self.durability == "sync":
            if on_loop(self._aloop):
                return Awaited(asave_now(self.faults, self.step, afn, *args), self._io_wait)
            asyncio.run_coroutine_threadsafe(
                asave_now(self.faults, self.step, afn, *args), self._aloop
            ).result()
            return None
        self._background(fn, afn, *args)
        return None

    def _background(
        self, fn: Callable[..., Any], afn: Callable[..., Any], *args: Any, apart: bool = False
    ) -> None:
        if on_loop(self._aloop):
            self._lane.put(afn, *args, apart=apart)
        else:
            self._aloop.call_soon_threadsafe(partial(self._background, fn, afn, *args, apart=apart))

    async def amatch_cached_writes(self) -> list[PregelExecutableTask]:
        wanted = self._cached_lookup()
        if not wanted:
            return []
        assert self.cache is not None
        return self._apply_cached(wanted, await self.cache.aget(list(wanted)))
