"""Running one attempt of a task: call its steps, collect its writes.

What an attempt calls, in which order, with which injected arguments, what
it emits and what it writes is decided once, by the plan ``_body``: it
yields each call and is sent back its result. ``run_task`` and ``arun_task``
only perform the calls: here, or awaited (a sync step in a worker thread).
"""

from __future__ import annotations

import functools
from contextvars import Token
from collections.abc import Callable, Iterator
from typing import Any

from pregelkit._internal._constants import EVENTS, RESERVED, RETURN
from pregelkit._internal._scope import CURRENT
from pregelkit._internal._threads import to_thread
from pregelkit.errors import InvalidUpdateError
from pregelkit.pregel._call import Call, FnSpec
from pregelkit.pregel._read import PregelNode, _SubgraphStep
from pregelkit.pregel._scope import TaskScope
from pregelkit.pregel._write import control_writes
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


Calls = Iterator[tuple[FnSpec | _SubgraphStep, tuple[Any, ...], dict[str, Any]]]
"""(what to call, its arguments, its injected keywords), one call at a time."""

_NO_KW: dict[str, Any] = {}


def _body(task: PregelExecutableTask, scope: TaskScope, last: list[Any]) -> Calls:
    """The plan of one attempt of ``task``: a task call calls its function
    once with the caller's arguments; a node calls its steps in a chain,
    each given the value the one before returned. The driver leaves each
    call's result in ``last[0]`` before it asks for the next call (a plan
    iterated with ``for`` costs a task ~150 ns less than one sent values)."""
    emit = _events_emit(scope)
    proc = task.proc
    if emit is not None:
        emit(EVENTS, ("start", task, None))
    if type(proc) is Call:
        spec = proc.spec
        kw = proc.kwargs
        if spec.inject:
            kw = {**kw, **_inject(spec, scope, kw, len(proc.args))}
        yield spec, proc.args, kw
        if emit is not None:
            emit(EVENTS, ("stream", task, last[0]))
        task.writes.append((RETURN, last[0]))
        return
    for i, step in enumerate(proc.steps):
        if emit is not None:
            emit(EVENTS, ("step_start", task, (i, step, last[0])))
        yield step, (last[0],), _inject(step, scope, _NO_KW, 1) if step.inject else _NO_KW
        if emit is not None:
            emit(EVENTS, ("step_end", task, (i, step, last[0])))
    if emit is not None:
        emit(EVENTS, ("stream", task, last[0]))
    _node_writes(task, proc, last[0])


def _enter(task: PregelExecutableTask) -> tuple[Calls, list[Any], Token[TaskScope | None]]:
    """The plan of an attempt of ``task`` with the cell its calls' results go
    to (a node's chain starts from the task's input), and its scope made the
    current one (the body's task calls, interrupts and writers find it
    there) until the driver resets the token."""
    scope: TaskScope = task.scope
    last = [task.input]
    return _body(task, scope, last), last, CURRENT.set(scope)


def run_task(task: PregelExecutableTask) -> Any:
    """One attempt of ``task`` in this thread; its writes land in ``task.writes``."""
    plan, last, token = _enter(task)
    try:
        for step, args, kw in plan:
            if isinstance(step, _SubgraphStep):
                last[0] = step.graph.invoke(*args)
            elif step.is_async:
                raise _async_error("task" if type(task.proc) is Call else "node", task.name)
            else:
                last[0] = step.fn(*args, **kw)
        return last[0]
    finally:
        CURRENT.reset(token)


async def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a sync step off the event loop, keeping the task's context; a
    bounded attempt's on a daemon thread (``_timeout.in_thread``)."""
    scope = CURRENT.get()
    if scope is not None and scope.attempt is not None:
        from pregelkit.pregel._timeout import in_thread

        return await in_thread(functools.partial(fn, *args, **kwargs))
    return await to_thread(fn, *args, **kwargs)


async def arun_task(task: PregelExecutableTask) -> Any:
    """``run_task`` on the event loop: async steps are awaited, sync ones run
    in a worker thread."""
    plan, last, token = _enter(task)
    try:
        for step, args, kw in plan:
            if isinstance(step, _SubgraphStep):
                last[0] = await step.graph.ainvoke(*args)
            elif step.is_async:
                last[0] = await step.fn(*args, **kw)
            else:
                last[0] = await _in_thread(step.fn, *args, **kw)
        return last[0]
    finally:
        CURRENT.reset(token)
