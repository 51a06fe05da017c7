"""Child workflows: ``child.submit(input)`` called inside a running workflow.

The submit is a recorded call of the calling task (``waits.record``): its
record is the child's thread id, derived from the parent's thread and the
call's own id unless the config names one, so a replay finds the same
child instead of starting another.

Where the child runs follows the parent. A parent run on a worker (it holds
a lease) queues the child for the fleet, and ``result()`` is a durable wait
of kind ``"child"``: the parent's slot is freed until the child ends. A
parent run by ``invoke`` runs the child in this process at once, on a thread
of its own (children submitted together run together), and ``result()``
waits for it in place; a replay after a crash resumes the child here.

The child's outcome is recorded in the parent as a second call, so a replay
reads neither the child's thread nor its row again; a failure is raised as
``ChildWorkflowError``, with the child's exception as ``__cause__`` when it
ran in this process (else a ``ChildFailure`` with its type and message).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_DURABILITY, CONFIG_KEY_THREAD_ID
from pregelkit._internal._current import CURRENT
from pregelkit._internal._threads import running_loop
from pregelkit.checkpoint._runqueue import CANCELLED as CANCELLED_RUN
from pregelkit.checkpoint._runqueue import DONE, FAILED, FINISHED, RUNNING, lease_of
from pregelkit.checkpoint.runs import (
    RunHandle,
    ahandle_of_thread,
    asubmit_run,
    handle_of_thread,
    submit_run,
)
from pregelkit.errors import ChildWorkflowError, RunFailedError
from pregelkit.pregel._api.waits import (
    ablock,
    aparked,
    arecord,
    block,
    parked,
    record,
    scope_for,
    wait_for,
)
from pregelkit.pregel._exec.stop import CANCELLED

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.pregel._graph.scope import TaskScope
    from pregelkit.pregel.main import Pregel

__all__ = ["ChildFailure", "ChildHandle", "in_workflow", "submit_child"]

SUBMIT, OUTCOME = "pregelkit.child", "pregelkit.child_result"
CHILD_POLLS = (0.005, 0.05)
"""A parent waiting in place for a child in this process looks this often."""


class ChildFailure(Exception):
    """Stands for a child's exception that did not run in this process:
    its type's name and its message, never its class loaded from storage."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        super().__init__(f"{type_name}: {message}" if message else type_name)


def in_workflow() -> bool:
    scope = CURRENT.get()
    return scope is not None and scope.run.runner is not None


class _Local:
    """A child run in this process: its future, and who may cancel it."""

    def __init__(self, wf: Pregel, config: dict[str, Any], detached: bool) -> None:
        self.wf, self.config, self.detached = wf, config, detached
        self.future: Future[Any] = Future()


_LOCAL: dict[tuple[int, str], _Local] = {}
_LOCK = threading.Lock()


def _start_here(wf: Pregel, input: Any, config: dict[str, Any], detached: bool) -> _Local:
    """The child's run in this process: the one already going, else a new
    one (resuming the thread if it has a checkpoint: the parent is replayed
    after a crash, and the child had started). An async child submitted on
    an event loop runs as a task of that loop, where its parent's async
    saver belongs (on a loop of its own, an AsyncPostgresSaver's pool and
    locks were another loop's); any other on a thread of its own."""
    key = (id(wf.checkpointer), str(config[CONF][CONFIG_KEY_THREAD_ID]))
    with _LOCK:
        local = _LOCAL.get(key)
        if local is not None and not (local.future.done() and local.future.exception()):
            return local
        local = _LOCAL[key] = _Local(wf, config, detached)
    is_async = any(node.is_async for node in wf.nodes.values())
    loop = running_loop() if is_async else None
    if loop is not None:
        # a fresh context, as on a thread: not the parent's task scope
        task = loop.create_task(_arun(local, input), context=contextvars.Context())
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)
        return local

    def run() -> None:
        try:
            done, value = _resumed(wf.get_state(config), input)
            if not done:
                value = (
                    asyncio.run(wf.ainvoke(value, config)) if is_async else wf.invoke(value, config)
                )
            local.future.set_result(value)
        except BaseException as exc:
            local.future.set_exception(exc)

    threading.Thread(target=run, name=f"pregelkit-child-{key[1]}", daemon=True).start()
    return local


_TASKS: set[asyncio.Task[None]] = set()
"""The children running as tasks here (the loop keeps only weak references)."""


async def _arun(local: _Local, input: Any) -> None:
    wf, config = local.wf, local.config
    try:
        done, value = _resumed(await wf.aget_state(config), input)
        local.future.set_result(value if done else await wf.ainvoke(value, config))
    except BaseException as exc:
        local.future.set_exception(exc)
        if not isinstance(exc, Exception):
            raise


def _resumed(state: Any, input: Any) -> tuple[bool, Any]:
    """(True, output) when the child's thread had finished, else (False,
    what to run it with: ``None`` to resume a started thread, else input)."""
    if state.created_at is not None and not state.next:
        return True, state.values
    return False, None if state.created_at is not None else input


def _child_config(scope: TaskScope, given: Mapping[str, Any], thread: str) -> dict[str, Any]:
    """The child's config: what the caller gave, its thread, the parent's
    durability (a child saves as its parent does) and, in its metadata,
    its parent's thread."""
    conf = dict(given.get(CONF) or {})
    conf[CONFIG_KEY_THREAD_ID] = thread
    conf.setdefault(CONFIG_KEY_DURABILITY, scope.run.durability)
    parent = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    metadata = {**(given.get("metadata") or {}), "parent_thread_id": parent}
    return {**given, CONF: conf, "metadata": metadata}


def _child_thread(scope: TaskScope, wf: Pregel, given: Mapping[str, Any], call_id: str) -> str:
    named = (given.get(CONF) or {}).get(CONFIG_KEY_THREAD_ID)
    if named is not None:
        return str(named)
    parent = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    if parent is None:
        raise RuntimeError(
            "a child workflow's thread is derived from its parent's, and this run has "
            'none: invoke the parent with config={"configurable": {"thread_id": ...}} '
            "or give the child one"
        )
    return f"{parent}/{wf.name}/{call_id}"


def _submit_body(name: str, input: Any, config: dict[str, Any], detach: bool) -> tuple[str, str]:
    """The recorded submit: (the child's thread, its run id: '' in process).
    Where the child runs (queued when the parent holds a worker's lease) is
    decided here, not passed in: it is no argument of the record, which a
    worker resuming a parent an ``invoke`` process started must match (it
    did not: NondeterminismError, found by test_durable_chaos)."""
    scope = CURRENT.get()
    assert scope is not None
    wf: Pregel = _WORKFLOWS[name]
    thread = _child_thread(scope, wf, config, scope.task.id)
    full = _child_config(scope, config, thread)
    if lease_of(scope.run.base_config) is None:
        return thread, ""
    parent = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    # a child whose thread already ran (a crash came between its submit
    # and the submit's record) is found, not queued again
    found = handle_of_thread(_saver(wf), thread)
    if found is not None:
        return thread, found.run_id
    handle = submit_run(_saver(wf), wf.name, input, full, 0, parent_thread=parent, detached=detach)
    return thread, handle.run_id


_WORKFLOWS: dict[str, Pregel] = {}
"""The child workflows submitted in this process, by name: what a recorded
call's body (which gets only plain arguments) runs."""


def _saver(wf: Pregel) -> BaseCheckpointSaver[Any]:
    saver, _ = wf._queue()
    return saver


def submit_child(
    wf: Pregel, input: Any, config: Mapping[str, Any] | None, *, detach: bool
) -> ChildHandle:
    """``wf.submit`` inside a running workflow."""
    scope = scope_for("submit", is_async=False)
    _saver(wf)  # a clear error first: a child needs a checkpointer and a name
    _WORKFLOWS[wf.name] = wf
    given = dict(config or {})
    thread, run_id = record(scope, SUBMIT, _submit_body, wf.name, input, given, detach)
    config = _child_config(scope, given, thread)
    if not run_id and lease_of(scope.run.base_config) is not None:
        run_id = _adopt(wf, input, config, scope)
    return _handle(wf, input, config, run_id, detach)


async def asubmit_child(
    wf: Pregel, input: Any, config: Mapping[str, Any] | None, *, detach: bool
) -> ChildHandle:
    """``wf.asubmit`` inside a running workflow."""
    scope = scope_for("submit", is_async=True)
    _saver(wf)
    _WORKFLOWS[wf.name] = wf
    given = dict(config or {})
    thread, run_id = await arecord(scope, SUBMIT, _submit_body, wf.name, input, given, detach)
    config = _child_config(scope, given, thread)
    if not run_id and lease_of(scope.run.base_config) is not None:
        run_id = await _aadopt(wf, input, config, scope)
    return _handle(wf, input, config, run_id, detach)


def _adopt(wf: Pregel, input: Any, config: dict[str, Any], scope: TaskScope) -> str:
    """A worker resumes a parent whose child was run in the process that
    died (its ``invoke``): the child goes to the queue, never runs here
    beside a worker that may take its parked row. Its active or finished
    run if it has one, else a run queued to go on from its checkpoint."""
    saver = _saver(wf)
    thread = str(config[CONF][CONFIG_KEY_THREAD_ID])
    found = handle_of_thread(saver, thread)
    if found is not None:
        return found.run_id
    started = wf.get_state(config).created_at is not None
    parent = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    given = None if started else input
    return submit_run(saver, wf.name, given, config, 0, parent_thread=parent).run_id


async def _aadopt(wf: Pregel, input: Any, config: dict[str, Any], scope: TaskScope) -> str:
    """The async twin of :func:`_adopt`."""
    saver = _saver(wf)
    thread = str(config[CONF][CONFIG_KEY_THREAD_ID])
    found = await ahandle_of_thread(saver, thread)
    if found is not None:
        return found.run_id
    started = (await wf.aget_state(config)).created_at is not None
    parent = scope.run.base_config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    given = None if started else input
    handle = await asubmit_run(saver, wf.name, given, config, 0, parent_thread=parent)
    return handle.run_id


def _handle(
    wf: Pregel, input: Any, config: dict[str, Any], run_id: str, detach: bool
) -> ChildHandle:
    thread = str(config[CONF][CONFIG_KEY_THREAD_ID])
    # where the child runs is what was recorded: a child started in process
    # is resumed in process, even by a worker resuming its parent
    local = None if run_id else _start_here(wf, input, config, detach)
    return ChildHandle(wf, thread, run_id or None, local)


def _outcome_body(name: str, thread: str) -> tuple[bool, Any]:
    """The recorded outcome: (True, output) or (False, (type name, message)).
    Its record names the child, not where it ran: a child run in a process
    that died is adopted by the queue when a worker resumes its parent."""
    wf = _WORKFLOWS[name]
    local = _LOCAL.get((id(wf.checkpointer), thread))
    found = None if local is not None else handle_of_thread(_saver(wf), thread)
    if found is None:
        assert local is not None, f"child thread {thread!r} is neither here nor queued"
        exc = local.future.exception()
        if exc is None:
            return True, local.future.result()
        return False, (type(exc).__name__, str(exc))
    try:
        return True, found.result(timeout=0)
    except RunFailedError as exc:  # the worker recorded "Type: message"
        type_name, _, message = exc.error.partition(": ")
        return False, (type_name, message)
    except Exception as exc:
        return False, (type(exc).__name__, str(exc))


class ChildHandle(RunHandle):
    """A child workflow, as its parent sees it: ``result()`` waits durably.
    A child run in this process has no queue row (``run_id`` is ``""``):
    its status and cancel go to its thread."""

    def __init__(self, wf: Pregel, thread_id: str, run_id: str | None, local: _Local | None):
        super().__init__(_saver(wf), run_id or "", thread_id)
        self.wf, self._local = wf, local

    def __repr__(self) -> str:
        return f"ChildHandle(thread_id={self.thread_id!r}, workflow={self.wf.name!r})"

    def status(self) -> str:
        local = self._local
        if local is None:
            return super().status()
        if not local.future.done():
            return RUNNING
        exc = local.future.exception()
        if exc is None:
            return DONE
        return CANCELLED_RUN if type(exc).__name__ == "RunCancelledError" else FAILED

    def cancel(self) -> str:
        local = self._local
        if local is None:
            return super().cancel()
        status = self.status()
        if status == RUNNING:
            local.wf.cancel(local.config)
        return status

    def _ended(self) -> tuple[bool, Any]:
        if self._local is not None:
            return self._local.future.done(), None
        return super().status() in FINISHED, None

    async def _aended(self) -> tuple[bool, Any]:
        if self._local is not None:
            return self._local.future.done(), None
        return await super().astatus() in FINISHED, None

    def _steps(self, scope: TaskScope) -> Any:
        polls = CHILD_POLLS if self._local is not None else None
        return wait_for(scope, "waiting", "child", None, self.thread_id, takes=True, polls=polls)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the child to end (durably: on a worker the parent frees
        its slot meanwhile) and return its output; its failure is raised as
        ``ChildWorkflowError``."""
        _no_timeout(timeout)
        scope = scope_for("result", is_async=False)
        try:
            here = self._local is not None
            with parked(scope, "waiting", "child", None, self.thread_id, here) as renew:
                block(self._steps(scope), self._ended, renew)
        finally:
            self._cancel_if_stopped(scope)
        args = (self.wf.name, self.thread_id)
        ok, value = record(scope, OUTCOME, _outcome_body, *args)
        return self._out(ok, value)

    async def aresult(self, timeout: float | None = None) -> Any:
        """The async twin of :meth:`result`."""
        _no_timeout(timeout)
        scope = scope_for("result", is_async=True)
        try:
            here = self._local is not None
            async with aparked(scope, "waiting", "child", None, self.thread_id, here) as renew:
                await ablock(self._steps(scope), self._aended, renew)
        finally:
            await self._acancel_if_stopped(scope)
        args = (self.wf.name, self.thread_id)
        ok, value = await arecord(scope, OUTCOME, _outcome_body, *args)
        return self._out(ok, value)

    def _out(self, ok: bool, value: Any) -> Any:
        if ok:
            return value
        type_name, message = value
        error = ChildWorkflowError(self.thread_id, f"{type_name}: {message}")
        local = self._local
        cause = local.future.exception() if local is not None and local.future.done() else None
        raise error from (cause or ChildFailure(type_name, message))

    def _to_cancel(self, scope: TaskScope) -> _Local | None:
        """A parent cancelled while it waits cancels a child running here
        (unless detached); a queued child is cancelled with its parent's run."""
        stop = scope.run.stop
        local = self._local
        if stop is None or stop.reason != CANCELLED or local is None or local.detached:
            return None
        return None if local.future.done() else local

    def _cancel_if_stopped(self, scope: TaskScope) -> None:
        local = self._to_cancel(scope)
        if local is not None:
            local.wf.cancel(local.config)

    async def _acancel_if_stopped(self, scope: TaskScope) -> None:
        """Through the saver's async side: a sync cancel on an async saver's
        own loop is refused (AsyncPostgresSaver: SyncCallOnLoopError), and
        the child went on after its parent was cancelled."""
        local = self._to_cancel(scope)
        if local is not None:
            await local.wf.acancel(local.config)


def _no_timeout(timeout: float | None) -> None:
    if timeout is not None:
        raise TypeError(
            "a child's result() inside its parent waits durably and takes no timeout: "
            "call result() with no arguments"
        )
