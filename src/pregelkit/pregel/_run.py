"""Running one attempt of a task: call its steps, collect its writes.

The injection and write decisions are shared helpers; ``run_task`` and
``arun_task`` differ only in how a step is called.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import EVENTS, RESERVED, RETURN
from pregelkit._internal._scope import CURRENT
from pregelkit._internal._threads import to_thread
from pregelkit.errors import InvalidUpdateError
from pregelkit.pregel._call import Call, FnSpec
from pregelkit.pregel._read import PregelNode, _SubgraphStep
from pregelkit.pregel._scope import TaskScope
from pregelkit.pregel._write import control_writes
from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    pass

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


def run_task(task: PregelExecutableTask) -> Any:
    """One attempt of ``task`` in this thread; its writes land in ``task.writes``."""
    scope: TaskScope = task.scope
    token = CURRENT.set(scope)
    emit = _events_emit(scope)
    try:
        proc = task.proc
        if emit is not None:
            emit(EVENTS, ("start", task, None))
        if type(proc) is Call:
            spec = proc.spec
            if spec.is_async:
                raise _async_error("task", task.name)
            kw = proc.kwargs
            if spec.inject:
                kw = {**kw, **_inject(spec, scope, kw, len(proc.args))}
            value = spec.fn(*proc.args, **kw)
            if emit is not None:
                emit(EVENTS, ("stream", task, value))
            task.writes.append((RETURN, value))
            return value
        value = task.input
        for i, step in enumerate(proc.steps):
            if emit is not None:
                emit(EVENTS, ("step_start", task, (i, step, value)))
            if type(step) is _SubgraphStep:
                value = step.graph.invoke(value)
            elif step.is_async:
                raise _async_error("node", task.name)
            elif step.inject:
                value = step.fn(value, **_inject(step, scope, {}, 1))
            else:
                value = step.fn(value)
            if emit is not None:
                emit(EVENTS, ("step_end", task, (i, step, value)))
        if emit is not None:
            emit(EVENTS, ("stream", task, value))
        _node_writes(task, proc, value)
        return value
    finally:
        CURRENT.reset(token)


async def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a sync function off the event loop, keeping the task's context."""
    scope = CURRENT.get()
    if scope is not None and scope.attempt is not None:
        from pregelkit.pregel._timeout import in_thread

        return await in_thread(functools.partial(fn, *args, **kwargs))
    return await to_thread(fn, *args, **kwargs)


async def arun_task(task: PregelExecutableTask) -> Any:
    """The async twin of ``run_task``: sync steps run in a worker thread."""
    scope: TaskScope = task.scope
    token = CURRENT.set(scope)
    emit = _events_emit(scope)
    try:
        proc = task.proc
        if emit is not None:
            emit(EVENTS, ("start", task, None))
        if type(proc) is Call:
            spec = proc.spec
            kw = proc.kwargs
            if spec.inject:
                kw = {**kw, **_inject(spec, scope, kw, len(proc.args))}
            if spec.is_async:
                value = await spec.fn(*proc.args, **kw)
            else:
                value = await _in_thread(spec.fn, *proc.args, **kw)
            if emit is not None:
                emit(EVENTS, ("stream", task, value))
            task.writes.append((RETURN, value))
            return value
        value = task.input
        for i, step in enumerate(proc.steps):
            if emit is not None:
                emit(EVENTS, ("step_start", task, (i, step, value)))
            if type(step) is _SubgraphStep:
                value = await step.graph.ainvoke(value)
            else:
                kw = _inject(step, scope, {}, 1) if step.inject else {}
                if step.is_async:
                    value = await step.fn(value, **kw)
                else:
                    value = await _in_thread(step.fn, value, **kw)
            if emit is not None:
                emit(EVENTS, ("step_end", task, (i, step, value)))
        if emit is not None:
            emit(EVENTS, ("stream", task, value))
        _node_writes(task, proc, value)
        return value
    finally:
        CURRENT.reset(token)
