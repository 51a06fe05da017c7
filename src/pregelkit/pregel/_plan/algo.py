"""Planning: which tasks run next, and how their writes change the channels.

Pure functions over a checkpoint and its channels: no I/O, no threads. The
cost of a step is proportional to what changed in it: nodes are found from
the updated channels through ``trigger_to_nodes``, and only ephemeral
channels that hold a value are told about a new step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from pregelkit._internal._constants import (
    CACHE_NS_WRITES,
    CALL,
    INTERRUPT,
    PULL,
    PUSH,
    RESERVED,
    TASKS,
)
from pregelkit._internal._ids import id_prefix, task_id_after
from pregelkit._internal._ids import task_id as make_task_id
from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import InvalidUpdateError, TaskNotFound
from pregelkit.pregel._graph.nodes import PregelNode
from pregelkit.pregel._graph.scope import RunContext, TaskScope
from pregelkit.types import (
    CacheKey,
    CachePolicy,
    PregelExecutableTask,
    RetryPolicy,
    Send,
)

if TYPE_CHECKING:
    from pregelkit._internal._snapshot import PregelTask
    from pregelkit.checkpoint.base import Checkpoint
    from pregelkit.pregel._graph.protocol import PlanGraph

__all__ = [
    "WritesProtocol",
    "apply_writes",
    "call_position",
    "increment",
    "prepare_next_tasks",
    "prepare_push_call",
    "legacy_push_call_id",
    "push_call_id",
    "should_interrupt",
    "task_path_str",
    "tasks_to_show",
]

Channels = Mapping[str, BaseChannel[Any, Any, Any]]


class WritesProtocol(Protocol):
    """Anything with writes to apply: an executed task or a synthetic one (input)."""

    @property
    def name(self) -> str: ...

    @property
    def writes(self) -> Sequence[tuple[str, Any]]: ...

    @property
    def triggers(self) -> Sequence[str]: ...

    @property
    def path(self) -> tuple[str | int | tuple[Any, ...], ...]: ...


class PregelTaskWrites:
    """Writes not made by a node task: the input, or ``update_state``."""

    __slots__ = ("name", "path", "triggers", "writes")

    def __init__(
        self,
        path: tuple[str | int | tuple[Any, ...], ...],
        name: str,
        writes: Sequence[tuple[str, Any]],
        triggers: Sequence[str],
    ) -> None:
        self.path = path
        self.name = name
        self.writes = writes
        self.triggers = triggers


def increment(current: int | None, channel: Any = None) -> int:
    """Channel versions when there is no checkpointer: plain integers."""
    return 1 if current is None else current + 1


def task_path_str(path: str | int | tuple[Any, ...]) -> str:
    """A task path as a string that sorts in execution order."""
    if isinstance(path, tuple):
        # the parts of a path are mostly names and indexes: formatted here,
        # without a generator and a call each (a task call's id needs its
        # caller's path, and each step's writes are sorted by their tasks')
        parts = []
        for p in path:
            kind = type(p)
            parts.append(p if kind is str else f"{p:010d}" if kind is int else task_path_str(p))
        return "~" + ", ".join(parts)
    if isinstance(path, int):
        return f"{path:010d}"
    return str(path)


class Planner:
    """The facts about one step that every task of it shares."""

    __slots__ = (
        "cache_policy",
        "channels",
        "checkpoint_id",
        "node_order",
        "ns",
        "processes",
        "retry_policy",
        "run",
        "step",
        "step_str",
    )

    def __init__(
        self,
        *,
        checkpoint: Checkpoint,
        processes: Mapping[str, PregelNode],
        channels: Channels,
        step: int,
        ns: str,
        run: RunContext | None,
        node_order: Mapping[str, int],
        retry_policy: Sequence[RetryPolicy] = (),
        cache_policy: CachePolicy[Any] | None = None,
    ) -> None:
        self.checkpoint_id = checkpoint["id"].encode()
        self.processes = processes
        self.channels = channels
        self.step = step
        self.step_str = str(step)
        self.ns = ns
        self.run = run
        self.node_order = node_order
        self.retry_policy = retry_policy
        self.cache_policy = cache_policy

    def make(
        self,
        name: str,
        value: Any,
        proc: Any,
        triggers: Sequence[str],
        path: tuple[Any, ...],
        tid: str,
        node: PregelNode | None,
        cache_policy: CachePolicy[Any] | None,
        retry_policy: Sequence[RetryPolicy] | None,
        key_args: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
        cache_id: str | None = None,
        cache_salt: Callable[[], bytes] | None = None,
        scoped: bool = True,
    ) -> PregelExecutableTask:
        cache_key = None
        policy = cache_policy or self.cache_policy
        if policy is not None and self.run is not None and self.run.cache is not None:
            if cache_salt is not None:
                salt = cache_salt()
            else:
                salt = node.code_fingerprint() if node is not None else b""
            cache_key = _cache_key(policy, name, cache_id or name, value, key_args, salt)
        task = PregelExecutableTask(
            name,
            value,
            proc,
            deque(),
            self.run.base_config if self.run is not None else {},
            triggers,
            retry_policy or self.retry_policy,
            cache_key,
            tid,
            path,
            node.flat_writers if node is not None else (),
            node.subgraphs if node is not None else (),
        )
        if self.run is not None and scoped:
            task.scope = TaskScope(self.run, task, self.ns, self.step)
        return task


def _cache_key(
    policy: CachePolicy[Any],
    name: str,
    identity: str,
    value: Any,
    key_args: tuple[tuple[Any, ...], dict[str, Any]] | None,
    salt: bytes,
) -> CacheKey:
    """Where ``name``'s result for this input is cached: the key hashes what the
    code is (``salt``) with what ``key_func`` makes of the input."""
    import xxhash

    key_func = policy.key_func
    try:
        raw = key_func(*key_args[0], **key_args[1]) if key_args else key_func(value)
    except Exception as exc:
        exc.add_note(f"while computing the cache key of {name!r} with CachePolicy.key_func")
        raise
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    elif not isinstance(raw, (bytes, bytearray)):
        func = getattr(key_func, "__qualname__", None) or repr(key_func)
        raise TypeError(
            f"CachePolicy(key_func={func}) returned {type(raw).__name__} {raw!r:.60} for "
            f"{name!r}; it must return str or bytes: build a string of what decides the "
            "result, e.g. f'{user_id}:{query}'"
        )
    h = xxhash.xxh3_128(salt)
    h.update(raw)
    return CacheKey((CACHE_NS_WRITES, identity, name), h.hexdigest(), policy.ttl)


def _triggers(
    channels: Channels,
    versions: Mapping[str, Any],
    seen: Mapping[str, Any] | None,
    proc: PregelNode,
) -> bool:
    """Whether a trigger channel of ``proc`` holds a version it has not run on.

    A channel that was never written has no version and triggers nothing, even
    if it starts with a value (a ``BinaryOperatorAggregate``'s initial one):
    otherwise a resumed run, which checks every node, would run nodes that the
    uninterrupted run never triggered."""
    for chan in proc.triggers:
        if not channels[chan].is_available():
            continue
        v = versions.get(chan)
        if v is None:
            continue
        if seen is None:
            return True
        s = seen.get(chan)
        if s is None or v > s:
            return True
    return False


def prepare_next_tasks(
    checkpoint: Checkpoint,
    planner: Planner,
    *,
    for_execution: bool,
    trigger_to_nodes: Mapping[str, Sequence[str]] | None = None,
    updated_channels: set[str] | None = None,
) -> dict[str, PregelExecutableTask] | dict[str, PregelTask]:
    """The tasks of the next step: PUSH tasks from Sends, then triggered nodes.

    With ``updated_channels`` known, only nodes subscribed to them are checked;
    on a resume (unknown) every node is.
    """
    channels = planner.channels
    processes = planner.processes
    tasks: list[Any] = []
    # PUSH tasks, from Sends in the tasks channel
    tasks_chan = channels.get(TASKS)
    if tasks_chan is not None and tasks_chan.is_available():
        for idx, send in enumerate(tasks_chan.get()):
            if t := prepare_push_send(planner, idx, send, for_execution=for_execution):
                tasks.append(t)
    # PULL tasks, from triggered nodes
    if updated_channels is not None and trigger_to_nodes is not None:
        candidates: set[str] = set()
        for chan in updated_channels:
            if names := trigger_to_nodes.get(chan):
                candidates.update(names)
        order = planner.node_order
        ordered: Iterable[str] = sorted(candidates, key=order.__getitem__)
    elif not checkpoint["channel_versions"]:
        ordered = ()
    else:
        ordered = processes.keys()
    versions = checkpoint["channel_versions"]
    versions_seen = checkpoint["versions_seen"]
    for name in ordered:
        proc = processes[name]
        if not _triggers(channels, versions, versions_seen.get(name), proc):
            continue
        available = []  # a loop: a generator costs more than a node's trigger or two
        for c in proc.triggers:
            if channels[c].is_available():
                available.append(c)
        triggers = tuple(sorted(available))
        tid = make_task_id(
            planner.checkpoint_id, planner.ns, planner.step_str, name, PULL, *triggers
        )
        path: tuple[Any, ...] = (PULL, name)
        if not for_execution:
            tasks.append(_shown_task(tid, name, path))
            continue
        value = proc.read_input(channels)
        if value is MISSING:
            continue
        tasks.append(
            planner.make(
                name, value, proc, triggers, path, tid, proc, proc.cache_policy, proc.retry_policy
            )
        )
    by_id = {}  # a loop: a comprehension's function costs more than a step's few tasks
    for t in tasks:
        by_id[t.id] = t
    return by_id


def tasks_to_show(
    graph: PlanGraph, checkpoint: Checkpoint, channels: Channels, step: int, ns: str
) -> dict[str, PregelTask]:
    """The tasks ``checkpoint`` leads to, planned to be shown, not run: the
    ``next`` of ``get_state()``, and the tasks of a streamed checkpoint."""
    planner = Planner(
        checkpoint=checkpoint,
        processes=graph.nodes,
        channels=channels,
        step=step,
        ns=ns,
        run=None,
        node_order=graph.node_order,
    )
    tasks = prepare_next_tasks(
        checkpoint, planner, for_execution=False, trigger_to_nodes=graph.trigger_to_nodes
    )
    return cast("dict[str, PregelTask]", tasks)


def prepare_push_send(
    planner: Planner, idx: int, send: Any, *, for_execution: bool
) -> PregelExecutableTask | PregelTask | None:
    if not isinstance(send, Send):
        raise InvalidUpdateError(
            f"the tasks channel holds {type(send).__name__}, expected Send(node, arg)"
        )
    proc = planner.processes.get(send.node)
    if proc is None:
        raise TaskNotFound(
            f"Send({send.node!r}, ...) names no node; nodes: {sorted(planner.processes)}"
        )
    path: tuple[Any, ...] = (PUSH, idx)
    tid = make_task_id(
        planner.checkpoint_id, planner.ns, planner.step_str, send.node, PUSH, str(idx)
    )
    if not for_execution:
        return _shown_task(tid, send.node, path)
    value = send.arg if proc.mapper is None else proc.mapper(send.arg)
    task = planner.make(
        send.node, value, proc, (PUSH,), path, tid, proc, proc.cache_policy, proc.retry_policy
    )
    task.timeout = send.timeout
    return task


def prepare_push_call(
    planner: Planner,
    parent: PregelExecutableTask,
    idx: int,
    call: Any,
    position: tuple[str, str],
    *,
    scoped: bool,
) -> PregelExecutableTask:
    """The task for a functional-API call made by ``parent`` at ``position``
    (``call_position``). A replayed call, which never runs, needs no scope
    (``scoped``): nor the reference cycle a task and its scope make."""
    tid, parent_path_str = position
    name = call.name
    value = (call.args, call.kwargs)
    run = planner.run
    cache_key = None
    policy = call.cache_policy or planner.cache_policy
    if policy is not None and run is not None and run.cache is not None:
        salt = b"" if call.cache_salt is None else call.cache_salt()
        cache_key = _cache_key(policy, name, call.identity, value, value, salt)
    # the task, built here rather than by ``Planner.make``: a call has no
    # node, and this is once per call
    task = PregelExecutableTask(
        name,
        value,
        call,
        deque(),
        run.base_config if run is not None else {},
        _PUSH_TRIGGERS,
        call.retry_policy or planner.retry_policy,
        cache_key,
        tid,
        (PUSH, parent.path, idx, parent.id),
        (),
        (),
        None,
        # the path savers store: none to save it without one
        ""
        if run is not None and run.checkpointer is None
        else f"~{PUSH}, {parent_path_str}, {str(idx).zfill(10)}, {parent.id}",  # no spec to parse
    )
    if run is not None and scoped:
        scope = task.scope = TaskScope(run, task, planner.ns, planner.step)
        scope.caller = parent.scope
    return task


_PUSH_TRIGGERS = (PUSH,)


def push_call_id(planner: Planner, parent: PregelExecutableTask, idx: int) -> str:
    """The id of the call ``parent`` makes at position ``idx``."""
    return call_position(planner, parent, idx)[0]


def call_position(planner: Planner, parent: PregelExecutableTask, idx: int) -> tuple[str, str]:
    """The id of the call ``parent`` makes at position ``idx``, and ``parent``'s
    path as a string: the id depends only on the parent's path and the call's
    position, not on what is called, so a replay finds the call recorded at
    that position and can check it is the same call (see ``_plan.replay``).
    What the ids of a parent's calls share is kept in its scope, for the step
    (``planner``) it runs in."""
    scope = parent.scope
    known = scope.call_prefix if scope is not None else None
    if known is None or known[0] is not planner:
        parent_path_str = task_path_str(parent.path)
        known = (
            planner,
            id_prefix(planner.checkpoint_id, planner.ns, planner.step_str, PUSH, parent_path_str),
            parent_path_str,
        )
        if scope is not None:
            scope.call_prefix = known
    return task_id_after(known[1], str(idx)), known[2]


def legacy_push_call_id(planner: Planner, parent: PregelExecutableTask, idx: int, name: str) -> str:
    """The id a call had before ids left the task name out: threads recorded
    then still find their results (unchecked, as they carry no identity)."""
    parent_path_str = call_position(planner, parent, idx)[1]
    return make_task_id(
        planner.checkpoint_id,
        planner.ns,
        planner.step_str,
        name,
        PUSH,
        parent_path_str,
        str(idx),
    )


def _path_key(task: WritesProtocol) -> str:
    return task_path_str(task.path[:3])


def apply_writes(
    checkpoint: Checkpoint,
    channels: Mapping[str, BaseChannel[Any, Any, Any]],
    tasks: Iterable[WritesProtocol],
    get_next_version: Any,
    trigger_to_nodes: Mapping[str, Sequence[str]],
    *,
    live_ephemeral: set[str] | None = None,
    changed: set[str] | None = None,
    max_version: Any = MISSING,
) -> set[str]:
    """Apply a step's writes to channels and versions; return the channels updated.

    Writes are applied in task-path order so the result does not depend on
    which task finished first. ``live_ephemeral`` (kept by the caller across
    steps) lists the available channels that clear themselves on a new step;
    ``changed`` collects every channel whose version moved.
    """
    versions = checkpoint["channel_versions"]
    seen_all = checkpoint["versions_seen"]
    if max_version is MISSING:
        max_version = max(versions.values()) if versions else None
    next_version = get_next_version(max_version, None) if get_next_version else None

    pending: dict[str, list[Any]] = {}
    with_writes = []  # a loop: a comprehension's function costs more than a step's few tasks
    for t in tasks:
        if t.writes or t.triggers:
            with_writes.append(t)
    if len(with_writes) > 1:
        with_writes.sort(key=_path_key)
    for task in with_writes:
        if task.triggers and task.triggers[0] != PUSH:
            seen = seen_all.get(task.name)
            if seen is None:
                seen = seen_all[task.name] = {}
            for chan in task.triggers:
                if (v := versions.get(chan)) is not None:
                    seen[chan] = v
        for chan, value in task.writes:
            if chan in RESERVED and chan != TASKS:  # Sends go to the tasks channel
                continue
            bucket = pending.get(chan)
            if bucket is None:
                if chan not in channels:
                    raise InvalidUpdateError(
                        f"task {task.name!r} wrote to unknown channel {chan!r}; "
                        f"channels: {sorted(channels)}"
                    )
                pending[chan] = [value]
            else:
                bucket.append(value)

    # consume channels that triggered tasks
    moved: set[str] = set() if changed is None else changed
    for task in with_writes:
        if task.triggers and task.triggers[0] != PUSH:
            for chan in task.triggers:
                c = channels.get(chan)
                if c is not None and c.consume() and next_version is not None:
                    versions[chan] = next_version
                    moved.add(chan)

    updated: set[str] = set()
    for chan, values in pending.items():
        c = channels[chan]
        try:
            changed_now = c.update(values)
        except InvalidUpdateError as exc:
            raise InvalidUpdateError(f"{exc} (channel {chan!r})") from exc
        if changed_now:
            if next_version is not None:
                versions[chan] = next_version
            moved.add(chan)
            if c.is_available():
                updated.add(chan)
                if live_ephemeral is not None and c.clears_on_step:
                    live_ephemeral.add(chan)

    # a new step: ephemeral channels not written in it lose their value
    if live_ephemeral:
        for chan in [c for c in live_ephemeral if c not in updated]:
            c = channels[chan]
            if c.update(()):
                if next_version is not None:
                    versions[chan] = next_version
                moved.add(chan)
            if not c.is_available():
                live_ephemeral.discard(chan)
    elif live_ephemeral is None:
        for chan, c in channels.items():
            if chan not in updated and c.clears_on_step and c.is_available() and c.update(()):
                if next_version is not None:
                    versions[chan] = next_version
                moved.add(chan)

    # nothing left to trigger: let channels finish (asked of the keys, which
    # iterate the few updated channels; a set asked of a dict walks the dict)
    if trigger_to_nodes.keys().isdisjoint(updated):
        for chan, c in channels.items():
            if c.finish():
                if next_version is not None:
                    versions[chan] = next_version
                moved.add(chan)
                if c.is_available():
                    updated.add(chan)
    return updated


def should_interrupt(
    checkpoint: Checkpoint,
    interrupt_nodes: Sequence[str] | str,
    tasks: Iterable[PregelExecutableTask],
) -> list[PregelExecutableTask]:
    """The tasks to stop at for interrupt_before/after, if any channel moved since
    the last such interrupt (so resuming does not stop at the same place again)."""
    seen = checkpoint["versions_seen"].get(INTERRUPT, {})
    any_updates = any(
        v > seen[chan] if chan in seen else True
        for chan, v in checkpoint["channel_versions"].items()
    )
    if not any_updates:
        return []
    return [t for t in tasks if interrupt_nodes == "*" or t.name in interrupt_nodes]


def is_done_write(channel: str) -> bool:
    """Whether a pending write marks its task as finished (so it is not re-run)."""
    return channel not in _NOT_DONE


_NOT_DONE = frozenset({"__error__", INTERRUPT, "__resume__", "__scheduled__", CALL})


def _shown_task(tid: str, name: str, path: tuple[Any, ...]) -> PregelTask:
    """A task as a state snapshot shows it (``for_execution=False``)."""
    from pregelkit.types import PregelTask  # loaded with the state API

    return PregelTask(tid, name, path)
