"""The run driver: one run of a graph, from the caller's side.

``Pregel.stream``/``astream``/``invoke``/``ainvoke`` all start a ``RunDriver``.
It makes every decision about a run once (which loop, which modes, what the
caller gets, how the run ends); ``events`` and ``aevents`` differ only in how
they wait for the loop and the runner.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_REPLAY_CHECK, EVENTS
from pregelkit._internal._threads import on_loop
from pregelkit.errors import GraphRecursionError
from pregelkit.pregel._core.output import DONE, Raw
from pregelkit.pregel._exec.stop import RunStop, StopRequested
from pregelkit.pregel._graph.validate import check_config
from pregelkit.runtime import RunControl

if TYPE_CHECKING:
    import asyncio

    from pregelkit.pregel._core.loop import PregelLoop
    from pregelkit.pregel._core.perform import AsyncPregelLoop, SyncPregelLoop
    from pregelkit.pregel._exec.runner import PregelRunner, ScheduleTask, StepRules
    from pregelkit.pregel._graph.protocol import RunGraph

__all__ = ["RunDriver"]


class RunDriver:
    """One run: the events its loop emits, queued for the caller to take."""

    def __init__(
        self,
        graph: RunGraph,
        input: Any,
        config: dict[str, Any],
        modes: frozenset[str],
        *,
        live: bool,
        durability: str | None,
        interrupt_before: Sequence[str] | str | None,
        interrupt_after: Sequence[str] | str | None,
        subgraphs: bool,
        control: RunControl | None = None,
    ) -> None:
        if control is not None and not isinstance(control, RunControl):
            raise TypeError(
                f"control= takes a pregelkit.runtime.RunControl, got {type(control).__name__}"
            )
        dur = durability or config.get(CONF, {}).get("__pregel_durability") or "async"
        if dur not in ("sync", "async", "exit"):
            raise ValueError(f"durability must be 'sync', 'async' or 'exit', got {dur!r}")
        self.graph = graph
        self.input = input
        self.config = config
        self.modes = modes
        self.live = live
        self.durability = dur
        self.interrupt_before = (
            interrupt_before if interrupt_before is not None else graph.interrupt_before_nodes
        )
        self.interrupt_after = (
            interrupt_after if interrupt_after is not None else graph.interrupt_after_nodes
        )
        self.subgraphs = subgraphs
        self.control = control
        self.queue: deque[Raw] = deque()
        # the running ``aevents``' emitter: ``astream_events`` sends itself a
        # marker through it, which wakes the driver
        self.emit: Callable[[tuple[str, ...], str, Any], None] | None = None

    def _core(self, emit: Callable[..., None], is_async: bool) -> PregelLoop:
        graph = self.graph
        return (_ENGINE or _load_engine()).PregelLoop(
            self.input,
            graph=graph,
            config=self.config,
            stream=emit,
            stream_modes=self.modes,
            checkpointer=graph._saver(),
            store=graph.store,
            cache=graph.cache,
            durability=self.durability,
            interrupt_before=self.interrupt_before,
            interrupt_after=self.interrupt_after,
            is_async=is_async,
            stream_subgraphs=self.subgraphs,
        )

    # sync: the caller's thread waits on a threading.Event
    def events(self) -> Generator[Raw, None, None]:
        """The run's raw events, its last one saying how it ended."""
        queue = self.queue
        wake = threading.Event() if self.live else None

        def emit(ns: tuple[str, ...], mode: str, payload: Any) -> None:
            queue.append((ns, mode, payload))
            if wake is not None:
                wake.set()

        graph = self.graph
        core = self._core(emit, False)
        loop = (_ENGINE or _load_engine()).SyncPregelLoop(core)
        stop = core.run_stop
        with _Running(self, core), loop:
            try:
                runner = _runner(loop, is_async=False)
                rules = _step_rules(graph, loop, wake)
                while _next_step(core, stop):
                    loop.match_cached_writes()
                    for _ in runner.tick(core.pending(), rules, wake):
                        while queue:
                            yield queue.popleft()
                    _step_ran(core, stop)
                    loop.after_tick()
                    while queue:
                        yield queue.popleft()
            except BaseException as exc:
                stop.aborted(exc)
                raise
        while queue:
            yield queue.popleft()
        yield from _final_output(self.modes, core)
        yield _ended(core)

    # async: the caller's task waits on an asyncio.Event
    async def aevents(self) -> AsyncGenerator[Raw, None]:
        """The async twin of ``events``."""
        import asyncio

        queue = self.queue
        aloop = asyncio.get_running_loop()
        wake = asyncio.Event() if self.live else None

        def emit(ns: tuple[str, ...], mode: str, payload: Any) -> None:
            queue.append((ns, mode, payload))
            if wake is not None:
                if on_loop(aloop):
                    wake.set()
                else:
                    aloop.call_soon_threadsafe(wake.set)

        self.emit = emit
        graph = self.graph
        core = self._core(emit, True)
        loop = (_ENGINE or _load_engine()).AsyncPregelLoop(core)
        stop = core.run_stop
        if not core.is_nested:
            stop.owner = asyncio.current_task()
        with _Running(self, core):
            async with loop:
                try:
                    runner = _runner(loop, is_async=True)
                    rules = _step_rules(graph, loop, wake)
                    # (each await a coroutine less where nothing is to be waited
                    # for, and the queue drained inline: ~1k instructions each)
                    while _next_step(core, stop):
                        if loop.cache is not None:
                            await loop.amatch_cached_writes()
                        if loop.io_wait:
                            await loop.settle()
                        async for _ in runner.atick(core.pending(), rules, wake):
                            while queue:
                                yield queue.popleft()
                        if loop.io_wait:
                            await loop.settle()
                        _step_ran(core, stop)
                        await loop.aafter_tick()
                        while queue:
                            yield queue.popleft()
                except BaseException as exc:
                    stop.aborted(exc)
                    raise
        while queue:
            yield queue.popleft()
        for event in _final_output(self.modes, core):
            yield event
        yield _ended(core)

    # shared by both
    def _listen(self, loop: PregelLoop) -> Callable[[], None]:
        """Let the caller's ``RunControl`` drain (or cancel) this run; returns the undo."""
        control = self.control
        if control is None or loop.is_nested:
            return _nothing
        stop = loop.run_stop
        stop.control = control
        control._attach(stop)
        return lambda: control._detach(stop)

    def _outcome(self, loop: PregelLoop, exc: BaseException) -> BaseException:
        """What the caller gets for the exception that ended the run: a stopped
        root run raises ``RunCancelledError`` or ``GraphDrained``; a nested
        run leaves that to the root."""
        if loop.is_nested:
            return exc
        thread_id = loop.config.get(CONF, {}).get("thread_id")
        return loop.run_stop.outcome(exc, thread_id) or exc


class _Engine:
    """The run machinery's classes (threads, futures, logging come with
    them): loaded by the first run, not on import, then kept in ``_ENGINE``
    (an import statement in each run cost ~1.5k instructions)."""

    __slots__ = ("AsyncPregelLoop", "PregelLoop", "PregelRunner", "StepRules", "SyncPregelLoop")

    def __init__(self) -> None:
        # as modules: ``from`` a module that is no package first asks it for
        # ``__path__``, and the miss is a formatted AttributeError, ~1 us
        import pregelkit.pregel._core.loop as core_loop
        import pregelkit.pregel._core.perform as performers
        import pregelkit.pregel._exec.runner as runners

        self.PregelLoop = core_loop.PregelLoop
        self.SyncPregelLoop = performers.SyncPregelLoop
        self.AsyncPregelLoop = performers.AsyncPregelLoop
        self.PregelRunner = runners.PregelRunner
        self.StepRules = runners.StepRules


_ENGINE: _Engine | None = None


def _load_engine() -> _Engine:
    global _ENGINE
    _ENGINE = engine = _Engine()
    return engine


class _Running:
    """Around a run, in ``events`` and ``aevents`` alike: the caller's
    ``RunControl`` may drain it meanwhile, and the exception that ends it
    becomes what the caller gets (a stop becomes its error). A class rather
    than a ``@contextmanager``: 1.2 us less a run."""

    __slots__ = ("core", "detach", "driver")

    def __init__(self, driver: RunDriver, core: PregelLoop) -> None:
        self.driver = driver
        self.core = core
        self.detach = driver._listen(core)

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        core = self.core
        try:
            if exc is not None and (outcome := self.driver._outcome(core, exc)) is not exc:
                raise outcome from (None if isinstance(exc, StopRequested) else exc)
        finally:
            self.detach()
            # the run is over: its runner leaves its stop and its context. A task
            # call made after this (from an attempt abandoned at a timeout, still
            # running) finds no runner and is refused; and as the runner holds the
            # performer, which holds the core, which holds the context, the run's
            # objects go as soon as the caller lets go of them, instead of waiting,
            # one cycle, for the garbage collector
            core.run_stop.forget(core.run.runner)
            core.run.runner = None


def _nothing() -> None:
    return None


def _next_step(core: PregelLoop, stop: RunStop) -> bool:
    """Plan the run's next step; False when the run is over. Refused once the
    run is asked to stop. (With ``_step_ran``, the run loop's decisions,
    written once for ``events`` and ``aevents``, which only wait differently:
    between the two, the driver reads the cache and has the step's tasks run;
    after ``_step_ran``, it has the step's saves made.)"""
    if not core.tick():
        return False
    if stop.reason is not None:
        raise stop.refuse(None)
    return True


def _step_ran(core: PregelLoop, stop: RunStop) -> None:
    """Refuse to go on from a step a stop left unfinished."""
    if stop.reason is not None and stop.unfinished(core.tasks):
        raise stop.refuse(None)


def _step_rules(
    graph: RunGraph,
    loop: SyncPregelLoop | AsyncPregelLoop,
    wake: threading.Event | asyncio.Event | None,
) -> StepRules:
    """How the runner runs each step of ``loop``'s run (live when the caller
    is woken as output comes)."""
    accept: ScheduleTask = loop.accept_push
    probe = loop.core.run.base_config.get(CONF, {}).get(CONFIG_KEY_REPLAY_CHECK)
    if probe is not None:
        from pregelkit.pregel._core.replay_check import replays_only

        accept = replays_only(accept, loop.calls, probe)
    return (_ENGINE or _load_engine()).StepRules(
        graph.step_timeout, graph.retry_policy, accept, wake is not None
    )


def _runner(loop: SyncPregelLoop | AsyncPregelLoop, *, is_async: bool) -> PregelRunner:
    """The runner of ``loop``'s run, built on the loop it saves, replays and stops through."""
    runner = (_ENGINE or _load_engine()).PregelRunner(loop, is_async=is_async)
    loop.core.run.runner = runner
    loop.run_stop.runners.append(runner)
    return runner


def _final_output(modes: frozenset[str], loop: PregelLoop) -> tuple[Raw, ...]:
    """For ``astream_events`` (its ``EVENTS`` mode): what the run's stream
    channels hold at its end, the output of its root ``on_chain_end``, as
    LangGraph reports it (None when the run stopped before writing them)."""
    if EVENTS not in modes:
        return ()
    from pregelkit.pregel._plan.io import read_channels

    return (((), EVENTS, ("output", None, read_channels(loop.channels, loop.output_keys))),)


def _ended(loop: PregelLoop) -> Raw:
    """The last event of a run, or the error that ended it."""
    if loop.status == "out_of_steps":
        raise GraphRecursionError(
            f"Recursion limit of {loop.config.get('recursion_limit', 25)} reached without "
            "hitting a stop condition. Raise it with config={'recursion_limit': N} if the "
            "graph is meant to run that long."
        )
    return ((), DONE, loop.interrupts)


def run_config(
    base: Mapping[str, Any] | None, config: Mapping[str, Any] | None, context: Any
) -> dict[str, Any]:
    """The config of one run: the graph's defaults, then the caller's (merged
    as ``merge_config`` does), then ``context`` (given to ``invoke``) under
    its own key."""
    check_config(config)
    merged: dict[str, Any] = dict(base) if base else {}
    if config:
        merge_config(merged, config)
    if context is not None:
        merged["context"] = context
    merged.setdefault(CONF, {})
    return merged


def merge_config(merged: dict[str, Any], config: Mapping[str, Any]) -> None:
    """Merge ``config`` into ``merged`` as LangGraph merges configs (a graph's
    ``with_config`` one, then a call's): ``tags`` concatenated (duplicates
    kept), ``metadata`` and ``configurable`` merged with ``config``'s keys
    winning, empty or None ``tags``/``metadata`` adding nothing, any other
    key replaced."""
    for k, v in config.items():
        if k == CONF and CONF in merged:
            merged[CONF] = {**merged[CONF], **v}
        elif k == "tags" or k == "metadata":
            if not v:
                continue
            old = merged.get(k)
            if not old:
                merged[k] = v
            elif k == "tags":
                merged[k] = [*old, *v]
            else:
                merged[k] = {**old, **v}
        else:
            merged[k] = v
