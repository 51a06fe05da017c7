"""``Pregel``: a graph of nodes and channels, run in supersteps.

The drivers here are thin: each starts a ``RunDriver`` (``_core/driver.py``)
and shapes its events for the caller (``_core/output.py``); ``stream`` and
``astream`` differ only in how they wait. The state API lives in
``_api/state.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import RESERVED, TASKS
from pregelkit.channels.base import BaseChannel
from pregelkit.channels.topic import Topic
from pregelkit.pregel._api.run_args import RunArgs
from pregelkit.pregel._api.schedule import ScheduleAPI
from pregelkit.pregel._api.state import StateAPI
from pregelkit.pregel._api.submit import SubmitAPI
from pregelkit.pregel._api.surface import RunnableSurface
from pregelkit.pregel._core.driver import RunDriver, merge_config, run_config
from pregelkit.pregel._core.output import SKIP, InvokeResult, StreamShape
from pregelkit.pregel._graph.nodes import NodeBuilder, PregelNode
from pregelkit.pregel._graph.protocol import PregelProtocol
from pregelkit.pregel._graph.validate import (
    INVOKE_KEYWORDS,
    STREAM_KEYWORDS,
    check_components,
    check_config,
    check_copy_fields,
    check_durability,
    check_interrupt_nodes,
    check_keywords,
    check_stream_mode,
)
from pregelkit.runtime import RunControl
from pregelkit.types import CachePolicy, RetryPolicy, Send, StreamMode, TimeoutPolicy
from pregelkit.warnings import LangGraphDeprecatedSinceV10

if TYPE_CHECKING:
    from datetime import timedelta

    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.pregel._exec.remote import RemoteExecutor

__all__ = ["NodeBuilder", "Pregel"]


class Pregel(StateAPI, SubmitAPI, ScheduleAPI, PregelProtocol, RunnableSurface):
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
        step_timeout: float | timedelta | None = None,
        debug: bool = False,
        name: str = "LangGraph",
        context_schema: Any = None,
        auto_validate: bool = True,
        config_type: Any = None,
        executor: RemoteExecutor | None = None,
    ) -> None:
        if config_type is not None:
            warnings.warn(
                "`config_type` is deprecated and will be removed. "
                "Please use `context_schema` instead.",
                LangGraphDeprecatedSinceV10,
                stacklevel=2,
            )
            context_schema = context_schema or config_type
        check_components(checkpointer, store, cache, retry_policy, cache_policy)
        check_stream_mode(stream_mode)
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
        if executor is not None:
            from pregelkit.pregel._exec.remote import check_executor

            check_executor(executor, built)
        self.executor = executor
        """Where task and node bodies run (e.g. ``DaskExecutor``); None: here."""
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
        step_limit = TimeoutPolicy.coerce(step_timeout, "step_timeout")
        self.step_timeout = None if step_limit is None else step_limit.run_timeout
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
        inputs = (
            [self.input_channels] if isinstance(self.input_channels, str) else self.input_channels
        )
        if inputs and not any(c in node.triggers for node in self.nodes.values() for c in inputs):
            # as LangGraph: an input nothing reads would make every run a no-op
            which = (
                f"input channel {inputs[0]!r} is not"
                if isinstance(self.input_channels, str)
                else f"none of the input channels {list(inputs)!r} is"
            )
            raise ValueError(
                f"{which} subscribed to by any node; subscribe a node to it "
                "(NodeBuilder().subscribe_only(...)) or make a channel a node reads the input"
            )
        self.interrupt_before_nodes = check_interrupt_nodes(
            "interrupt_before", self.interrupt_before_nodes, self.nodes
        )
        self.interrupt_after_nodes = check_interrupt_nodes(
            "interrupt_after", self.interrupt_after_nodes, self.nodes
        )
        return self

    def copy(self, update: Mapping[str, Any] | None = None, **fields: Any) -> Pregel:
        """A copy of this graph with some attributes replaced: ``copy(update={...})``
        (LangGraph's spelling) or ``copy(name=...)``."""
        changes = {**(update or {}), **fields}
        check_copy_fields(self.__dict__, changes)
        if changes.get("executor") is not None:
            from pregelkit.pregel._exec.remote import check_executor

            check_executor(changes["executor"], self.nodes)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def with_config(self, config: dict[str, Any] | None = None, **kwargs: Any) -> Pregel:
        check_config(config)
        check_config(kwargs)
        merged = dict(getattr(self, "_default_config", {}))
        # merged as a run merges the caller's config: tags added, metadata updated
        if config:
            merge_config(merged, config)
        merge_config(merged, kwargs)
        return self.copy(_default_config=merged)

    def get_graph(self, config: dict[str, Any] | None = None, *, xray: bool | int = False) -> Any:
        """The graph's nodes and channels, drawable with ``draw_mermaid()``."""
        from pregelkit.pregel._api.draw import DrawableGraph

        return DrawableGraph.from_pregel(self)

    # configuration of one run
    def _saver(self) -> BaseCheckpointSaver[Any] | None:
        cp = self.checkpointer
        return cp if isinstance(cp, _SAVER_BASE or _load_saver_base()) else None

    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        return run_config(getattr(self, "_default_config", None), config, None)

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

    def _start(
        self, args: RunArgs, extra_modes: frozenset[str] = frozenset()
    ) -> tuple[RunDriver, StreamShape]:
        """The shared start of every run, whichever driver waits on it.

        Each driver keeps its full signature for type checkers and readers
        and hands its arguments over as one ``RunArgs``; the checks and the
        defaults live here once (``stream`` streams the graph's stream
        channels, ``invoke`` returns its output channels). ``extra_modes``
        are internal modes the run emits besides the caller's (``astream_events``
        listens to the engine's ``EVENTS``)."""
        where = args.where
        live = where in ("stream", "astream")
        kwargs = args.kwargs
        if kwargs:
            if live:
                check_keywords(where, kwargs, STREAM_KEYWORDS)
            else:
                check_keywords(where, kwargs, INVOKE_KEYWORDS, extra=("debug",))
        debug = args.debug if live else kwargs.get("debug")
        shape = self._shape(args.stream_mode, debug, args.print_mode, args.version)
        shape.subgraphs = args.subgraphs
        output_keys = args.output_keys
        if live and output_keys is None:
            output_keys = self.stream_channels_asis
        durability = args.durability
        check_durability(durability)
        driver = RunDriver(
            self._outputs(output_keys),
            args.input,
            run_config(getattr(self, "_default_config", None), args.config, args.context),
            shape.modes | extra_modes,
            live=live,
            durability=durability,
            interrupt_before=self._interrupt_nodes("interrupt_before", args.interrupt_before),
            interrupt_after=self._interrupt_nodes("interrupt_after", args.interrupt_after),
            subgraphs=shape.subgraphs,
            control=args.control,
        )
        return driver, shape

    def _interrupt_nodes(self, label: str, value: Any) -> Sequence[str] | str | None:
        """A run's ``interrupt_before``/``_after``, checked (None: the graph's)."""
        return None if value is None else check_interrupt_nodes(label, value, self.nodes)

    def _shape(
        self,
        stream_mode: StreamMode | Sequence[StreamMode] | None,
        debug: bool | None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
    ) -> StreamShape:
        check_stream_mode(stream_mode)
        if print_mode:
            check_stream_mode(print_mode)
        mode = stream_mode if stream_mode is not None else self.stream_mode
        return StreamShape(
            mode, self.debug if debug is None else debug, print_mode=print_mode, version=version
        )

    # drivers: they differ only in how they wait
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
        control: RunControl | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Run the graph, yielding output as it is produced (see ``stream_mode``).

        The ``values`` mode streams the graph's stream channels (``invoke``
        returns its output channels), unless ``output_keys`` says otherwise."""
        args = RunArgs(
            "stream",
            input,
            config,
            kwargs,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            subgraphs=subgraphs,
            debug=debug,
            context=context,
            control=control,
            print_mode=print_mode,
            version=version,
        )
        driver, shape = self._start(args)
        events = driver.events()
        try:
            yield from shape.chunks(events)
        finally:
            events.close()

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
        control: RunControl | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """The async twin of ``stream``."""
        args = RunArgs(
            "astream",
            input,
            config,
            kwargs,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            subgraphs=subgraphs,
            debug=debug,
            context=context,
            control=control,
            print_mode=print_mode,
            version=version,
        )
        driver, shape = self._start(args)
        events = driver.aevents()
        try:
            async for ns, mode, payload in events:
                chunk = shape.chunk(ns, mode, payload)
                if chunk is not SKIP:
                    yield chunk
        finally:
            await events.aclose()

    def astream_events(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        version: str = "v2",
        include_names: Sequence[str] | None = None,
        include_types: Sequence[str] | None = None,
        include_tags: Sequence[str] | None = None,
        exclude_names: Sequence[str] | None = None,
        exclude_types: Sequence[str] | None = None,
        exclude_tags: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Run the graph, yielding LangChain's ``version="v2"`` event dicts:
        ``on_chain_start``/``on_chain_stream``/``on_chain_end`` of the graph
        and of each node and task run in it, so code written against
        LangGraph's ``astream_events`` runs unchanged. Other keywords
        (``stream_mode``, ``durability``, ``context``, ...) go to the run as
        ``astream`` takes them; leaving early (``aclose()``) stops the run.
        See ``pregel._api.v2_events`` for what differs from LangGraph."""
        from pregelkit.pregel._api.v2_events import stream_events  # lazy: keeps imports fast

        return stream_events(
            self,
            input,
            config,
            version=version,
            include=(include_names, include_types, include_tags),
            exclude=(exclude_names, exclude_types, exclude_tags),
            kwargs=kwargs,
        )

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
        control: RunControl | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
        **kwargs: Any,
    ) -> Any:
        """Run the graph to the end (or an interrupt) and return its output.

        With ``stream_mode="values"`` the result is the final output; if the
        run stopped at interrupts, a dict with them under ``"__interrupt__"``.
        """
        args = RunArgs(
            "invoke",
            input,
            config,
            kwargs,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            context=context,
            control=control,
            print_mode=print_mode,
            version=version,
        )
        driver, shape = self._start(args)
        result = InvokeResult(stream_mode, shape)
        events = driver.events()
        try:
            for ns, mode, payload in events:
                result.add(ns, mode, payload)
        finally:
            events.close()
        return result.value()

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
        control: RunControl | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
        **kwargs: Any,
    ) -> Any:
        """The async twin of ``invoke``."""
        args = RunArgs(
            "ainvoke",
            input,
            config,
            kwargs,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            context=context,
            control=control,
            print_mode=print_mode,
            version=version,
        )
        driver, shape = self._start(args)
        result = InvokeResult(stream_mode, shape)
        events = driver.aevents()
        try:
            async for ns, mode, payload in events:
                result.add(ns, mode, payload)
        finally:
            await events.aclose()
        return result.value()

    def batch(
        self,
        inputs: Sequence[Any],
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``invoke`` each input (in parallel threads), results in order; with
        ``return_exceptions`` a run's error is its result instead of raised."""
        import concurrent.futures

        if kwargs:
            check_keywords("batch", kwargs, INVOKE_KEYWORDS, extra=INVOKE_KEYWORDS)
        configs = _batch_configs(inputs, config)

        def one(item: tuple[Any, Any]) -> Any:
            try:
                return self.invoke(item[0], item[1], **kwargs)
            except Exception as exc:
                if return_exceptions:
                    return exc
                raise

        if len(inputs) <= 1:
            return [one(ic) for ic in zip(inputs, configs)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(inputs))) as pool:
            return list(pool.map(one, zip(inputs, configs)))

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        import asyncio

        if kwargs:
            check_keywords("abatch", kwargs, INVOKE_KEYWORDS, extra=INVOKE_KEYWORDS)
        configs = _batch_configs(inputs, config)
        return list(
            await asyncio.gather(
                *(self.ainvoke(i, c, **kwargs) for i, c in zip(inputs, configs)),
                return_exceptions=return_exceptions,
            )
        )


_SAVER_BASE: type[BaseCheckpointSaver[Any]] | None = None


def _load_saver_base() -> type[BaseCheckpointSaver[Any]]:
    """The saver base class: loaded by the first run, not with ``import
    pregelkit.func``, then kept (an import statement a run cost ~1.5k
    instructions; as a module: ``from`` one looks for ``__path__``)."""
    global _SAVER_BASE
    import pregelkit.checkpoint.base as checkpoint_base

    _SAVER_BASE = base = checkpoint_base.BaseCheckpointSaver
    return base


def _batch_configs(
    inputs: Sequence[Any], config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
) -> list[Any]:
    """One config per input: the one given, or the i-th of the list given."""
    if isinstance(config, Sequence) and not isinstance(config, str):
        configs = list(config)
        if len(configs) != len(inputs):
            raise ValueError(f"batch got {len(inputs)} inputs but {len(configs)} configs")
        return configs
    return [config] * len(inputs)
