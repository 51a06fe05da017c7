"""``Pregel``: a graph of nodes and channels, run in supersteps.

The drivers here are thin: ``stream`` and ``astream`` differ only in how they
wait; every decision lives in the loop, the planner and the runner.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any, cast

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    ERROR,
    INPUT,
    INTERRUPT,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
    RESERVED,
    TASKS,
)
from pregelkit._internal._ids import uuid6
from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.channels.topic import Topic
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from pregelkit.errors import GraphRecursionError, InvalidUpdateError
from pregelkit.pregel._algo import (
    Planner,
    PregelTaskWrites,
    apply_writes,
    is_done_write,
    prepare_next_tasks,
)
from pregelkit.pregel._io import print_debug, read_channels
from pregelkit.pregel._read import NodeBuilder, PregelNode
from pregelkit.pregel._surface import RunnableSurface
from pregelkit.pregel._write import control_writes
from pregelkit.types import (
    CachePolicy,
    Interrupt,
    PregelTask,
    RetryPolicy,
    Send,
    StateSnapshot,
    StreamMode,
)

if TYPE_CHECKING:
    from pregelkit.pregel._loop import AsyncPregelLoop, PregelLoop, SyncPregelLoop

__all__ = ["NodeBuilder", "Pregel"]

_DONE = "__pregelkit_done__"
_Raw = tuple[tuple[str, ...], str, Any]


class Pregel(RunnableSurface):
    """A graph of nodes that communicate through channels, run in supersteps.

    In each step every triggered node runs in parallel on the values of the
    previous step; their writes are applied together when all have finished.
    """

    def __init__(
        self,
        *,
        nodes: Mapping[str, PregelNode | NodeBuilder],
        channels: Mapping[str, BaseChannel[Any, Any, Any]] | None,
        input_channels: str | Sequence[str],
        output_channels: str | Sequence[str],
        stream_channels: str | Sequence[str] | None = None,
        stream_mode: StreamMode = "values",
        checkpointer: BaseCheckpointSaver[Any] | bool | None = None,
        store: Any = None,
        cache: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] = (),
        cache_policy: CachePolicy[Any] | None = None,
        interrupt_before_nodes: Sequence[str] | str = (),
        interrupt_after_nodes: Sequence[str] | str = (),
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        step_timeout: float | None = None,
        debug: bool = False,
        name: str = "LangGraph",
        context_schema: Any = None,
        auto_validate: bool = True,
    ) -> None:
        built: dict[str, PregelNode] = {}
        for node_name, node in nodes.items():
            if isinstance(node, NodeBuilder):
                node = node.build()
            if not isinstance(node, PregelNode):
                raise TypeError(
                    f"node {node_name!r} must be a NodeBuilder or PregelNode, "
                    f"got {type(node).__name__}"
                )
            built[node_name] = node
        self.nodes = built
        self.channels: dict[str, BaseChannel[Any, Any, Any]] = dict(channels or {})
        if TASKS not in self.channels:
            self.channels[TASKS] = Topic(Send, accumulate=False)
        for key, channel in self.channels.items():
            channel.key = key
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.stream_channels = stream_channels
        self.stream_mode = stream_mode
        self.checkpointer = checkpointer
        self.store = store
        self.cache = cache
        if isinstance(retry_policy, RetryPolicy):
            retry_policy = (retry_policy,)
        self.retry_policy: Sequence[RetryPolicy] = tuple(retry_policy)
        self.cache_policy = cache_policy
        self.interrupt_before_nodes = (
            interrupt_before if interrupt_before is not None else interrupt_before_nodes
        )
        self.interrupt_after_nodes = (
            interrupt_after if interrupt_after is not None else interrupt_after_nodes
        )
        self.step_timeout = step_timeout
        self.debug = debug
        self.name = name
        self.context_schema = context_schema
        self.node_order = {n: i for i, n in enumerate(self.nodes)}
        trigger_to_nodes: dict[str, list[str]] = {}
        for node_name, pnode in self.nodes.items():
            for trigger in pnode.triggers:
                trigger_to_nodes.setdefault(trigger, []).append(node_name)
        self.trigger_to_nodes = trigger_to_nodes
        if stream_channels is not None:
            self.stream_channels_asis: str | Sequence[str] = stream_channels
        else:
            self.stream_channels_asis = [
                k for k in self.channels if k not in RESERVED and k != TASKS
            ]
        if auto_validate:
            self.validate()

    # construction
    def validate(self) -> Pregel:
        """Check that every name a node, input or output uses exists."""
        chans = self.channels
        for name, node in self.nodes.items():
            if name in RESERVED or name.startswith("__pregel"):
                raise ValueError(f"node name {name!r} is reserved; pick another name")
            for chan in node.triggers:
                if chan not in chans:
                    raise ValueError(
                        f"node {name!r} subscribes to unknown channel {chan!r}; "
                        f"channels: {sorted(c for c in chans if c != TASKS)}"
                    )
            read = [node.channels] if isinstance(node.channels, str) else node.channels
            for chan in read:
                if chan not in chans:
                    raise ValueError(
                        f"node {name!r} reads unknown channel {chan!r}; "
                        f"channels: {sorted(c for c in chans if c != TASKS)}"
                    )
            for writer in node.flat_writers:
                for chan in writer.channels:
                    if chan not in chans and chan not in RESERVED:
                        raise ValueError(
                            f"node {name!r} writes to unknown channel {chan!r}; "
                            f"channels: {sorted(c for c in chans if c != TASKS)}"
                        )
            # a node with no triggers is fine: it runs only when sent to (Send)
        for label, keys in (
            ("input", self.input_channels),
            ("output", self.output_channels),
            ("stream", self.stream_channels or ()),
        ):
            for chan in [keys] if isinstance(keys, str) else keys:
                if chan not in chans:
                    raise ValueError(
                        f"{label} channel {chan!r} does not exist; "
                        f"channels: {sorted(c for c in chans if c != TASKS)}"
                    )
        for label, sel in (
            ("interrupt_before", self.interrupt_before_nodes),
            ("interrupt_after", self.interrupt_after_nodes),
        ):
            if sel != "*":
                for node_name in sel:
                    if node_name not in self.nodes:
                        raise ValueError(
                            f"{label} names unknown node {node_name!r}; nodes: {sorted(self.nodes)}"
                        )
        return self

    def copy(self, **update: Any) -> Pregel:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update)
        return new

    def with_config(self, config: dict[str, Any] | None = None, **kwargs: Any) -> Pregel:
        return self.copy(
            _default_config={**getattr(self, "_default_config", {}), **(config or {}), **kwargs}
        )

    def get_graph(self, config: dict[str, Any] | None = None, *, xray: bool | int = False) -> Any:
        """The graph's nodes and channels, drawable with ``draw_mermaid()``."""
        from pregelkit.pregel._draw import DrawableGraph

        return DrawableGraph.from_pregel(self)

    # configuration of one run
    def _saver(self) -> BaseCheckpointSaver[Any] | None:
        cp = self.checkpointer
        return cp if isinstance(cp, BaseCheckpointSaver) else None

    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        base = getattr(self, "_default_config", None)
        merged: dict[str, Any] = dict(base) if base else {}
        if config:
            for k, v in config.items():
                if k == CONF and CONF in merged:
                    merged[CONF] = {**merged[CONF], **v}
                else:
                    merged[k] = v
        merged.setdefault(CONF, {})
        return merged

    def _outputs(self, output_keys: str | Sequence[str] | None) -> Pregel:
        """This graph, or a copy that outputs ``output_keys`` instead of its own
        output channels."""
        if output_keys is None or output_keys == self.output_channels:
            return self
        for chan in [output_keys] if isinstance(output_keys, str) else output_keys:
            if chan not in self.channels:
                raise ValueError(
                    f"output_keys names unknown channel {chan!r}; "
                    f"channels: {sorted(c for c in self.channels if c != TASKS)}"
                )
        return self.copy(output_channels=output_keys)

    def _modes(
        self, stream_mode: StreamMode | Sequence[StreamMode] | None, debug: bool | None
    ) -> tuple[frozenset[str], bool, bool]:
        """The modes to emit, whether one mode was asked for (bare chunks), and
        whether debug events are to be printed (``debug=True`` without asking
        for the ``debug`` stream) rather than yielded."""
        mode = stream_mode if stream_mode is not None else self.stream_mode
        if isinstance(mode, str):
            modes = {mode}
            single = True
        else:
            modes = set(mode)
            single = False
        printing = (self.debug if debug is None else debug) and "debug" not in modes
        if printing:
            modes.add("debug")
        return frozenset(modes), single, printing

    def _make_loop(
        self,
        cls: type[PregelLoop],
        input: Any,
        config: dict[str, Any],
        emit: Any,
        modes: frozenset[str],
        *,
        durability: str | None,
        interrupt_before: Sequence[str] | str | None,
        interrupt_after: Sequence[str] | str | None,
        subgraphs: bool,
        is_async: bool,
    ) -> Any:
        if isinstance(input, Mapping) is False and input is None and config.get(CONF) is None:
            pass
        dur = durability or config.get(CONF, {}).get("__pregel_durability") or "async"
        if dur not in ("sync", "async", "exit"):
            raise ValueError(f"durability must be 'sync', 'async' or 'exit', got {dur!r}")
        return cls(
            input,
            graph=self,
            config=config,
            stream=emit,
            stream_modes=modes,
            checkpointer=self._saver(),
            store=self.store,
            cache=self.cache,
            durability=dur,
            interrupt_before=(
                interrupt_before if interrupt_before is not None else self.interrupt_before_nodes
            ),
            interrupt_after=(
                interrupt_after if interrupt_after is not None else self.interrupt_after_nodes
            ),
            is_async=is_async,
            stream_subgraphs=subgraphs,
        )

    # sync driver
    def _run(
        self,
        input: Any,
        config: Mapping[str, Any] | None,
        modes: frozenset[str],
        *,
        live: bool,
        durability: str | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        subgraphs: bool = False,
    ) -> Iterator[_Raw]:
        queue: deque[_Raw] = deque()
        wake = threading.Event() if live else None

        def emit(ns: tuple[str, ...], mode: str, payload: Any) -> None:
            queue.append((ns, mode, payload))
            if wake is not None:
                wake.set()

        # the run machinery (threads, futures, logging) loads on first run, not on import
        from pregelkit.pregel._loop import SyncPregelLoop
        from pregelkit.pregel._runner import PregelRunner

        loop: SyncPregelLoop = self._make_loop(
            SyncPregelLoop,
            input,
            self._config(config),
            emit,
            modes,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            subgraphs=subgraphs,
            is_async=False,
        )
        with loop:
            runner = PregelRunner(submit=loop.submit, put_writes=loop.put_writes)
            loop.run.runner = runner
            while loop.tick():
                loop.match_cached_writes()
                for _ in runner.tick(
                    [t for t in loop.tasks.values() if not t.writes],
                    timeout=self.step_timeout,
                    retry_policy=self.retry_policy,
                    get_waiter=wake.is_set if wake is not None else None,
                    schedule_task=loop.accept_push,
                    wake=wake,
                ):
                    while queue:
                        yield queue.popleft()
                loop.after_tick()
                while queue:
                    yield queue.popleft()
        while queue:
            yield queue.popleft()
        yield _ended(loop)

    def stream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: str | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        context: Any = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Run the graph, yielding output as it is produced (see ``stream_mode``).

        The ``values`` mode streams the graph's stream channels (``invoke``
        returns its output channels), unless ``output_keys`` says otherwise."""
        modes, single, printing = self._modes(stream_mode, debug)
        config = _with_context(config, context)
        keys = self.stream_channels_asis if output_keys is None else output_keys
        for _ns, mode, payload in self._outputs(keys)._run(
            input,
            config,
            modes,
            live=True,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            subgraphs=subgraphs,
        ):
            if mode == _DONE:
                continue
            if printing and mode == "debug":
                print_debug(payload)
                continue
            yield _format(_ns, mode, payload, single, subgraphs)

    def invoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode = "values",
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: str | None = None,
        context: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Run the graph to the end (or an interrupt) and return its output.

        With ``stream_mode="values"`` the result is the final output; if the
        run stopped at interrupts, a dict with them under ``"__interrupt__"``.
        """
        modes, _, printing = self._modes(stream_mode, kwargs.get("debug"))
        result = _InvokeResult(stream_mode, printing)
        for _ns, mode, payload in self._outputs(output_keys)._run(
            input,
            _with_context(config, context),
            modes,
            live=False,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
        ):
            result.add(mode, payload)
        return result.value()

    def batch(
        self,
        inputs: Sequence[Any],
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """``invoke`` each input (in parallel threads), results in order."""
        import concurrent.futures

        configs = list(config) if isinstance(config, Sequence) else [config] * len(inputs)
        if len(configs) != len(inputs):
            raise ValueError(f"batch got {len(inputs)} inputs but {len(configs)} configs")
        if len(inputs) <= 1:
            return [self.invoke(i, c, **kwargs) for i, c in zip(inputs, configs)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(inputs))) as pool:
            return list(
                pool.map(lambda ic: self.invoke(ic[0], ic[1], **kwargs), zip(inputs, configs))
            )

    # async driver
    async def _arun(
        self,
        input: Any,
        config: Mapping[str, Any] | None,
        modes: frozenset[str],
        *,
        live: bool,
        durability: str | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        subgraphs: bool = False,
    ) -> AsyncIterator[_Raw]:
        import asyncio

        queue: deque[_Raw] = deque()
        aloop = asyncio.get_running_loop()
        wake = asyncio.Event() if live else None

        def emit(ns: tuple[str, ...], mode: str, payload: Any) -> None:
            queue.append((ns, mode, payload))
            if wake is not None:
                try:
                    on_loop = asyncio.get_running_loop() is aloop
                except RuntimeError:
                    on_loop = False
                if on_loop:
                    wake.set()
                else:
                    aloop.call_soon_threadsafe(wake.set)

        from pregelkit.pregel._loop import AsyncPregelLoop
        from pregelkit.pregel._runner import PregelRunner

        loop: AsyncPregelLoop = self._make_loop(
            AsyncPregelLoop,
            input,
            self._config(config),
            emit,
            modes,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            subgraphs=subgraphs,
            is_async=True,
        )
        async with loop:
            runner = PregelRunner(submit=loop.submit, put_writes=loop.put_writes, is_async=True)
            loop.run.runner = runner
            while loop.tick():
                await loop.amatch_cached_writes()
                await loop.settle()
                async for _ in runner.atick(
                    [t for t in loop.tasks.values() if not t.writes],
                    timeout=self.step_timeout,
                    retry_policy=self.retry_policy,
                    get_waiter=wake.is_set if wake is not None else None,
                    schedule_task=loop.accept_push,
                    wake=wake,
                ):
                    while queue:
                        yield queue.popleft()
                await loop.settle()
                loop.after_tick()
                await loop.settle()
                while queue:
                    yield queue.popleft()
        while queue:
            yield queue.popleft()
        yield _ended(loop)

    async def astream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: str | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        context: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """The async twin of ``stream``."""
        modes, single, printing = self._modes(stream_mode, debug)
        keys = self.stream_channels_asis if output_keys is None else output_keys
        async for _ns, mode, payload in self._outputs(keys)._arun(
            input,
            _with_context(config, context),
            modes,
            live=True,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            subgraphs=subgraphs,
        ):
            if mode == _DONE:
                continue
            if printing and mode == "debug":
                print_debug(payload)
                continue
            yield _format(_ns, mode, payload, single, subgraphs)

    async def ainvoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode = "values",
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: str | None = None,
        context: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The async twin of ``invoke``."""
        modes, _, printing = self._modes(stream_mode, kwargs.get("debug"))
        result = _InvokeResult(stream_mode, printing)
        async for _ns, mode, payload in self._outputs(output_keys)._arun(
            input,
            _with_context(config, context),
            modes,
            live=False,
            durability=durability,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
        ):
            result.add(mode, payload)
        return result.value()

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        import asyncio

        configs = list(config) if isinstance(config, Sequence) else [config] * len(inputs)
        return list(
            await asyncio.gather(*(self.ainvoke(i, c, **kwargs) for i, c in zip(inputs, configs)))
        )

    # state
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
        if saved is None:
            return StateSnapshot({}, (), dict(config), None, None, None, (), ())
        checkpoint = saved.checkpoint
        channels = self._channels_of(checkpoint)
        step = int(saved.metadata.get("step", -1)) + 1
        planner = Planner(
            checkpoint=checkpoint,
            processes=self.nodes,
            channels=channels,
            step=step,
            ns=saved.config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, ""),
            run=None,
            node_order=self.node_order,
        )
        next_tasks = cast(
            dict[str, PregelTask],
            prepare_next_tasks(
                checkpoint, planner, for_execution=False, trigger_to_nodes=self.trigger_to_nodes
            ),
        )
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
            result = {c: v for c, v in writes if c not in RESERVED} or None
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
                apply_writes(checkpoint, channels, done, None, self.trigger_to_nodes)
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
        saver = self._require_saver()
        config = self._config(config)
        latest = not config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)
        snapshot = self._snapshot(config, saver.get_tuple(config), apply_pending=latest)
        if not subgraphs:
            return snapshot
        tasks = []
        for task, child, child_config in self._subgraph_tasks(snapshot):
            if child is self:
                tasks.append(task)
                continue
            state = child._snapshot(child_config, saver.get_tuple(child_config), apply_pending=True)
            tasks.append(task._replace(state=state) if state.metadata is not None else task)
        return snapshot._replace(tasks=tuple(tasks))

    def _subgraph_tasks(
        self, snapshot: StateSnapshot
    ) -> Iterator[tuple[PregelTask, Pregel, dict[str, Any]]]:
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

    async def aget_state(
        self, config: Mapping[str, Any], *, subgraphs: bool = False
    ) -> StateSnapshot:
        saver = self._require_saver()
        config = self._config(config)
        latest = not config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)
        snapshot = self._snapshot(config, await saver.aget_tuple(config), apply_pending=latest)
        if not subgraphs:
            return snapshot
        tasks = []
        for task, child, child_config in self._subgraph_tasks(snapshot):
            if child is self:
                tasks.append(task)
                continue
            saved = await saver.aget_tuple(child_config)
            state = child._snapshot(child_config, saved, apply_pending=True)
            tasks.append(task._replace(state=state) if state.metadata is not None else task)
        return snapshot._replace(tasks=tuple(tasks))

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
        saver = self._require_saver()
        checkpoint = saved.checkpoint if saved is not None else empty_checkpoint()
        checkpoint = Checkpoint(
            v=checkpoint["v"],
            id=checkpoint["id"],
            ts=checkpoint["ts"],
            channel_values=dict(checkpoint["channel_values"]),
            channel_versions=dict(checkpoint["channel_versions"]),
            versions_seen={k: dict(v) for k, v in checkpoint["versions_seen"].items()},
        )
        channels = self._channels_of(checkpoint)
        step = int(saved.metadata.get("step", -2)) + 1 if saved is not None else -1
        if as_node is None and len(self.nodes) == 1:
            as_node = next(iter(self.nodes))
        if as_node is not None:
            node = self.nodes.get(as_node)
            if node is None:
                raise InvalidUpdateError(
                    f"update_state(as_node={as_node!r}) names no node; nodes: {sorted(self.nodes)}"
                )
            writes = control_writes(values)
            if writes is None:
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
        versions = checkpoint["channel_versions"]
        new_checkpoint = Checkpoint(
            v=checkpoint["v"],
            id=uuid6(clock_seq=step),
            ts=checkpoint["ts"],
            channel_values=values_out,
            channel_versions=versions,
            versions_seen=checkpoint["versions_seen"],
        )
        from datetime import datetime

        new_checkpoint["ts"] = datetime.now(UTC).isoformat()
        metadata: CheckpointMetadata = {"source": "update", "step": step, "parents": {}}
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

    def update_state(
        self,
        config: Mapping[str, Any],
        values: Any,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Write ``values`` to the thread as if ``as_node`` had produced them; a new
        checkpoint (source ``update``) on top of the latest or the given one."""
        saver = self._require_saver()
        config = self._config(config)
        saved = saver.get_tuple(config)
        args = self._plan_update(config, saved, values, as_node)
        return saver.put(*args)

    async def aupdate_state(
        self,
        config: Mapping[str, Any],
        values: Any,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        saver = self._require_saver()
        config = self._config(config)
        saved = await saver.aget_tuple(config)
        args = self._plan_update(config, saved, values, as_node)
        return await saver.aput(*args)


def _root_ns(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` listing one namespace: the root graph's unless it names one
    (a saver lists every namespace of the thread when none is named)."""
    return {**config, CONF: {CONFIG_KEY_CHECKPOINT_NS: "", **config[CONF]}}


class _InvokeResult:
    """What ``invoke``/``ainvoke`` return, gathered from a run's raw events: the
    last values (plus any interrupts), or every chunk of another stream mode."""

    __slots__ = ("chunks", "interrupts", "latest", "printing", "values_mode")

    def __init__(self, stream_mode: str, printing: bool) -> None:
        self.values_mode = stream_mode == "values"
        self.printing = printing
        self.latest: Any = None
        self.chunks: list[Any] = []
        self.interrupts: list[Interrupt] = []

    def add(self, mode: str, payload: Any) -> None:
        if mode == _DONE:
            self.interrupts = payload
        elif self.printing and mode == "debug":
            print_debug(payload)
        elif not self.values_mode:
            self.chunks.append(payload)
        elif not (isinstance(payload, dict) and INTERRUPT in payload and len(payload) == 1):
            self.latest = payload

    def value(self) -> Any:
        if not self.values_mode:
            return self.chunks
        return _with_interrupts(self.latest, self.interrupts)


def _ended(loop: PregelLoop) -> _Raw:
    """The last event of a run, or the error that ended it."""
    if loop.status == "out_of_steps":
        raise GraphRecursionError(
            f"Recursion limit of {loop.config.get('recursion_limit', 25)} reached without "
            "hitting a stop condition. Raise it with config={'recursion_limit': N} if the "
            "graph is meant to run that long."
        )
    return ((), _DONE, loop.interrupts)


def _with_context(config: Mapping[str, Any] | None, context: Any) -> Mapping[str, Any] | None:
    if context is None:
        return config
    return {**(config or {}), "context": context}


def _with_interrupts(latest: Any, interrupts: Sequence[Interrupt]) -> Any:
    if not interrupts:
        return latest
    if isinstance(latest, dict):
        return {**latest, INTERRUPT: list(interrupts)}
    return {INTERRUPT: list(interrupts)}


def _format(ns: tuple[str, ...], mode: str, payload: Any, single: bool, subgraphs: bool) -> Any:
    if subgraphs:
        return (ns, payload) if single else (ns, mode, payload)
    return payload if single else (mode, payload)
