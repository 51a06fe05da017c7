"""Running one attempt of a task: call its steps, collect its writes.

What an attempt calls, with which injected arguments, what it emits and
what it writes is decided once: for a task call (one call) by
``_call_started`` and ``_call_returned``, for a node (a chain of steps) by
the plan ``_node_body``, which yields each step to call. ``run_task`` and
``arun_task`` only perform the calls: here, or awaited (a sync function in
a worker thread).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

from pregelkit._internal._constants import EVENTS, RESERVED, RETURN
from pregelkit._internal._current import CURRENT
from pregelkit._internal._threads import to_thread
from pregelkit.errors import InvalidUpdateError
from pregelkit.pregel._graph.call import Call, FnSpec
from pregelkit.pregel._graph.nodes import PregelNode, _SubgraphStep
from pregelkit.pregel._graph.scope import TaskScope
from pregelkit.pregel._graph.writes import control_writes
from pregelkit.types import PregelExecutableTask

__all__ = ["arun_task", "run_task"]


def _inject(spec: FnSpec, scope: TaskScope, given: dict[str, Any], n_args: int) -> dict[str, Any]:
    """Keyword arguments for the injectable parameters the caller did not pass."""
    kw: dict[str, Any] = {}
    for name, pos in zip(spec.inject, spec.inject_pos):
        if name in given or pos < n_args:
            continue
        if name == "config":
            kw[name] = scope.config
        elif name == "writer":
            kw[name] = scope.stream_writer
        elif name == "store":
            kw[name] = scope.run.store
        elif name == "previous":
            kw[name] = scope.run.previous
        elif name == "runtime":
            kw[name] = scope.runtime()
    return kw


def _node_writes(task: PregelExecutableTask, node: PregelNode, output: Any) -> None:
    writes = control_writes(output)
    if writes is not None:
        names = task.scope.run.channel_names
        for chan, _ in writes:
            if chan not in names and chan not in RESERVED:
                raise InvalidUpdateError(
                    f"node {task.name!r} tried to update unknown channel {chan!r}; "
                    f"channels: {sorted(names)}"
                )
    elif node.writer is not None:
        writes = node.writer.writes_for(output)
    else:
        return
    task.writes.extend(writes)


def _events_emit(scope: TaskScope) -> Callable[[str, Any], None] | None:
    """The run's emitter when ``astream_events`` listens (its ``EVENTS``
    mode), else None: every other run pays one set lookup per attempt."""
    run = scope.run
    return run.emit if EVENTS in run.stream_modes else None


def _async_error(kind: str, name: str) -> TypeError:
    return TypeError(
        f"{kind} {name!r} is an async function; run the graph with ainvoke()/astream() "
        "(or make it a plain def)"
    )


def _call_started(task: PregelExecutableTask, proc: Call) -> dict[str, Any]:
    """A task call's attempt starts (told to ``EVENTS`` listeners); the
    keywords its function gets: the caller's, and the injectables it did
    not pass. A task call is one call: it needs no plan."""
    scope: TaskScope = task.scope
    run = scope.run
    if (emit := run.emit) is not None and EVENTS in run.stream_modes:
        emit(EVENTS, ("start", task, None))
    spec = proc.spec
    if spec.inject:
        return {**proc.kwargs, **_inject(spec, scope, proc.kwargs, len(proc.args))}
    return proc.kwargs


def _call_returned(task: PregelExecutableTask, value: Any) -> Any:
    """What a task call's return leaves: its ``RETURN`` write."""
    run = task.scope.run
    if (emit := run.emit) is not None and EVENTS in run.stream_modes:
        emit(EVENTS, ("stream", task, value))
    task.writes.append((RETURN, value))
    return value


Steps = Iterator[tuple[FnSpec | _SubgraphStep, Any, dict[str, Any]]]
"""(the step to call, the value it is given, its injected keywords)."""

_NO_KW: dict[str, Any] = {}


def _node_body(task: PregelExecutableTask, node: PregelNode, last: list[Any]) -> Steps:
    """The plan of one attempt of a node: its steps called in a chain, each
    given the value the one before returned, told to ``EVENTS`` listeners,
    the last value written. The driver leaves each step's result in
    ``last[0]`` before it asks for the next step (a plan iterated with
    ``for`` costs a task ~150 ns less than one sent values)."""
    scope: TaskScope = task.scope
    emit = _events_emit(scope)
    if emit is not None:
        emit(EVENTS, ("start", task, None))
    for i, step in enumerate(node.steps):
        if emit is not None:
            emit(EVENTS, ("step_start", task, (i, step, last[0])))
        yield (
            step,
            last[0],
            _inject(cast(FnSpec, step), scope, _NO_KW, 1) if step.inject else _NO_KW,
        )
        if emit is not None:
            emit(EVENTS, ("step_end", task, (i, step, last[0])))
    if emit is not None:
        emit(EVENTS, ("stream", task, last[0]))
    _node_writes(task, node, last[0])


def run_task(task: PregelExecutableTask) -> Any:
    """One attempt of ``task`` in this thread; its writes land in ``task.writes``."""
    token = CURRENT.set(task.scope)  # the body's calls, interrupts and writers find it
    try:
        proc = task.proc
        if type(proc) is Call:
            kw = _call_started(task, proc)
            if proc.spec.is_async:
                raise _async_error("task", task.name)
            return _call_returned(task, proc.spec.fn(*proc.args, **kw))
        last = [task.input]
        for step, value, kw in _node_body(task, proc, last):
            if isinstance(step, _SubgraphStep):
                last[0] = step.graph.invoke(value)
            elif step.is_async:
                raise _async_error("node", task.name)
            else:
                last[0] = step.fn(value, **kw)
        return last[0]
    finally:
        CURRENT.reset(token)


async def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a sync step off the event loop, keeping the task's context; a
    bounded attempt's on a daemon thread (``_exec.timeout.in_thread``)."""
    scope = CURRENT.get()
    if scope is not None and scope.attempt is not None:
        from pregelkit.pregel._exec.timeout import in_thread

        return await in_thread(functools.partial(fn, *args, **kwargs))
    return await to_thread(fn, *args, **kwargs)


async def arun_task(task: PregelExecutableTask) -> Any:
    """``run_task`` on the event loop: async functions are awaited, sync ones
    run in a worker thread."""
    token = CURRENT.set(task.scope)
    try:
        proc = task.proc
        if type(proc) is Call:
            kw = _call_started(task, proc)
            fn = proc.spec.fn
            call = fn(*proc.args, **kw) if proc.spec.is_async else _in_thread(fn, *proc.args, **kw)
            return _call_returned(task, await call)
        last = [task.input]
        for step, value, kw in _node_body(task, proc, last):
            if isinstance(step, _SubgraphStep):
                last[0] = await step.graph.ainvoke(value)
            elif step.is_async:
                last[0] = await step.fn(value, **kw)
            else:
                last[0] = await _in_thread(step.fn, value, **kw)
        return last[0]
    finally:
        CURRENT.reset(token)
