"""Task bodies run elsewhere: what is shipped, what comes back.

A graph given an ``executor`` (``pregelkit.executors.dask.DaskExecutor``, or
anything with the same ``submit``) sends each attempt of a task's body
through it. Only the body call travels: the loop, the runner, retries, cache
lookups, timeouts, checkpoints and channel writes stay in the driver, so a
result is recorded by the driver exactly once, when it comes back. A body
that never comes back (its worker died) is re-run by the executor; nothing
of it was recorded.

The body runs under a ``BodyScope``: a stand-in for the driver's
``TaskScope`` carrying what the body may ask for (its config, context,
previous value, resume values). ``interrupt()`` answers from it or raises as
it would locally; stream-writer chunks are collected and returned with the
result, then emitted by the driver in order (so a body whose worker died
streams nothing twice). The executor knows nothing of tasks: it runs
``run_shipped(payload)`` and hands back bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pregelkit._internal._constants import CONF, CONFIG_KEY_TASK_ID, RETURN
from pregelkit._internal._current import CURRENT
from pregelkit._internal._ids import interrupt_id
from pregelkit._internal._typing import MISSING
from pregelkit.errors import GraphBubbleUp
from pregelkit.pregel._exec.attempt import _async_error, _inject, _node_writes
from pregelkit.pregel._graph.call import Call, FnSpec
from pregelkit.pregel._graph.nodes import PregelNode, _SubgraphStep
from pregelkit.pregel._graph.scope import TaskScope, mapped_key
from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    import concurrent.futures  # loaded by the run machinery, not by importing this

__all__ = ["RemoteExecutor", "arun_remote", "check_executor", "run_remote", "run_shipped", "ships"]


class RemoteExecutor(Protocol):
    """Where task bodies run (``executor=``): ``submit`` runs ``fn(*args)``
    somewhere else and returns a future of its result; ``fn``, ``args`` and the
    result pickle. ``name`` labels the work in the executor's dashboards.
    ``pregelkit.executors.dask.DaskExecutor`` is one."""

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, name: str
    ) -> concurrent.futures.Future[Any]: ...


def check_executor(executor: Any, nodes: dict[str, PregelNode]) -> None:
    """Refuse, when the graph is built, an executor without ``submit`` and a node
    whose body cannot be pickled: better than the first run failing halfway."""
    if executor is None:
        return
    if not callable(getattr(executor, "submit", None)):
        raise TypeError(
            f"executor= takes an executor such as pregelkit.executors.dask.DaskExecutor(client), "
            f"got {type(executor).__name__} (it has no submit method)"
        )
    for name, node in nodes.items():
        if node.orchestrates or any(type(s) is _SubgraphStep for s in node.steps):
            continue
        try:
            _ship(node.steps)
        except Exception as exc:
            raise _unshippable(name, exc) from exc


def _unshippable(name: str, exc: BaseException) -> TypeError:
    return TypeError(
        f"task {name!r} cannot be sent to the remote executor: {type(exc).__name__}: {exc}. "
        "Its function, arguments and config must pickle with cloudpickle (no locks, open "
        "files, connections or clients); pass plain data and open such things inside the body"
    )


def ships(task: PregelExecutableTask) -> bool:
    """Whether ``task``'s body goes to the executor: task calls and plain nodes do;
    an entrypoint body (its task calls need the driver's loop) and a node that
    runs a subgraph (it has a loop of its own) run in the driver."""
    proc = task.proc
    if type(proc) is Call:
        return True
    return not proc.orchestrates and not any(type(s) is _SubgraphStep for s in proc.steps)


class _Body:
    """One attempt of a body, as shipped: the code, its input, what it may ask for."""

    __slots__ = (
        "args",
        "config",
        "info",
        "kwargs",
        "mapped",
        "name",
        "ns",
        "previous",
        "resume",
        "slot",
        "steps",
        "store",
    )

    def __init__(self, task: PregelExecutableTask, scope: TaskScope, slot: tuple[Any, ...]):
        proc = task.proc
        run = scope.run
        self.name = task.name
        if type(proc) is Call:
            self.steps: tuple[FnSpec, ...] = (proc.spec,)
            self.args: tuple[Any, ...] = proc.args
            self.kwargs: dict[str, Any] | None = proc.kwargs
        else:
            self.steps = proc.steps
            self.args = (task.input,)
            self.kwargs = None  # a node: steps chained on the task's input
        self.config = _portable(scope.config)
        self.ns = scope.ns
        # what get_runtime().execution_info reports, as the driver knows it
        self.info = (
            task.id,
            run.checkpoint_id,
            run.run_id,
            scope.attempt_number,
            scope.first_attempt_time,
        )
        self.resume = list(scope.resume)
        mapped = run.resume_map
        self.mapped: tuple[str, Any] | tuple[()] = ()
        if mapped:
            # the body's first unanswered interrupt() is the only one a map can answer
            iid = interrupt_id(scope.ns, len(self.resume))
            key = mapped_key(mapped, iid, scope.ns, len(self.resume))
            if key is not None:
                self.mapped = (iid, mapped[key])
        self.slot = slot
        self.previous = run.previous
        self.store = run.store is not None


def _portable(config: dict[str, Any]) -> dict[str, Any]:
    """The task's config without the engine's private objects (savers, callbacks)."""
    conf = config.get(CONF, {})
    return {
        **{k: v for k, v in config.items() if k != "callbacks"},
        CONF: {k: v for k, v in conf.items() if not k.startswith("__pregel_")}
        | {CONFIG_KEY_TASK_ID: conf.get(CONFIG_KEY_TASK_ID)},
    }


class _NoStore:
    """The store lives in the driver; a remote body that reaches for it is told why not."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "the store is not reachable from a body running on a remote executor (it lives "
            "in the driver): read what the body needs in the entrypoint or a node that runs "
            "in the driver and pass it as an argument"
        )


def _no_calls(name: str) -> RuntimeError:
    return RuntimeError(
        f"task {name!r} was called from a body running on a remote executor: task "
        "calls need the driver's loop, so make them from the @entrypoint function"
    )


class _NoCalls:
    """The runner a remote body sees: what needs the driver's records refuses."""

    def call(self, parent: Any, call: Call) -> Any:
        raise _no_calls(call.name)

    def patch_marker(self, parent: Any, patch_id: str, *, deprecated: bool) -> bool:
        raise RuntimeError(
            f"patched({patch_id!r}) was called in a body running on a remote executor: "
            "its decision is recorded by the driver, so make it in the @entrypoint function "
            "and pass the outcome to the task"
        )


class TaskStub:
    """What a task object captured by a shipped body becomes on the worker (a
    type's ``__reduce_remote__`` says so): calling it explains why it cannot run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _no_calls(self.name)


def _pickler() -> type:
    """cloudpickle's pickler, plus ``__reduce_remote__``: a task wrapper is a
    proxy that cloudpickle would take for the plain function it wraps."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            reduce = getattr(type(obj), "__reduce_remote__", None)
            if reduce is not None:
                return reduce(obj)
            return super().reducer_override(obj)

    return Pickler


_PICKLER: type | None = None


def _ship(obj: Any) -> bytes:
    global _PICKLER
    if _PICKLER is None:
        _PICKLER = _pickler()
    import io

    buf = io.BytesIO()
    _PICKLER(buf, protocol=5).dump(obj)
    return buf.getvalue()


class _BodyRun:
    __slots__ = ("base_config", "checkpoint_id", "previous", "run_id", "runner", "stop", "store")

    def __init__(self, body: _Body) -> None:
        self.base_config = body.config
        _, self.checkpoint_id, self.run_id, _, _ = body.info
        self.stop = None  # draining is the driver's: a remote body gets no RunControl
        self.previous = body.previous
        self.store = _NoStore() if body.store else None
        self.runner = _NoCalls()


class BodyScope:
    """What ``interrupt()``, ``get_config()``, ``get_runtime()`` and the stream
    writer find inside a remote body: ``TaskScope``'s surface, over shipped data."""

    def __init__(self, body: _Body) -> None:
        self.config = body.config
        self.ns = body.ns
        self.resume = body.resume
        self.mapped = body.mapped
        self.slot = body.slot
        self.run = _BodyRun(body)
        self.task = self
        self.id, _, _, self.attempt_number, self.first_attempt_time = body.info
        self.attempt = None
        self.interrupt_counter = 0
        self.writes: list[tuple[str, Any]] = []
        self.chunks: list[Any] = []
        self.used_map = False
        self.used_slot = False

    def answer(self, iid: str, index: int = 0) -> Any:
        """``TaskScope.answer``, from the values the driver shipped."""
        if self.mapped and self.mapped[0] == iid:
            (_, value), self.mapped = self.mapped, ()
            self.used_map = True
            return value
        if self.slot:
            (value,), self.slot = self.slot, ()
            self.used_slot = True
            return value
        return MISSING

    def stream_writer(self, chunk: Any) -> None:
        self.chunks.append(chunk)

    def heartbeat(self) -> None:
        return None  # the driver's clock cannot hear it: see docs/scale-out.md

    # the same as a local task's: they read only what this class also has
    interrupt = TaskScope.interrupt
    runtime = TaskScope.runtime


# on the worker
_NOTHING: tuple[Any, ...] = ([], [], None, 0, False, False)
"""The state a body that never ran leaves behind."""


def run_shipped(payload: bytes) -> bytes:
    """Run one shipped body; everything it produced, pickled. Its failure is part
    of the outcome, not an executor error: the executor retries only lost work."""
    import cloudpickle

    try:
        body: _Body = cloudpickle.loads(payload)
    except Exception as exc:
        error = RuntimeError(
            f"a task body could not be loaded on the worker: {exc!r}; the modules it "
            "uses must be importable there (install them on the workers, or "
            "cloudpickle.register_pickle_by_value(module) on the driver)"
        )
        return _dumps(((False, error), _NOTHING))
    scope = BodyScope(body)
    token = CURRENT.set(scope)  # type: ignore[arg-type]
    try:
        outcome: tuple[bool, Any] = (True, _call(body, scope))
    except Exception as exc:
        if not isinstance(exc, GraphBubbleUp):
            import traceback

            exc.add_note(f"(raised on a remote worker)\n{''.join(traceback.format_exception(exc))}")
        outcome = (False, exc)
    finally:
        CURRENT.reset(token)
    state = (
        scope.writes,
        scope.chunks,
        scope.resume,
        scope.interrupt_counter,
        scope.used_map,
        scope.used_slot,
    )
    try:
        return _dumps((outcome, state))
    except Exception as exc:
        what = "result" if outcome[0] else f"{type(outcome[1]).__name__} ({outcome[1]})"
        unsendable = TypeError(
            f"task {body.name!r} ran on a remote worker, but its {what} or stream chunks "
            f"cannot be sent back: {type(exc).__name__}: {exc}. Return plain data"
        )
        return _dumps(((False, unsendable), (*state[:1], [], *state[2:])))


def _dumps(obj: Any) -> bytes:
    import cloudpickle

    data: bytes = cloudpickle.dumps(obj)
    return data


def _call(body: _Body, scope: BodyScope) -> Any:
    if any(s.is_async for s in body.steps):
        import asyncio

        return asyncio.run(_acall(body, scope))
    if body.kwargs is not None:
        (spec,) = body.steps
        kw = body.kwargs
        if spec.inject:
            kw = {**kw, **_inject(spec, scope, kw, len(body.args))}  # type: ignore[arg-type]
        return spec.fn(*body.args, **kw)
    value = body.args[0]
    for step in body.steps:
        value = step.fn(value, **_inject(step, scope, {}, 1)) if step.inject else step.fn(value)  # type: ignore[arg-type]
    return value


async def _acall(body: _Body, scope: BodyScope) -> Any:
    """An async body, on an event loop of its own (``asyncio.run`` keeps the scope)."""
    if body.kwargs is not None:
        (spec,) = body.steps
        kw = body.kwargs
        if spec.inject:
            kw = {**kw, **_inject(spec, scope, kw, len(body.args))}  # type: ignore[arg-type]
        return await spec.fn(*body.args, **kw)
    value = body.args[0]
    for step in body.steps:
        kw = _inject(step, scope, {}, 1) if step.inject else {}  # type: ignore[arg-type]
        value = step.fn(value, **kw)
        if step.is_async:
            value = await value
    return value


# in the driver
def _send(task: PregelExecutableTask, executor: RemoteExecutor, offer: bool) -> Any:
    """Ship one attempt. ``offer``: with a copy of the run's one resume value, if
    any; whoever uses it first takes it (``_claim``), as ``interrupt()`` does locally."""
    scope = task.scope
    value = scope.run.resume_slot.value if offer else MISSING
    try:
        payload = _ship(_Body(task, scope, () if value is MISSING else (value,)))
    except Exception as exc:
        raise _unshippable(task.name, exc) from exc
    return executor.submit(run_shipped, payload, name=task.name)


def _claim(task: PregelExecutableTask, raw: bytes) -> tuple[Any, Any] | None:
    """What an attempt left, or None if it used the run's one resume value and
    another body took that first: then the attempt runs again without it."""
    import cloudpickle

    outcome, state = cloudpickle.loads(raw)
    used_slot = state[5]
    if used_slot and task.scope.run.resume_slot.take() is MISSING:
        return None
    return outcome, state


def _land(task: PregelExecutableTask, outcome: Any, state: Any) -> Any:
    """Apply what came back as the body would have locally, then return or raise."""
    ok, value = outcome
    writes, chunks, resume, counter, used_map, _ = state
    scope = task.scope
    resume_map = scope.run.resume_map
    if used_map and resume_map is not None:
        # the answer went to the first call the body had no saved answer for
        index = len(scope.resume)
        key = mapped_key(resume_map, interrupt_id(scope.ns, index), scope.ns, index)
        if key is not None:
            resume_map.pop(key, None)
    if resume is not None:
        scope.resume = resume
        scope.interrupt_counter = counter
    task.writes.extend(writes)
    for chunk in chunks:
        scope.stream_writer(chunk)
    if not ok:
        raise value
    if type(task.proc) is Call:
        task.writes.append((RETURN, value))
    else:
        _node_writes(task, task.proc, value)
    return value


def _wait(fut: concurrent.futures.Future[Any], attempt: Any) -> Any:
    """The attempt's outcome; a bounded attempt stops waiting once it is dead."""
    import concurrent.futures

    try:
        if attempt is None:
            return fut.result()
        while True:
            try:
                return fut.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                if attempt.is_dead():
                    raise attempt.refusal() from None
    except BaseException:
        fut.cancel()  # a timeout or Ctrl-C: the cluster need not finish the work
        raise


def run_remote(task: PregelExecutableTask, executor: RemoteExecutor) -> Any:
    """One attempt of ``task``, its body run by ``executor``; this thread waits."""
    proc = task.proc
    steps = (proc.spec,) if type(proc) is Call else proc.steps
    if any(s.is_async for s in steps):
        raise _async_error("task" if type(proc) is Call else "node", task.name)
    offer = True
    while (landed := _claim(task, _wait(_send(task, executor, offer), task.scope.attempt))) is None:
        offer = False
    return _land(task, *landed)


async def arun_remote(task: PregelExecutableTask, executor: RemoteExecutor) -> Any:
    """The async twin of ``run_remote``: the event loop waits, no thread does."""
    import asyncio

    offer = True
    while True:
        # a cancelled wait cancels the remote work too
        raw = await asyncio.wrap_future(_send(task, executor, offer))
        landed = _claim(task, raw)
        if landed is not None:
            return _land(task, *landed)
        offer = False
