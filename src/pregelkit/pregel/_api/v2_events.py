"""``Pregel.astream_events``: a run as LangChain's ``version="v2"`` events.

LangGraph gets these events from langchain-core's callback system: every
runnable it invokes (the graph, each node, each step of a node, each task)
reports its start, its streamed output and its end. pregelkit has no
callbacks; the engine reports the same moments on an internal stream mode
(``EVENTS``): a task attempt starting, each step of a node, a body returning
(``stream``), a task's writes committed (``end``), and the run's final
output. This module turns those, and the run's ordinary stream chunks (the
graph's own ``on_chain_stream``), into the event dicts LangGraph yields.

What LangGraph shows and this does too: one run per graph, node attempt,
node step (``NodeBuilder.do``) and ``@task`` call, with ``run_id``,
``parent_ids`` (root first), ``tags`` (``graph:step:N`` for a node,
``seq:step:N`` for a step or a task, then the config's and the node's tags)
and ``metadata`` (the config's, ``ls_integration``, the ``langgraph_*``
keys); no end event for a run that failed or was interrupted; the run's
error raised after the events that came before it. What it does not: no
events of chat models, tools or other LangChain runnables (there are none),
none from inside subgraphs, and no ``version="v1"``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pregelkit._internal._constants import CONF, EVENTS, NS_END, NS_SEP, PUSH, RETURN
from pregelkit.pregel._api.run_args import RunArgs
from pregelkit.pregel._core.output import DONE, SKIP
from pregelkit.pregel._graph.call import Call
from pregelkit.pregel._graph.nodes import PregelNode, _SubgraphStep
from pregelkit.pregel._graph.protocol import RunGraph

if TYPE_CHECKING:
    from pregelkit.pregel._core.driver import RunDriver
    from pregelkit.pregel._core.output import StreamShape
    from pregelkit.types import PregelExecutableTask

__all__ = ["stream_events"]


class EventsGraph(RunGraph, Protocol):
    """A graph whose runs can be told as v2 events: one that starts runs and
    is named as LangGraph names it."""

    @property
    def name(self) -> str: ...
    @property
    def _schema_name(self) -> str: ...
    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]: ...
    def _start(
        self, args: RunArgs, extra_modes: frozenset[str] = ...
    ) -> tuple[RunDriver, StreamShape]: ...


Names = tuple[Sequence[str] | None, Sequence[str] | None, Sequence[str] | None]
"""Filters by name, by run type and by tag, in that order."""

# The keys of config["configurable"] LangGraph copies into every event's
# metadata (measured on LangGraph 1.2.22: others, such as user_id, are not).
_COPIED_KEYS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "run_id",
    "graph_id",
    "assistant_id",
    "task_id",
    "model",
)
# The keyword arguments astream takes by name; the others go in its **kwargs.
_RUN_KEYWORDS = (
    "stream_mode",
    "output_keys",
    "interrupt_before",
    "interrupt_after",
    "durability",
    "subgraphs",
    "debug",
    "context",
    "control",
    "print_mode",
)


async def stream_events(
    graph: EventsGraph,
    input: Any,
    config: Mapping[str, Any] | None,
    *,
    version: str,
    include: Names,
    exclude: Names,
    kwargs: dict[str, Any],
) -> AsyncGenerator[dict[str, Any], None]:
    """The events of one run of ``graph``; the run's error, if any, is raised
    after the events before it. Closing this generator early closes the run's
    stream, which stops the run (as closing ``astream`` does)."""
    if version != "v2":
        raise NotImplementedError(
            f"astream_events supports only version='v2', got version={version!r}"
        )
    run_keywords = {key: kwargs.pop(key) for key in _RUN_KEYWORDS if key in kwargs}
    # version="v1": the shape of the stream chunks the graph's own events carry
    args = RunArgs("astream", input, config, kwargs, version="v1", **run_keywords)
    driver, shape = graph._start(args, frozenset((EVENTS,)))
    events = EventBuilder(graph, graph._config(config), input)
    keep = EventFilter(include, exclude)
    first: str | None = None  # the run id of the first event yielded
    flush = _Flush(driver)
    raw = driver.aevents()

    def shown(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        nonlocal first
        out = []
        for event in batch:
            if not keep(event):
                continue
            if first is None:
                # as langchain-core: the first event yielded carries the
                # run's input, and that run's end event does not repeat it
                first = event["run_id"]
                event["data"]["input"] = input
            elif event["run_id"] == first and event["event"] == "on_chain_end":
                event["data"].pop("input", None)
            out.append(event)
        return out

    try:
        pending = [events.root_start()]
        while True:
            for event in shown(pending):
                yield event
            pending.clear()
            try:
                ns, mode, payload = await raw.__anext__()
            except StopAsyncIteration:
                return
            except Exception:
                # what was held back came before the error
                for event in shown(events.release()):
                    yield event
                raise
            if mode == EVENTS:
                if payload[0] == "flush":
                    if flush.due(payload[2]):
                        pending.extend(events.release())
                elif not ns:  # a subgraph's own nodes are not shown
                    pending.extend(events.engine(*payload))
            elif mode == DONE:
                pending.extend(events.root_end())
            else:
                chunk = shape.chunk(ns, mode, payload)
                if chunk is not SKIP:
                    pending.extend(events.root_chunk(chunk))
            # graph chunks held back wait a few turns of the event loop at most
            flush.track(bool(events.held))
    finally:
        flush.cancel()
        await raw.aclose()


class _Flush:
    """Releases the graph chunks ``EventBuilder`` holds back (see
    ``root_chunk``) a few turns of the event loop after it started holding
    them, when nothing else came first: the driver is woken with a marker,
    so a chunk is never held while the run waits on something else."""

    __slots__ = ("driver", "token")

    # Turns of the event loop a chunk may be held. In LangGraph a graph chunk
    # reaches the events one turn after the callbacks of its moment; here an
    # async caller resuming after its task needs a few turns to report.
    TURNS = 3

    def __init__(self, driver: RunDriver) -> None:
        self.driver = driver
        self.token: object | None = None

    def track(self, holding: bool) -> None:
        if not holding:
            self.token = None
        elif self.token is None:
            token = self.token = object()
            asyncio.get_running_loop().call_soon(self._tick, token, self.TURNS)

    def _tick(self, token: object, turns: int) -> None:
        if token is not self.token:
            return
        emit = self.driver.emit
        if turns > 1:
            asyncio.get_running_loop().call_soon(self._tick, token, turns - 1)
        elif emit is not None:
            emit((), EVENTS, ("flush", None, token))

    def due(self, token: object) -> bool:
        """Whether the marker carrying ``token`` is the one awaited."""
        if token is not self.token:
            return False
        self.token = None
        return True

    def cancel(self) -> None:
        self.token = None


class EventFilter:
    """``include_*``/``exclude_*`` as langchain-core applies them: with any
    ``include_*`` given (an empty one too, which matches nothing) an event
    must match one of them, and it must match no ``exclude_*``; every run
    here is of type ``chain``."""

    __slots__ = ("exclude", "include", "open")

    def __init__(self, include: Names, exclude: Names) -> None:
        self.include = include
        self.exclude = exclude
        self.open = all(f is None for f in include)

    def __call__(self, event: dict[str, Any]) -> bool:
        name, tags = event["name"], event["tags"]
        names, types, with_tags = self.include
        keep = self.open
        if names is not None:
            keep = keep or name in names
        if types is not None:
            keep = keep or "chain" in types
        if with_tags is not None:
            keep = keep or any(t in with_tags for t in tags)
        names, types, with_tags = self.exclude
        if names:
            keep = keep and name not in names
        if types:
            keep = keep and "chain" not in types
        if with_tags:
            keep = keep and all(t not in with_tags for t in tags)
        return keep


class _Run:
    """One run the events talk about: the graph, a node attempt, a step, a task."""

    __slots__ = (
        "input",
        "is_async",
        "metadata",
        "name",
        "ns",
        "output",
        "parents",
        "run_id",
        "streamed",
        "tags",
    )

    def __init__(
        self,
        name: str,
        input: Any,
        tags: list[str],
        metadata: dict[str, Any],
        parents: list[str],
        run_id: str | None = None,
        ns: str = "",
        is_async: bool = False,
    ) -> None:
        self.name = name
        self.input = input
        self.tags = tags
        self.metadata = metadata
        self.parents = parents
        self.run_id = run_id or str(uuid.uuid4())
        self.ns = ns
        self.is_async = is_async
        self.output: Any = None
        self.streamed = False

    def event(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "event": kind,
            "data": data,
            "name": self.name,
            "tags": list(self.tags),
            "run_id": self.run_id,
            "metadata": dict(self.metadata),
            "parent_ids": list(self.parents),
        }


class EventBuilder:
    """Turns the engine's ``EVENTS`` payloads and the run's stream chunks into
    event dicts, in the order LangGraph yields them."""

    def __init__(self, graph: EventsGraph, config: Mapping[str, Any], input: Any) -> None:
        conf = config.get(CONF) or {}
        base = dict(config.get("metadata") or {})
        for key in _COPIED_KEYS:
            if key in conf and key not in base:
                base[key] = conf[key]
        base["ls_integration"] = "langgraph"
        self.tags: list[str] = list(config.get("tags") or [])
        # an @entrypoint graph is named after its function, but LangGraph's is "LangGraph"
        name = config.get("run_name") or graph._schema_name
        run_id = config.get("run_id")
        self.root = _Run(name, input, self.tags, base, [], None if run_id is None else str(run_id))
        self.nodes = graph.nodes
        self.step = 0
        self.runs: dict[str, _Run] = {}
        self.steps: dict[tuple[str, int], _Run] = {}
        self.held: list[dict[str, Any]] = []
        self.held_for: _Run | None = None

    # the graph's own run
    def root_start(self) -> dict[str, Any]:
        return self.root.event("on_chain_start", {"input": self.root.input})

    def root_chunk(self, chunk: Any) -> list[dict[str, Any]]:
        event = self.root.event("on_chain_stream", {"chunk": chunk})
        if self.held_for is not None:
            # In LangGraph a task's update reaches the graph's stream one turn
            # of the event loop after its end event: an async caller that
            # returns right away reports its own output first. Held until the
            # next event says which came first, or a few turns at most (_Flush).
            self.held.append(event)
            return []
        return [event]

    def root_end(self) -> list[dict[str, Any]]:
        out = self.release()
        out.append(self.root.event("on_chain_end", {"output": self.root.output}))
        return out

    # the engine's reports
    def engine(
        self, kind: str, task: PregelExecutableTask | None, value: Any
    ) -> list[dict[str, Any]]:
        if kind == "step":
            self.step = value
            return []
        if kind == "output":
            self.root.output = value
            return []
        assert task is not None
        if not _shown(task):
            return []
        if kind == "start":
            return self._ordered(self._start(task), None)
        run = self.runs.get(task.id)
        if kind == "stream":
            if run is None:
                return []
            run.output, run.streamed = value, True
            return self._ordered(run.event("on_chain_stream", {"chunk": value}), run)
        if kind == "end":
            return self._end(task, run, value)
        if kind in ("step_start", "step_end"):
            return self._step(kind, task, run, value)
        return []

    def _ordered(self, event: dict[str, Any], run: _Run | None) -> list[dict[str, Any]]:
        """``event``, and before or after it the graph chunks held back (see
        ``root_chunk``): after it when it is the output of the async caller of
        the task whose update they are."""
        if self.held_for is not None and run is self.held_for and run.is_async:
            held = self.release()
            return [event, *held]
        return [*self.release(), event]

    def release(self) -> list[dict[str, Any]]:
        """The graph chunks held back, now due."""
        held, self.held, self.held_for = self.held, [], None
        return held

    def _start(self, task: PregelExecutableTask) -> dict[str, Any]:
        proc = task.proc
        path = task.path
        if type(proc) is Call:
            caller_id = path[3] if len(path) > 3 else None
            parent = self.runs.get(caller_id) if isinstance(caller_id, str) else None
            caller = parent or self.root
            tags = ["seq:step:1", *(caller.tags[1:] if parent is not None else self.tags)]
            ns = f"{caller.ns}{NS_SEP}" if caller.ns else ""
            extra: Mapping[str, Any] = {}
            task_input: Any = _arguments(proc)
            is_async = proc.spec.is_async
        else:
            caller = self.root
            node = proc if isinstance(proc, PregelNode) else self.nodes.get(task.name)
            tags = [f"graph:step:{self.step}", *self.tags, *((node.tags or []) if node else [])]
            ns = ""
            extra = (node.metadata or {}) if node is not None else {}
            task_input = task.input
            is_async = node.is_async if node is not None else False
        ns += f"{task.name}{NS_END}{task.id}"
        metadata = {
            **self.root.metadata,
            "langgraph_step": self.step,
            "langgraph_node": task.name,
            "langgraph_triggers": tuple(task.triggers),
            "langgraph_path": _path(path),
            "langgraph_checkpoint_ns": ns,
            **extra,
        }
        run = _Run(
            task.name,
            task_input,
            tags,
            metadata,
            [*caller.parents, caller.run_id],
            ns=ns,
            is_async=is_async,
        )
        self.runs[task.id] = run  # a retry is a new run, as in LangGraph
        return run.event("on_chain_start", {"input": task_input})

    def _step(
        self, kind: str, task: PregelExecutableTask, run: _Run | None, value: Any
    ) -> list[dict[str, Any]]:
        """A step of a node (``NodeBuilder.do``): a run of its own in LangGraph,
        as each is a runnable there; an entrypoint's body and a subgraph are not."""
        index, step, data = value
        node = task.proc
        if run is None or not isinstance(node, PregelNode) or node.orchestrates:
            return []
        if type(step) is _SubgraphStep:
            return []
        if kind == "step_start":
            # as LangGraph names a step: its function's __name__, but a lambda
            # or a callable without one (a partial, an object) is "Unnamed"
            name = getattr(step.fn, "__name__", "<lambda>")
            if name == "<lambda>" or not isinstance(name, str):
                name = "Unnamed"
            tags = [f"seq:step:{index + 1}", *run.tags[1:]]
            child = _Run(name, data, tags, run.metadata, [*run.parents, run.run_id])
            self.steps[task.id, index] = child
            return self._ordered(child.event("on_chain_start", {"input": data}), None)
        started = self.steps.pop((task.id, index), None)
        if started is None:
            return []
        return self._ordered(
            started.event("on_chain_end", {"output": data, "input": started.input}), None
        )

    def _end(
        self, task: PregelExecutableTask, run: _Run | None, writes: Sequence[tuple[str, Any]]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if run is None:
            # a body that ran elsewhere (a remote executor): its start and output now
            out.extend(self._ordered(self._start(task), None))
            run = self.runs[task.id]
        if not run.streamed:
            run.output = next((v for c, v in writes if c == RETURN), None)
        out.extend(
            self._ordered(
                run.event("on_chain_end", {"output": run.output, "input": run.input}), run
            )
        )
        del self.runs[task.id]
        if type(task.proc) is Call:
            parent_id = task.path[3] if len(task.path) > 3 else None
            caller = self.runs.get(parent_id) if isinstance(parent_id, str) else None
            # only an async caller can report before the update (see root_chunk)
            self.held_for = caller if caller is not None and caller.is_async else None
        return out


def _shown(task: PregelExecutableTask) -> bool:
    """Whether LangGraph reports runs of ``task``: not of a node that only
    writes its input on (no ``do`` step), which has nothing to trace there."""
    proc = task.proc
    return not isinstance(proc, PregelNode) or bool(proc.steps)


def _arguments(call: Call) -> Any:
    """A task call's input as LangGraph shows it: its arguments by parameter
    name, bound partially (an injected ``writer``, ``config``, ``store``...
    not given is left out), defaults filled in, ``self``/``cls`` left out,
    ``**kwargs`` spread."""
    try:
        bound = inspect.signature(call.spec.fn).bind_partial(*call.args, **call.kwargs)
    except (TypeError, ValueError):
        return {"args": call.args, "kwargs": call.kwargs}
    bound.apply_defaults()
    params = bound.signature.parameters
    shown: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if name in ("self", "cls"):
            continue
        if params[name].kind is inspect.Parameter.VAR_KEYWORD:
            shown.update(value)
        else:
            shown[name] = value
    return shown


def _path(path: tuple[Any, ...]) -> tuple[Any, ...]:
    """A task path as LangGraph puts it in metadata: a call's is
    ``(PUSH, caller's path, index, True)``."""
    if len(path) == 4 and path[0] == PUSH and isinstance(path[1], tuple):
        return (PUSH, _path(path[1]), path[2], True)
    return path
