"""The runtime a node or task can ask for by naming a ``runtime`` parameter,
or get with ``get_runtime()``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from pregelkit._internal._current import require_scope
from pregelkit._internal._dataclass import lazy_dataclass, replace

ContextT = TypeVar("ContextT")

__all__ = [
    "DEFAULT_RUNTIME",
    "ExecutionInfo",
    "RunControl",
    "Runtime",
    "ServerInfo",
    "get_runtime",
]


def _noop_writer(_: Any) -> None:
    return None


def _noop_heartbeat() -> None:
    return None


@lazy_dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """Where a task runs: its checkpoint, namespace and id, the thread and
    run, and which attempt this is (1 first; a retry counts up) and when the
    first one started (``time.time()``)."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = (  # noqa: RUF023
        "checkpoint_id",
        "checkpoint_ns",
        "task_id",
        "thread_id",
        "run_id",
        "node_attempt",
        "node_first_attempt_time",
    )

    checkpoint_id: str
    checkpoint_ns: str
    task_id: str
    thread_id: str | None
    run_id: str | None
    node_attempt: int
    node_first_attempt_time: float | None

    def __init__(
        self,
        checkpoint_id: str,
        checkpoint_ns: str,
        task_id: str,
        thread_id: str | None = None,
        run_id: str | None = None,
        node_attempt: int = 1,
        node_first_attempt_time: float | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "checkpoint_id", checkpoint_id)
        _set(self, "checkpoint_ns", checkpoint_ns)
        _set(self, "task_id", task_id)
        _set(self, "thread_id", thread_id)
        _set(self, "run_id", run_id)
        _set(self, "node_attempt", node_attempt)
        _set(self, "node_first_attempt_time", node_first_attempt_time)

    def patch(self, **overrides: Any) -> ExecutionInfo:
        """A copy with the given fields replaced."""
        return replace(self, **overrides)  # type: ignore[no-any-return]


@lazy_dataclass(frozen=True, slots=True)
class ServerInfo:
    """The LangGraph server a run belongs to. pregelkit has no server, so a
    run's ``runtime.server_info`` is ``None``; the type is here for code
    that builds a ``Runtime`` with one."""

    __slots__ = ("assistant_id", "graph_id", "user")

    assistant_id: str
    graph_id: str
    user: Any

    def __init__(self, assistant_id: str, graph_id: str, user: Any = None) -> None:
        object.__setattr__(self, "assistant_id", assistant_id)
        object.__setattr__(self, "graph_id", graph_id)
        object.__setattr__(self, "user", user)


@lazy_dataclass(frozen=True)
class Runtime(Generic[ContextT]):
    """What the run offers a task: the user's context, the store, the stream
    writer, the thread's previous return value, and ``heartbeat()``: a sign of
    progress that restarts the task's ``TimeoutPolicy.idle_timeout`` clock."""

    context: ContextT | None = None
    store: Any = None
    stream_writer: Any = _noop_writer
    previous: Any = None
    heartbeat: Callable[[], None] = _noop_heartbeat
    control: RunControl | None = None
    """The run's ``RunControl`` (the caller's ``control=``, or one of the run's
    own): ``runtime.control.request_drain()`` drains the run from inside."""
    execution_info: ExecutionInfo | None = None
    server_info: ServerInfo | None = None

    def __init__(
        self,
        context: ContextT | None = None,
        store: Any = None,
        stream_writer: Any = _noop_writer,
        previous: Any = None,
        heartbeat: Callable[[], None] = _noop_heartbeat,
        control: RunControl | None = None,
        execution_info: ExecutionInfo | None = None,
        server_info: ServerInfo | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "context", context)
        _set(self, "store", store)
        _set(self, "stream_writer", stream_writer)
        _set(self, "previous", previous)
        _set(self, "heartbeat", heartbeat)
        _set(self, "control", control)
        _set(self, "execution_info", execution_info)
        _set(self, "server_info", server_info)

    def merge(self, other: Runtime[ContextT]) -> Runtime[ContextT]:
        """``other``, with this runtime's values where ``other`` has none."""
        return Runtime(
            context=other.context or self.context,
            store=other.store or self.store,
            stream_writer=(
                other.stream_writer
                if other.stream_writer is not _noop_writer
                else self.stream_writer
            ),
            previous=self.previous if other.previous is None else other.previous,
            heartbeat=(
                other.heartbeat if other.heartbeat is not _noop_heartbeat else self.heartbeat
            ),
            control=other.control or self.control,
            execution_info=other.execution_info or self.execution_info,
            server_info=other.server_info or self.server_info,
        )

    def override(self, **overrides: Any) -> Runtime[ContextT]:
        """A copy with the given fields replaced (unknown names are a ``TypeError``)."""
        return replace(self, **overrides)  # type: ignore[no-any-return]


DEFAULT_RUNTIME: Runtime[Any] = Runtime()
"""The runtime of nothing: no context, no store, a writer that drops chunks."""


def get_runtime(context_schema: type[ContextT] | None = None) -> Runtime[ContextT]:
    """The running task's ``Runtime`` (``context_schema`` only types the
    result); call it from inside a task or node."""
    runtime: Runtime[ContextT] = require_scope("get_runtime()").runtime()
    return runtime


class RunControl:
    """Ask runs to drain, e.g. from a SIGTERM handler when a deployment stops.

    Pass it to ``invoke``/``stream``/``ainvoke``/``astream`` as ``control=``.
    After ``request_drain()`` a run starts no new task: the tasks it started
    finish (nothing is cancelled), it saves, and it raises ``GraphDrained``
    with the thread resumable (``invoke(None, config)``); ``get_state`` then
    shows ``metadata["stopped"] == "drained"``. A graph of nodes stops at
    the next step boundary; an ``@entrypoint`` at its next task call.
    One control may serve many runs; once drained it stays drained.
    """

    __slots__ = ("_cancelled", "_lock", "_reason", "_runs")

    def __init__(self) -> None:
        import threading

        self._reason: str | None = None
        self._cancelled = False
        self._runs: list[_Stoppable] = []
        # reentrant: a signal handler may call request_drain while the same
        # thread is inside _attach
        self._lock = threading.RLock()

    @property
    def drain_requested(self) -> bool:
        return self._reason is not None

    @property
    def drain_reason(self) -> str | None:
        return self._reason

    def request_drain(self, reason: str = "shutdown") -> None:
        """Ask every run using this control to drain; safe from any thread
        (a signal handler too). The first reason given is kept."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
            runs = list(self._runs)
        for run in runs:
            run.drain(self._reason)

    def _cancel(self) -> None:
        """Stop the runs using this control as ``cancel()`` does (they end
        with ``RunCancelledError``): how a worker, which watches the cancel
        marks of all its runs at once, stops one of them. Internal."""
        with self._lock:
            self._cancelled = True
            runs = list(self._runs)
        for run in runs:
            run.request(_CANCELLED)

    def _attach(self, run: _Stoppable) -> None:
        """A run listens; a drain or cancel already requested reaches it at once."""
        with self._lock:
            self._runs.append(run)
            reason, cancelled = self._reason, self._cancelled
        if cancelled:
            run.request(_CANCELLED)
        if reason is not None:
            run.drain(reason)

    def _detach(self, run: _Stoppable) -> None:
        with self._lock:
            if run in self._runs:
                self._runs.remove(run)


_CANCELLED = "cancelled"
"""``pregel._exec.stop.CANCELLED``, spelled here: this module loads first."""


class _Stoppable(Protocol):
    """What a ``RunControl`` tells a run (``pregel._exec.stop.RunStop``)."""

    def drain(self, reason: str) -> None: ...

    def request(self, reason: str, detail: str | None = None) -> None: ...
