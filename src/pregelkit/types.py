"""Public types: what users pass in (Send, Command, policies) and get back
(Interrupt, StateSnapshot, PregelTask).

No ``from __future__ import annotations`` here, and the annotations are
quoted by hand instead (they read as they always did, e.g. in
``dataclasses.fields()``): the fields of a ``NamedTuple`` must not be strings,
or each becomes a ``ForwardRef`` whose ``compile()`` builds Python's AST type
table on first use, a tenth of ``import pregelkit.func``. ``PregelTask`` and
``StateSnapshot``, whose fields name each other, load with the state API.
"""

import math
import sys
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, NamedTuple, TypeVar, Union

from pregelkit._internal._cache import default_cache_key
from pregelkit._internal._current import require_scope
from pregelkit._internal._dataclass import lazy_dataclass
from pregelkit._internal._ids import interrupt_id
from pregelkit._internal._lazy import lazy_attributes
from pregelkit._internal._policy_checks import (
    check_cache_fields,
    check_retry_fields,
    check_retry_on,
)
from pregelkit.warnings import LangGraphDeprecatedSinceV10, LangGraphDeprecatedSinceV11

if TYPE_CHECKING:
    from datetime import timedelta

    from pregelkit._internal._snapshot import PregelTask, StateSnapshot

__all__ = [
    "All",
    "CacheKey",
    "CachePolicy",
    "Command",
    "Durability",
    "GraphOutput",
    "Interrupt",
    "Overwrite",
    "PregelExecutableTask",
    "PregelTask",
    "RetryPolicy",
    "Send",
    "StateSnapshot",
    "StateUpdate",
    "StreamMode",
    "StreamWriter",
    "TimeoutPolicy",
    "default_retry_on",
    "interrupt",
]

All = Literal["*"]
"""Interrupt before or after every node."""

StreamMode = Literal["values", "updates", "checkpoints", "tasks", "debug", "messages", "custom"]
"""How ``stream`` emits: full values, per-node updates, checkpoints, task events,
both of those (debug), or what nodes write through ``get_stream_writer()``."""

Durability = Literal["sync", "async", "exit"]
"""When state is saved: before the next step starts (``sync``), in the
background while it runs (``async``), or only when the run exits (``exit``)."""

StreamWriter = Callable[[Any], None]

OutputT = TypeVar("OutputT")
"""Emits a chunk on the ``custom`` stream."""

RunnableConfig = dict[str, Any]


class Send:
    """Run ``node`` with ``arg`` as its input in the next step (a PUSH task).

    Return a list of Sends from a node, or write them to the tasks channel,
    to fan out: each Send becomes its own task, all running in parallel.
    ``timeout`` bounds that one task instead of the node's own
    ``TimeoutPolicy`` (seconds or a timedelta are a ``run_timeout``), so one
    fan-out item known to be slow can get more time than its siblings.
    """

    __slots__ = ("arg", "node", "timeout")

    def __init__(
        self,
        /,
        node: "str",
        arg: "Any",
        *,
        timeout: "float | timedelta | TimeoutPolicy | None" = None,
    ) -> "None":
        self.node = node
        self.arg = arg
        self.timeout = TimeoutPolicy.coerce(timeout, "Send(timeout=...)")

    def __hash__(self) -> "int":
        return hash((self.node, repr(self.arg), self.timeout))

    def __repr__(self) -> "str":
        if self.timeout is None:
            return f"Send(node={self.node!r}, arg={self.arg!r})"
        return f"Send(node={self.node!r}, arg={self.arg!r}, timeout={self.timeout!r})"

    def __eq__(self, value: "object") -> "bool":
        return (
            isinstance(value, Send)
            and self.node == value.node
            and self.arg == value.arg
            and self.timeout == value.timeout
        )

    def __setstate__(self, state: "Any") -> "None":
        """Sends pickled before ``timeout`` existed load with no timeout."""
        self.timeout = None
        for slots in state if isinstance(state, tuple) else (None, state):
            for name, value in (slots or {}).items():
                setattr(self, name, value)


@lazy_dataclass(slots=True, repr=False, init=False, kw_only=("response_schema",))
class Interrupt:
    """A pause requested by ``interrupt(value)``; ``id`` answers it in a resume map.

    ``response_schema`` is the JSON Schema of the answer the interrupt asked
    for, when ``interrupt(..., response_schema=...)`` gave one.
    """

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("value", "id", "response_schema")  # noqa: RUF023

    value: "Any"
    id: "str"
    response_schema: "dict[str, Any] | type | None"

    def __init__(
        self,
        value: "Any",
        id: "str" = "",
        *,
        response_schema: "dict[str, Any] | type | None" = None,
        **legacy: "Any",
    ) -> "None":
        """``ns``, ``resumable`` and ``when`` are the fields of interrupts made
        before LangGraph 1.0, still accepted as LangGraph accepts them: the
        id is derived from ``ns`` when none is given, the others are dropped."""
        unknown = legacy.keys() - {"ns", "resumable", "when"}
        if unknown:
            raise TypeError(f"Interrupt() got unexpected keyword arguments: {sorted(unknown)}")
        ns = legacy.get("ns")
        if not id and isinstance(ns, (list, tuple)):
            id = interrupt_id("|".join(ns))
        self.value = value
        self.id = id
        self.response_schema = response_schema

    @classmethod
    def from_ns(
        cls,
        value: "Any",
        ns: "str",
        *,
        index: "int" = 0,
        response_schema: "dict[str, Any] | type | None" = None,
    ) -> "Interrupt":
        """The ``index``-th interrupt of the task whose checkpoint namespace is ``ns``."""
        return cls(value=value, id=interrupt_id(ns, index), response_schema=response_schema)

    @property
    def interrupt_id(self) -> "str":
        """Deprecated name of ``id``, kept for code written against LangGraph 0.4."""
        warnings.warn(
            "`interrupt_id` is deprecated. Use `id` instead.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        return self.id

    def __repr__(self) -> "str":
        # LangGraph's text, so a printed stream or state reads the same
        return (
            f"Interrupt(value={self.value!r}, id={self.id!r}, "
            f"response_schema={self.response_schema!r})"
        )

    def __setstate__(self, state: "tuple[Any, ...]") -> "None":
        # Interrupts saved before ``response_schema`` existed pickle two fields.
        value, iid, *rest = state
        self.value, self.id = value, iid
        self.response_schema = rest[0] if rest else None

    def __getstate__(self) -> "tuple[Any, ...]":
        return (self.value, self.id, self.response_schema)


def _v1_access(how: "str") -> "None":
    warnings.warn(
        f"Accessing GraphOutput via {how} is deprecated. Use `result.value` to access the "
        "output value directly, or `result.interrupts` for interrupts.",
        LangGraphDeprecatedSinceV11,
        stacklevel=3,
    )


@lazy_dataclass(frozen=True, slots=True)
class GraphOutput(Generic[OutputT]):
    """What ``invoke(..., version="v2")`` returns: the output, and the
    interrupts the run stopped at (if any)."""

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("value", "interrupts")  # noqa: RUF023

    value: "OutputT"
    interrupts: "tuple[Interrupt, ...]"

    def __init__(self, value: "OutputT", interrupts: "tuple[Interrupt, ...]" = ()) -> "None":
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "interrupts", interrupts)

    def __getitem__(self, key: "str") -> "Any":
        """``result[key]`` as in a v1 result (deprecated since LangGraph 1.1)."""
        _v1_access("`result[key]`")
        if key == "__interrupt__":
            return self.interrupts
        if isinstance(self.value, dict):
            return self.value[key]
        try:
            return getattr(self.value, key)
        except AttributeError:
            raise KeyError(key) from None

    def __contains__(self, key: "object") -> "bool":
        """``key in result`` as in a v1 result (deprecated since LangGraph 1.1)."""
        _v1_access("`key in result`")
        if key == "__interrupt__":
            return bool(self.interrupts)
        if isinstance(self.value, dict):
            return key in self.value
        return isinstance(key, str) and hasattr(self.value, key)


@lazy_dataclass(slots=True)
class Command:
    """Steer a run: resume interrupts, update channels, go to nodes.

    ``resume`` is one value (when one interrupt is pending) or a mapping from
    interrupt id to value. ``graph=Command.PARENT`` sends it to the parent graph.
    """

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("graph", "update", "resume", "goto")  # noqa: RUF023

    graph: "str | None"
    update: "Any | None"
    resume: "dict[str, Any] | Any | None"
    goto: "Send | Sequence[Send | str] | str"

    PARENT: "ClassVar[str]" = "__parent__"

    def __init__(
        self,
        graph: "str | None" = None,
        update: "Any | None" = None,
        resume: "dict[str, Any] | Any | None" = None,
        goto: "Send | Sequence[Send | str] | str" = (),
    ) -> "None":
        self.graph = graph
        self.update = update
        self.resume = resume
        self.goto = goto

    def __repr__(self) -> "str":
        # LangGraph's text: the fields that are set (truthy), in field order
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__slots__ if getattr(self, name)
        )
        return f"Command({shown})"

    def _update_as_tuples(self) -> "Sequence[tuple[str, Any]]":
        if self.update is None:
            return ()
        if isinstance(self.update, dict):
            return list(self.update.items())
        if isinstance(self.update, (list, tuple)) and all(
            isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) for t in self.update
        ):
            return list(self.update)
        raise TypeError(
            f"Command.update must be a dict of channel to value or a list of (channel, value) "
            f"pairs, got {type(self.update).__name__}"
        )


@lazy_dataclass(slots=True)
class Overwrite:
    """Write this value to a BinaryOperatorAggregate, bypassing its reducer."""

    __slots__ = ("value",)

    value: "Any"

    def __init__(self, value: "Any") -> "None":
        self.value = value


def default_retry_on(exc: "Exception") -> "bool":
    """Retry what is likely transient; never retry what is a bug in the code.

    Programming errors (ValueError, TypeError, LookupError, ...) fail at once;
    connection errors and HTTP 5xx responses are retried.
    """
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(
        exc,
        (
            ValueError,
            TypeError,
            ArithmeticError,
            ImportError,
            LookupError,
            NameError,
            SyntaxError,
            RuntimeError,
            ReferenceError,
            StopIteration,
            StopAsyncIteration,
            OSError,
        ),
    ):
        return False
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return 500 <= status < 600
    return True


RetryOn = Union[type[BaseException], Sequence[type[BaseException]], Callable[[Exception], bool]]


class _RetryPolicyFields(NamedTuple):
    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    max_attempts: int = 3
    jitter: bool = True
    retry_on: RetryOn = default_retry_on


class RetryPolicy(_RetryPolicyFields):
    """How to retry a failing task: backoff grows by ``backoff_factor`` up to
    ``max_interval``; ``retry_on`` picks the exceptions (a type, a sequence of
    types, or a predicate).

    The fields are checked here, so a wrong policy fails where it is written,
    not when a task first fails."""

    __slots__ = ()

    def __new__(
        cls,
        initial_interval: "float" = 0.5,
        backoff_factor: "float" = 2.0,
        max_interval: "float" = 128.0,
        max_attempts: "int" = 3,
        jitter: "bool" = True,
        retry_on: "RetryOn" = default_retry_on,
    ) -> "RetryPolicy":
        check_retry_fields(initial_interval, backoff_factor, max_interval, max_attempts, jitter)
        check_retry_on(retry_on)
        return super().__new__(
            cls, initial_interval, backoff_factor, max_interval, max_attempts, jitter, retry_on
        )


def _seconds(value: "Any", name: "str") -> "float | None":
    """``value`` as positive finite seconds; a clear error naming ``name`` otherwise."""
    if value is None:
        return None
    if _is_timedelta(value):
        seconds = float(value.total_seconds())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(
            f"{name} must be a number of seconds or a timedelta, got {type(value).__name__}: "
            f"{value!r}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(
            f"{name} must be a positive, finite number of seconds, got {value!r}; "
            "pass None for no limit"
        )
    return seconds


def _is_timedelta(value: "Any") -> "bool":
    """``isinstance(value, datetime.timedelta)``; a timedelta exists only if
    its module was imported, so the check does not import it."""
    datetime = sys.modules.get("datetime")
    return datetime is not None and isinstance(value, datetime.timedelta)


@lazy_dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """How long one attempt of a task or node may take.

    ``run_timeout`` bounds the attempt's wall-clock time; ``idle_timeout``
    bounds the time between two signs of progress: each chunk written to the
    stream writer, each task call, each ``get_runtime().heartbeat()``
    (``refresh_on="auto"``), or heartbeats only (``refresh_on="heartbeat"``).
    An attempt that exceeds either fails with ``NodeTimeoutError``; a
    ``RetryPolicy`` retries it only if its ``retry_on`` names that error. Sync
    and async functions alike: the caller gets control back, a sync body
    left running in its thread can no longer write anything.
    """

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("run_timeout", "idle_timeout", "refresh_on")  # noqa: RUF023

    run_timeout: "float | None"
    idle_timeout: "float | None"
    refresh_on: "Literal['auto', 'heartbeat']"

    def __init__(
        self,
        *,
        run_timeout: "float | timedelta | None" = None,
        idle_timeout: "float | timedelta | None" = None,
        refresh_on: "Literal['auto', 'heartbeat']" = "auto",
    ) -> "None":
        run = _seconds(run_timeout, "TimeoutPolicy.run_timeout")
        idle = _seconds(idle_timeout, "TimeoutPolicy.idle_timeout")
        if run is None and idle is None:
            raise ValueError(
                "TimeoutPolicy needs run_timeout or idle_timeout (or both); "
                "for no timeout pass timeout=None"
            )
        if refresh_on not in ("auto", "heartbeat"):
            raise ValueError(
                f"TimeoutPolicy.refresh_on must be 'auto' or 'heartbeat', got {refresh_on!r}"
            )
        object.__setattr__(self, "run_timeout", run)
        object.__setattr__(self, "idle_timeout", idle)
        object.__setattr__(self, "refresh_on", refresh_on)

    def __setstate__(self, state: "Sequence[Any]") -> "None":
        """A stored policy (in a checkpointed ``Send``) is checked as a new one is."""
        run_timeout, idle_timeout, refresh_on = state
        TimeoutPolicy.__init__(
            self, run_timeout=run_timeout, idle_timeout=idle_timeout, refresh_on=refresh_on
        )

    @classmethod
    def coerce(cls, value: "Any", name: "str" = "timeout") -> "TimeoutPolicy | None":
        """A policy from what a user may pass as ``name``: a policy, seconds
        (``run_timeout``), a timedelta, or None."""
        if value is None or isinstance(value, TimeoutPolicy):
            return value
        if (isinstance(value, (int, float)) or _is_timedelta(value)) and not isinstance(
            value, bool
        ):
            return cls(run_timeout=_seconds(value, name))
        raise TypeError(
            f"{name} must be a TimeoutPolicy, a number of seconds, a timedelta or None, "
            f"got {type(value).__name__}: {value!r}"
        )


KeyFuncT = TypeVar("KeyFuncT", bound=Callable[..., Union[str, bytes]])


@lazy_dataclass()
class CachePolicy(Generic[KeyFuncT]):
    """Cache a task's result, keyed by ``key_func`` of its input, for ``ttl`` seconds
    (``None``: forever)."""

    key_func: "KeyFuncT" = default_cache_key  # type: ignore[assignment]
    ttl: "int | None" = None

    def __init__(
        self,
        key_func: "KeyFuncT" = default_cache_key,  # type: ignore[assignment]
        ttl: "int | None" = None,
    ) -> "None":
        self.key_func = key_func
        self.ttl = ttl
        self.__post_init__()

    def __post_init__(self) -> "None":
        check_cache_fields(self.key_func, self.ttl)


class CacheKey(NamedTuple):
    """Where a task's cached writes live: namespace, hashed input, time to live."""

    ns: tuple[str, ...]
    key: str
    ttl: int | None


class StateUpdate(NamedTuple):
    """One update of a ``bulk_update_state`` batch: ``values`` written as if
    by ``as_node`` (``task_id`` names the task when there are several)."""

    values: dict[str, Any] | None
    as_node: str | None = None
    task_id: str | None = None


@lazy_dataclass(eq=False, hidden=("scope", "path_str", "timeout"))
class PregelExecutableTask:
    """One unit of work in a superstep: a node run (PULL) or a pushed call (PUSH).

    ``writes`` collects ``(channel, value)`` pairs while it runs; the runner
    commits them when it finishes. Engine-private state rides in ``scope``.
    """

    name: "str"
    input: "Any"
    proc: "Any"
    writes: "deque[tuple[str, Any]]"
    config: "RunnableConfig"
    triggers: "Sequence[str]"
    retry_policy: "Sequence[RetryPolicy]"
    cache_key: "CacheKey | None"
    id: "str"
    path: "tuple[str | int | tuple[Any, ...], ...]"
    writers: "Sequence[Any]" = ()
    subgraphs: "Sequence[Any]" = ()
    scope: "Any" = None
    path_str: "str" = ""
    """``path`` as the string savers store; filled when it is cheap to know."""
    timeout: "TimeoutPolicy | None" = None
    """This task's own bound (a ``Send(timeout=...)``), over its node's."""

    __hash__ = object.__hash__

    def __init__(
        self,
        name: "str",
        input: "Any",
        proc: "Any",
        writes: "deque[tuple[str, Any]]",
        config: "RunnableConfig",
        triggers: "Sequence[str]",
        retry_policy: "Sequence[RetryPolicy]",
        cache_key: "CacheKey | None",
        id: "str",
        path: "tuple[str | int | tuple[Any, ...], ...]",
        writers: "Sequence[Any]" = (),
        subgraphs: "Sequence[Any]" = (),
        scope: "Any" = None,
        path_str: "str" = "",
        timeout: "TimeoutPolicy | None" = None,
    ) -> "None":
        self.name = name
        self.input = input
        self.proc = proc
        self.writes = writes
        self.config = config
        self.triggers = triggers
        self.retry_policy = retry_policy
        self.cache_key = cache_key
        self.id = id
        self.path = path
        self.writers = writers
        self.subgraphs = subgraphs
        self.scope = scope
        self.path_str = path_str
        self.timeout = timeout


def interrupt(value: "Any", *, response_schema: "dict[str, Any] | type | None" = None) -> "Any":
    """Pause the run and surface ``value``; on resume, return the resume value.

    The first call in a task raises ``GraphInterrupt`` (the graph stops and the
    caller sees the interrupt). When the thread is resumed with
    ``Command(resume=v)``, the task runs again from the top and this call
    returns ``v``. Several calls in one task are answered in order.

    ``response_schema`` (a JSON Schema dict, or a type turned into one) rides
    on the surfaced ``Interrupt`` to tell the client what answer is expected;
    the answer itself is not validated against it.
    """
    if response_schema is not None and not isinstance(response_schema, dict):
        from pregelkit._internal._jsonschema import json_schema

        response_schema = json_schema(response_schema)
    return require_scope("interrupt()").interrupt(value, response_schema=response_schema)


_SNAPSHOT = "pregelkit._internal._snapshot"
__getattr__ = lazy_attributes(__name__, {"PregelTask": _SNAPSHOT, "StateSnapshot": _SNAPSHOT})
