"""The state API of a graph: read a thread's state and history, write to it.

``StateAPI`` is a base of ``Pregel``; it plans from a saved checkpoint with the
same planner a run uses, so ``get_state().next`` names what a resume would run.
Each operation that calls the saver is written once, as a plan that yields
the saver calls it makes (``SaverCall``) and is sent back their results;
the sync methods perform them with ``_perform``, the async ones await them
with ``_aperform``.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    END,
    ERROR,
    INPUT,
    INTERRUPT,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
    RESERVED,
    TASKS,
)
from pregelkit._internal._ids import utc_now_iso, uuid6
from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import InvalidUpdateError, ThreadStateError
from pregelkit.pregel._exec.stop import CANCELLED
from pregelkit.pregel._graph.nodes import PregelNode
from pregelkit.pregel._graph.writes import control_writes
from pregelkit.pregel._plan.algo import (
    PregelTaskWrites,
    apply_writes,
    is_done_write,
    tasks_to_show,
)
from pregelkit.pregel._plan.io import map_input, read_channels
from pregelkit.types import Interrupt

if TYPE_CHECKING:
    from pregelkit._internal._snapshot import PregelTask, StateSnapshot
    from pregelkit.checkpoint.attempts import Timeline
    from pregelkit.checkpoint.base import (
        BaseCheckpointSaver,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )

__all__ = ["StateAPI"]

T = TypeVar("T")


class StateAPI:
    """``get_state``, ``get_state_history``, ``update_state`` and their async twins."""

    nodes: dict[str, PregelNode]
    channels: dict[str, BaseChannel[Any, Any, Any]]
    node_order: dict[str, int]
    trigger_to_nodes: dict[str, list[str]]
    stream_channels_asis: Any
    input_channels: str | Sequence[str]

    def _saver(self) -> BaseCheckpointSaver[Any] | None:
        raise NotImplementedError

    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        raise NotImplementedError

    def _require_saver(self) -> BaseCheckpointSaver[Any]:
        saver = self._saver()
        if saver is None:
            raise ValueError(
                "this graph has no checkpointer, so it keeps no state: pass checkpointer=... "
                "(e.g. InMemorySaver() or SqliteSaver) when building it"
            )
        return saver

    def _channels_of(self, checkpoint: Checkpoint) -> dict[str, BaseChannel[Any, Any, Any]]:
        values = checkpoint["channel_values"]
        out = {}
        for name, spec in self.channels.items():
            c = spec.from_checkpoint(values.get(name, MISSING))
            c.key = name
            out[name] = c
        return out

    def _snapshot(
        self,
        config: Mapping[str, Any],
        saved: CheckpointTuple | None,
        *,
        apply_pending: bool = False,
    ) -> StateSnapshot:
        """The state at ``saved``. With ``apply_pending`` (the thread's latest state)
        the writes of tasks that already finished are applied to the values and
        those tasks leave ``next``; a past checkpoint shows what it saved, and
        ``next`` names every task planned from it."""
        from pregelkit.types import PregelTask, StateSnapshot  # loaded with the state API

        if saved is None:
            return StateSnapshot({}, (), dict(config), None, None, None, (), ())
        checkpoint = saved.checkpoint
        channels = self._channels_of(checkpoint)
        step = int(saved.metadata.get("step", -1)) + 1
        ns = saved.config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, "")
        next_tasks = tasks_to_show(self, checkpoint, channels, step, ns)
        pending = saved.pending_writes or []
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for tid, chan, value in pending:
            by_task.setdefault(tid, []).append((chan, value))
        tasks = []
        all_interrupts: list[Interrupt] = []
        for tid, t in next_tasks.items():
            writes = by_task.get(tid, [])
            err = next((v for c, v in writes if c == ERROR), None)
            ints = tuple(i for c, v in writes if c == INTERRUPT for i in v)
            all_interrupts.extend(ints)
            result = _task_result(writes)
            tasks.append(
                PregelTask(
                    tid,
                    t.name,
                    t.path,
                    error=err if isinstance(err, Exception) or err is None else Exception(err),
                    interrupts=ints,
                    result=result,
                )
            )
        for tid, writes in by_task.items():
            # a task that finished after being resumed waits for nothing any more
            if tid not in next_tasks and not any(is_done_write(c) for c, _ in writes):
                all_interrupts.extend(i for c, v in writes if c == INTERRUPT for i in v)
        seen: dict[str, Interrupt] = {}
        for i in all_interrupts:
            seen.setdefault(i.id, i)
        finished: set[str] = set()
        if apply_pending:
            done: list[PregelTaskWrites] = []
            for tid, t in next_tasks.items():
                writes = [(c, v) for c, v in by_task.get(tid, ()) if is_done_write(c)]
                if writes:
                    finished.add(tid)
                    done.append(PregelTaskWrites(t.path, t.name, writes, ()))
            if NULL_TASK_ID in by_task:
                done.append(PregelTaskWrites((), INPUT, by_task[NULL_TASK_ID], ()))
            if done:
                try:
                    apply_writes(checkpoint, channels, done, None, self.trigger_to_nodes)
                except Exception:
                    # the step's writes cannot be applied (two writers to one
                    # value, a reducer that raises): that is why the run failed;
                    # show the state as saved, with those tasks still to do
                    channels = self._channels_of(saved.checkpoint)
                    finished = set()
        return StateSnapshot(
            values=read_channels(channels, self.stream_channels_asis),
            next=tuple(t.name for t in tasks if t.id not in finished),
            config=saved.config,
            metadata=saved.metadata,
            created_at=checkpoint["ts"],
            parent_config=saved.parent_config,
            tasks=tuple(tasks),
            interrupts=tuple(seen.values()),
        )

    def get_state(self, config: Mapping[str, Any], *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state at its latest checkpoint (or at ``checkpoint_id``)."""
        return _perform(self._get_state(config, subgraphs))

    async def aget_state(
        self, config: Mapping[str, Any], *, subgraphs: bool = False
    ) -> StateSnapshot:
        return await _aperform(self._get_state(config, subgraphs))

    def _get_state(self, config: Mapping[str, Any], subgraphs: bool) -> Plan[StateSnapshot]:
        saver = self._require_saver()
        config = self._config(config)
        latest = not config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)
        saved = yield _on(saver, "get_tuple", config)
        snapshot = self._snapshot(config, saved, apply_pending=latest)
        if latest and (tid := _marked_thread(saver, config, snapshot)) is not None:
            snapshot = _with_mark(snapshot, (yield _on(saver, "get_thread_control", tid)))
        if not subgraphs:
            return snapshot
        tasks = []
        for task, child, child_config in self._subgraph_tasks(snapshot):
            if child is self:
                tasks.append(task)
                continue
            saved = yield _on(saver, "get_tuple", child_config)
            state = child._snapshot(child_config, saved, apply_pending=True)
            tasks.append(task._replace(state=state) if state.metadata is not None else task)
        return snapshot._replace(tasks=tuple(tasks))

    def _subgraph_tasks(
        self, snapshot: StateSnapshot
    ) -> Iterator[tuple[PregelTask, StateAPI, dict[str, Any]]]:
        """Each task of ``snapshot`` with the subgraph it runs (or itself, when it
        runs none) and the config of that subgraph's state: its own checkpoint
        namespace, ``parent_ns|node:task_id``."""
        conf = snapshot.config.get(CONF, {})
        ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        for task in snapshot.tasks:
            node = self.nodes.get(task.name)
            children = node.subgraphs if node is not None else []
            if not children:
                yield task, self, {}
                continue
            child_ns = (
                f"{ns}{NS_SEP}{task.name}{NS_END}{task.id}"
                if ns
                else f"{task.name}{NS_END}{task.id}"
            )
            child_config = {
                CONF: {"thread_id": conf.get("thread_id"), CONFIG_KEY_CHECKPOINT_NS: child_ns}
            }
            yield task, children[0], child_config

    def get_timeline(self, config: Mapping[str, Any]) -> Timeline:
        """Every run of the config's thread and the attempts of each, oldest
        first (``pregelkit.observe.timeline`` explains the model)."""
        return _perform(self._get_timeline(config))

    async def aget_timeline(self, config: Mapping[str, Any]) -> Timeline:
        return await _aperform(self._get_timeline(config))

    def _get_timeline(self, config: Mapping[str, Any]) -> Plan[Timeline]:
        saver = self._require_saver()
        thread_id = _thread_of(self._config(config))
        from pregelkit.checkpoint.attempts import group_attempts

        return group_attempts(thread_id, (yield _on(saver, "list_attempts", thread_id)))

    def get_state_history(
        self,
        config: Mapping[str, Any],
        *,
        filter: dict[str, Any] | None = None,
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first (of the root graph, unless the
        config names a ``checkpoint_ns``)."""
        saver = self._require_saver()
        config = _root_ns(self._config(config))
        for saved in saver.list(
            config, filter=filter, before=dict(before) if before else None, limit=limit
        ):
            yield self._snapshot(saved.config, saved)

    async def aget_state_history(
        self,
        config: Mapping[str, Any],
        *,
        filter: dict[str, Any] | None = None,
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        saver = self._require_saver()
        config = _root_ns(self._config(config))
        async for saved in saver.alist(
            config, filter=filter, before=dict(before) if before else None, limit=limit
        ):
            yield self._snapshot(saved.config, saved)

    def _plan_update(
        self,
        config: dict[str, Any],
        saved: CheckpointTuple | None,
        values: Any,
        as_node: str | None,
    ) -> tuple[dict[str, Any], Checkpoint, CheckpointMetadata, dict[str, Any]]:
        from pregelkit.checkpoint.base import copy_checkpoint, empty_checkpoint

        saver = self._require_saver()
        checkpoint = copy_checkpoint(saved.checkpoint if saved is not None else empty_checkpoint())
        channels = self._channels_of(checkpoint)
        step = int(saved.metadata.get("step", -2)) + 1 if saved is not None else -1
        if as_node is None and not (len(self.nodes) > 1 and isinstance(values, Mapping)):
            as_node = self._infer_as_node(checkpoint)
        source: Literal["input", "update"] = "update"
        writes: list[tuple[str, Any]]
        if as_node == INPUT:
            # as a run's input would write it: a checkpoint of source "input"
            # whose triggered nodes run next
            writes = list(map_input(self.input_channels, values))
            if not writes:
                raise InvalidUpdateError(
                    f"update_state(as_node={INPUT!r}) got no input for the input channels "
                    f"{self.input_channels!r}"
                )
            task = PregelTaskWrites((), INPUT, writes, ())
            as_node, source = None, "input"
        elif as_node is not None:
            node = self.nodes.get(as_node)
            if node is None:
                raise InvalidUpdateError(
                    f"update_state(as_node={as_node!r}) names no node; nodes: {sorted(self.nodes)}"
                )
            control = control_writes(values)
            if control is not None:
                writes = control
            else:
                writes = node.writer.writes_for(values) if node.writer is not None else []
            task = PregelTaskWrites((), as_node, writes, tuple(node.triggers))
        else:
            if not isinstance(values, Mapping):
                raise InvalidUpdateError(
                    "update_state without as_node takes a dict of channel -> value; "
                    "pass as_node=... to update as a node would"
                )
            writes = list(values.items())
            task = PregelTaskWrites((), INPUT, writes, ())
        for chan, _ in writes:
            if chan not in channels and chan not in RESERVED:
                raise InvalidUpdateError(
                    f"update_state writes to unknown channel {chan!r}; channels: "
                    f"{sorted(c for c in channels if c != TASKS)}"
                )
        changed: set[str] = set()
        apply_writes(
            checkpoint,
            channels,
            [task],
            saver.get_next_version,
            self.trigger_to_nodes,
            live_ephemeral=None,
            changed=changed,
        )
        if as_node is not None:
            seen = checkpoint["versions_seen"].setdefault(as_node, {})
            for chan in self.nodes[as_node].triggers:
                if chan in checkpoint["channel_versions"]:
                    seen[chan] = checkpoint["channel_versions"][chan]
        values_out = {}
        for chan in changed:
            v = channels[chan].checkpoint()
            if v is not MISSING:
                values_out[chan] = v
        from pregelkit.checkpoint.base import Checkpoint

        versions = checkpoint["channel_versions"]
        new_checkpoint = Checkpoint(
            v=checkpoint["v"],
            id=uuid6(clock_seq=step, after=checkpoint["id"]),
            ts=checkpoint["ts"],
            channel_values=values_out,
            channel_versions=versions,
            versions_seen=checkpoint["versions_seen"],
        )
        new_checkpoint["ts"] = utc_now_iso()
        metadata: CheckpointMetadata = {"source": source, "step": step, "parents": {}}
        parent_config = dict(saved.config) if saved is not None else config
        parent_config = {
            **parent_config,
            CONF: {
                **config.get(CONF, {}),
                **parent_config.get(CONF, {}),
                CONFIG_KEY_CHECKPOINT_NS: config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, ""),
            },
        }
        if saved is None:
            parent_config[CONF].pop(CONFIG_KEY_CHECKPOINT_ID, None)
        new_versions = {c: versions[c] for c in changed if c in versions}
        return parent_config, new_checkpoint, metadata, new_versions

    def _infer_as_node(self, checkpoint: Checkpoint) -> str | None:
        """The node an update without ``as_node`` is made as, as LangGraph
        infers it: the only node, or the one node that read the newest
        version of a channel. ``None`` when that is ambiguous (or nothing ran
        yet). Not asked when the update is a dict: pregelkit writes that to
        the channels it names (an unknown one is an error, not a node's
        value)."""
        if len(self.nodes) == 1:
            return next(iter(self.nodes))
        newest = sorted(
            (v, node)
            for node, seen in checkpoint["versions_seen"].items()
            if node in self.nodes
            for v in seen.values()
        )
        if newest and (len(newest) == 1 or newest[-1][0] != newest[-2][0]):
            return newest[-1][1]
        return None

    def update_state(
        self,
        config: Mapping[str, Any],
        values: Any,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Write ``values`` to the thread as if ``as_node`` had produced them; a new
        checkpoint (source ``update``) on top of the latest or the given one."""
        return _perform(self._update_state(config, values, as_node))

    async def aupdate_state(
        self,
        config: Mapping[str, Any],
        values: Any,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        return await _aperform(self._update_state(config, values, as_node))

    def _update_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None
    ) -> Plan[dict[str, Any]]:
        saver = self._require_saver()
        config = self._config(config)
        saved = yield _on(saver, "get_tuple", config)
        args = self._plan_update(config, saved, values, as_node)
        written: dict[str, Any] = yield _on(saver, "put", *args)
        return written

    # run control: stop a thread's run from anywhere (see pregel/_exec/stop.py)
    def _cancel(self, config: Mapping[str, Any], what: str) -> Plan[None]:
        from pregelkit.checkpoint import runs

        saver, thread_id, cancelled = yield from self._cancel_mark(config, what)
        if cancelled:
            return
        # a queued run of it never starts; a worker's run stops (the mark)
        if not (yield _on(runs, "cancel_thread_runs", saver, thread_id)):
            snapshot = yield from self._get_state(_root(thread_id), False)
            _refuse_finished(thread_id, snapshot, "cancel")
        yield _on(saver, "put_thread_control", thread_id, CANCELLED)

    def cancel(self, config: Mapping[str, Any]) -> None:
        """Cancel the thread: mark it in the saver. The run that owns it, in
        this process or another, stops within a task call (or
        ``POLL_SECONDS``), saves what finished and raises
        ``RunCancelledError``; a queued run of it (``submit``) never starts.
        Until ``uncancel(config)``, every run of the thread raises
        ``RunCancelledError`` before it starts. A thread that has finished is
        refused (``ThreadStateError``): there is nothing to cancel."""
        _perform(self._cancel(config, "cancel"))

    async def acancel(self, config: Mapping[str, Any]) -> None:
        await _aperform(self._cancel(config, "acancel"))

    def _uncancel(self, config: Mapping[str, Any], what: str) -> Plan[None]:
        saver, thread_id, cancelled = yield from self._cancel_mark(config, what)
        if cancelled:
            yield _on(saver, "put_thread_control", thread_id, None)

    def uncancel(self, config: Mapping[str, Any]) -> None:
        """Clear the thread's cancel mark, so that it runs again: resume it with
        ``invoke(None, config)`` (or answer its interrupt with a ``Command``).
        A thread that is not cancelled is left as it is."""
        _perform(self._uncancel(config, "uncancel"))

    async def auncancel(self, config: Mapping[str, Any]) -> None:
        await _aperform(self._uncancel(config, "auncancel"))

    def _cancel_mark(
        self, config: Mapping[str, Any], what: str
    ) -> Plan[tuple[BaseCheckpointSaver[Any], str, bool]]:
        """The saver and thread that ``what`` acts on, and whether the thread is cancelled."""
        saver, thread_id = self._control_target(config, what)
        mark = yield _on(saver, "get_thread_control", thread_id)
        return saver, thread_id, mark == CANCELLED

    def _control_target(
        self, config: Mapping[str, Any], what: str
    ) -> tuple[BaseCheckpointSaver[Any], str]:
        saver = self._require_saver()
        thread_id = self._config(config)[CONF].get(CONFIG_KEY_THREAD_ID)
        if thread_id is None:
            raise ValueError(
                f"{what}() needs the thread to act on: pass "
                "config={'configurable': {'thread_id': '...'}}"
            )
        if not saver.has_thread_control:
            raise TypeError(
                f"{what}(): {type(saver).__name__} keeps no run-control marks; use "
                "InMemorySaver, SqliteSaver or PostgresSaver (or implement "
                "get_thread_control/put_thread_control)"
            )
        return saver, str(thread_id)


class SaverCall:
    """A call a state plan makes: ``target.<method>(*args)`` from a sync
    method, ``await target.a<method>(*args)`` from an async one. The target
    is the saver, or ``checkpoint.runs`` for its run queue."""

    __slots__ = ("args", "method", "target")

    def __init__(self, target: object, method: str, args: tuple[Any, ...]) -> None:
        self.target = target
        self.method = method
        self.args = args


Plan = Generator[SaverCall, Any, T]
"""A state operation: yields its saver calls, is sent back what each
returned, returns the operation's result."""


def _on(saver: object, method: str, *args: Any) -> SaverCall:
    return SaverCall(saver, method, args)


def _perform(plan: Plan[T]) -> T:
    """Run ``plan``, making its saver calls in this thread."""
    result: Any = None
    try:
        while True:
            call = plan.send(result)
            result = getattr(call.target, call.method)(*call.args)
    except StopIteration as done:
        value: T = done.value
        return value


async def _aperform(plan: Plan[T]) -> T:
    """Run ``plan``, awaiting its saver calls."""
    result: Any = None
    try:
        while True:
            call = plan.send(result)
            result = await getattr(call.target, "a" + call.method)(*call.args)
    except StopIteration as done:
        value: T = done.value
        return value


def _root(thread_id: str) -> dict[str, Any]:
    return {CONF: {CONFIG_KEY_THREAD_ID: thread_id, CONFIG_KEY_CHECKPOINT_NS: ""}}


def _refuse_finished(thread_id: str, snapshot: StateSnapshot, action: str) -> None:
    """Cancelling a thread that has finished would only leave a mark that
    refuses its next run: refused. A thread not saved yet may be marked (a
    queued run of it then ends cancelled as it starts)."""
    if snapshot.metadata is not None and not snapshot.tasks:
        raise ThreadStateError(
            thread_id,
            "done",
            action,
            "nothing runs or is left to run (delete_thread forgets it)",
        )


def _marked_thread(
    saver: BaseCheckpointSaver[Any], config: Mapping[str, Any], snapshot: StateSnapshot
) -> str | None:
    """The thread whose run-control mark ``get_state`` shows: a saved root
    graph's, when the saver keeps marks."""
    conf = config[CONF]
    if (
        snapshot.metadata is None
        or conf.get(CONFIG_KEY_CHECKPOINT_NS)
        or not saver.has_thread_control
    ):
        return None
    thread_id = conf.get(CONFIG_KEY_THREAD_ID)
    return None if thread_id is None else str(thread_id)


def _with_mark(snapshot: StateSnapshot, mark: str | None) -> StateSnapshot:
    """``metadata["stopped"]``: ``"cancelled"`` or ``"drained"``, when marked."""
    if mark is None or snapshot.metadata is None:
        return snapshot
    metadata = cast("CheckpointMetadata", {**snapshot.metadata, "stopped": mark})
    return snapshot._replace(metadata=metadata)


def _root_ns(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` listing one namespace: the root graph's unless it names one
    (a saver lists every namespace of the thread when none is named)."""
    return {**config, CONF: {CONFIG_KEY_CHECKPOINT_NS: "", **config[CONF]}}


def _thread_of(config: Mapping[str, Any]) -> str:
    thread_id = config.get(CONF, {}).get("thread_id")
    if thread_id is None:
        raise ValueError(
            "get_timeline() needs the thread: pass config={'configurable': {'thread_id': '...'}}"
        )
    return str(thread_id)


def _task_result(writes: list[tuple[str, Any]]) -> Any:
    """A snapshot task's ``result``, shaped as LangGraph shapes it: an
    ``@entrypoint``'s is the value it returned (``entrypoint.final``'s
    ``value``; what it saves for ``previous`` is not its result); another
    task's is the channels it wrote, by name."""
    for chan, value in writes:
        if chan == END:
            return value
    return {c: v for c, v in writes if c not in RESERVED} or None
