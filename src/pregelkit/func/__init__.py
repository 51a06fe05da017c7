"""The functional API: plain functions become durable workflows.

``@entrypoint`` turns a function into a ``Pregel`` graph with one node; each
call of a ``@task`` inside it becomes a PUSH task of that graph, so its
result is saved as it finishes and a resumed run replays it instead of
running it again.
"""

from __future__ import annotations

import functools
import typing
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from pregelkit import observe as _observe  # noqa: F401  (runs get spans once a tracer is set)
from pregelkit._internal._constants import CACHE_NS_WRITES, END, PREVIOUS, START
from pregelkit._internal._current import CURRENT
from pregelkit._internal._dataclass import lazy_dataclass
from pregelkit._internal._fingerprint import origin
from pregelkit.channels.ephemeral_value import EphemeralValue
from pregelkit.channels.last_value import LastValue
from pregelkit.checkpoint.serde._registry import allow_modules
from pregelkit.func._arguments import PLAIN, refuse_futures
from pregelkit.func._patch import deprecate_patch, patched
from pregelkit.pregel._graph.call import Call, FnSpec
from pregelkit.pregel._graph.nodes import PregelNode
from pregelkit.pregel._graph.validate import (
    check_cache,
    check_cache_policy,
    check_checkpointer,
    check_retry_policy,
    check_store,
)
from pregelkit.pregel._graph.writes import ChannelWrite, ChannelWriteEntry
from pregelkit.pregel.main import Pregel
from pregelkit.types import CachePolicy, RetryPolicy, TimeoutPolicy
from pregelkit.warnings import LangGraphDeprecatedSinceV05, LangGraphDeprecatedSinceV10

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures
    from datetime import timedelta

    from pregelkit.pregel._exec.remote import RemoteExecutor

__all__ = [
    "AsyncTaskFunction",
    "TaskFunction",
    "deprecate_patch",
    "entrypoint",
    "patched",
    "task",
]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def _policies(
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None,
) -> tuple[RetryPolicy, ...] | None:
    check_retry_policy(retry_policy)
    if retry_policy is None:
        return None
    if isinstance(retry_policy, RetryPolicy):
        return (retry_policy,)
    return tuple(retry_policy)


class _GeneratorRefused(TypeError, NotImplementedError):
    """A generator given as a task or an entrypoint: a ``TypeError``, and the
    ``NotImplementedError`` LangGraph raises, so code catching either works."""


def _refuse_generators(fn: Callable[..., Any], what: str) -> None:
    import inspect  # when a function is decorated, not at `import pregelkit.func`

    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise _GeneratorRefused(
            f"{what} {getattr(fn, '__qualname__', fn)!r} is a generator; generators are not "
            "supported: return the value instead, and stream progress with "
            "get_stream_writer() or the 'updates' stream"
        )


class _TaskMethods:
    """What a task adds to the ``wrapt.FunctionWrapper`` it is."""

    _self_identity: str
    _self_task_name: str
    _self_wrapper: Callable[..., Any]
    __wrapped__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A call of the task itself (a method bound to its instance is wrapt's
        ``BoundFunctionWrapper``, not this). ``wrapt`` would look up
        ``__self__`` on the function first, an ``AttributeError`` made and
        dropped per call; ``call_task`` needs no instance here (a bound
        method it was made from carries its own)."""
        return self._self_wrapper(self.__wrapped__, None, args, kwargs)

    def clear_cache(self, cache: Any) -> None:
        """Drop this task's cached results from ``cache``."""
        cache.clear([(CACHE_NS_WRITES, self._self_identity, self._self_task_name)])

    async def aclear_cache(self, cache: Any) -> None:
        await cache.aclear([(CACHE_NS_WRITES, self._self_identity, self._self_task_name)])

    def __reduce_remote__(self) -> tuple[Any, ...]:
        """Captured by a body shipped to a remote executor, a task cannot be called
        there (calls need the driver's loop); it travels as a stub that says so."""
        from pregelkit.pregel._exec.remote import TaskStub

        return (TaskStub, (self._self_task_name,))


@functools.cache
def _task_function_class() -> type:
    """The class of tasks, made when the first task is: ``wrapt`` (and the
    modules it imports) loads then, not with ``import pregelkit.func``."""
    import wrapt

    return type("_TaskFunction", (_TaskMethods, wrapt.FunctionWrapper), {"__module__": __name__})


class TaskFunction(Protocol[P, T]):
    """What ``@task`` makes of a plain function: calling it returns a future."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[T]: ...

    def clear_cache(self, cache: Any) -> None: ...

    async def aclear_cache(self, cache: Any) -> None: ...


class AsyncTaskFunction(Protocol[P, T]):
    """What ``@task`` makes of an async function: calling it returns an awaitable future."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]: ...

    def clear_cache(self, cache: Any) -> None: ...

    async def aclear_cache(self, cache: Any) -> None: ...


class _TaskDecorator(Protocol):
    @overload
    def __call__(  # type: ignore[overload-overlap]  # async functions match first, on purpose
        self, fn: Callable[P, Awaitable[T]], /
    ) -> AsyncTaskFunction[P, T]: ...
    @overload
    def __call__(self, fn: Callable[P, T], /) -> TaskFunction[P, T]: ...


def _deprecated_retry(
    where: str, deprecated: dict[str, Any], retry_policy: Any
) -> RetryPolicy | Sequence[RetryPolicy] | None:
    """``retry=`` (LangGraph before 0.5) is ``retry_policy=``, with a warning;
    any other unknown keyword is a ``TypeError``."""
    retry = deprecated.pop("retry", None)
    if deprecated:
        unknown = ", ".join(sorted(deprecated))
        raise TypeError(f"{where}() got unexpected keyword arguments: {unknown}")
    if retry is None:
        return cast("RetryPolicy | Sequence[RetryPolicy] | None", retry_policy)
    warnings.warn(
        "`retry` is deprecated and will be removed. Please use `retry_policy` instead.",
        LangGraphDeprecatedSinceV05,
        stacklevel=3,
    )
    return cast("RetryPolicy | Sequence[RetryPolicy]", retry_policy or retry)


@overload
def task(  # type: ignore[overload-overlap]  # async functions match first, on purpose
    __func_or_none__: Callable[P, Awaitable[T]],
) -> AsyncTaskFunction[P, T]: ...


@overload
def task(__func_or_none__: Callable[P, T]) -> TaskFunction[P, T]: ...


@overload
def task(
    __func_or_none__: None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    timeout: float | timedelta | TimeoutPolicy | None = None,
) -> _TaskDecorator: ...


def task(
    __func_or_none__: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    timeout: float | timedelta | TimeoutPolicy | None = None,
    **deprecated: Any,
) -> Any:
    """Make a function a task: each call inside an entrypoint is run, saved,
    retried and cached by the engine, and returns a future.

    Use ``.result()`` on the future in sync code and ``await`` it in async code.
    ``timeout`` bounds each attempt (seconds, a timedelta or a ``TimeoutPolicy``).
    """
    retry_policy = _deprecated_retry("task", deprecated, retry_policy)
    timeout_policy = TimeoutPolicy.coerce(timeout, "@task(timeout=...)")

    if name is not None and not isinstance(name, str):
        raise TypeError(f"task(name=...) must be a str, got {type(name).__name__}")
    check_cache_policy(cache_policy)
    policies = _policies(retry_policy)

    def decorate(fn: Callable[..., Any]) -> Any:
        import inspect

        _refuse_generators(fn, "task")
        spec = FnSpec(fn, skip_first=False)
        target = fn
        while isinstance(target, functools.partial):  # named after the function it binds
            target = target.func
        task_name: str = name or getattr(target, "__name__", None) or "task"
        identity = origin(fn)
        salt: list[bytes] = []

        def code_salt() -> bytes:
            """What the code is, for cache keys: computed on the first cached call."""
            if not salt:
                from pregelkit._internal._fingerprint import fingerprint

                salt.append(fingerprint(fn))
            return salt[0]

        if getattr(fn, "__module__", None):
            allow_modules(fn.__module__)
        bound = inspect.ismethod(fn)
        task_function = _task_function_class()

        def call_task(
            wrapped: Callable[..., Any],
            instance: Any,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
        ) -> Any:
            scope = CURRENT.get()
            if scope is None or scope.run.runner is None:
                raise RuntimeError(
                    f"task {task_name!r} was called outside a running workflow: call it from "
                    "inside an @entrypoint function (or another task, or a graph node)"
                )
            # a method decorated in its class gets its instance here; a bound
            # method (``task(obj.method)``) already carries it
            if instance is not None and not bound and not isinstance(instance, type):
                args = (instance, *args)
            if not PLAIN.issuperset(map(type, args)) or (
                kwargs and not PLAIN.issuperset(map(type, kwargs.values()))
            ):
                refuse_futures(task_name, args, kwargs)  # not all of types known plain
            return scope.run.runner.call(
                scope.task,
                Call(  # positional: once per call, keywords cost it their matching
                    spec,
                    args,
                    kwargs,
                    task_name,
                    identity,
                    policies,
                    cache_policy,
                    code_salt,
                    timeout_policy,
                ),
            )

        wrapper = task_function(fn, call_task)
        wrapper._self_identity = identity
        wrapper._self_task_name = task_name
        return wrapper

    if __func_or_none__ is not None:
        return decorate(__func_or_none__)
    return decorate


def _io_types(func: Callable[..., Any], input_name: str) -> tuple[Any, Any]:
    """The input and return types of an entrypoint function, from its type
    hints (``Any`` where there is none or it cannot be resolved, e.g. a class
    local to a function); they type the graph's channels, so its schemas show
    them."""
    import inspect

    annotations = inspect.get_annotations(func)
    namespace = getattr(func, "__globals__", {})

    def resolve(name: str) -> Any:
        hint = annotations.get(name, Any)
        if isinstance(hint, str):
            try:
                hint = eval(hint, namespace)  # what typing.get_type_hints does
            except Exception:
                return Any
        return hint

    output = resolve("return")
    if typing.get_origin(output) is entrypoint.final:
        output = typing.get_args(output)[0]
    elif output is entrypoint.final:
        output = Any
    return resolve(input_name), output


def _pluck_return(value: Any) -> Any:
    return value.value if isinstance(value, entrypoint.final) else value


def _pluck_save(value: Any) -> Any:
    return value.save if isinstance(value, entrypoint.final) else value


class entrypoint(Generic[T]):
    """Make a function a durable workflow: a ``Pregel`` graph with one node.

    ``invoke``/``stream`` run it; with a checkpointer, every task result is
    saved as it finishes, ``interrupt()`` pauses it, and
    ``invoke(Command(resume=...), config)`` resumes it. The function may ask
    for ``previous`` (the thread's last saved return value), ``config``,
    ``writer``, ``store`` or ``runtime`` by parameter name. ``timeout``
    bounds each attempt of the function's own body (seconds, a timedelta or a
    ``TimeoutPolicy``); the tasks it calls have their own. ``executor`` (e.g.
    ``pregelkit.executors.dask.DaskExecutor(client)``) runs the bodies of the
    tasks it calls on other machines; the function itself, which decides what
    to call, runs in the caller's process with the loop.
    """

    def __init__(
        self,
        checkpointer: Any = None,
        store: Any = None,
        cache: Any = None,
        context_schema: Any = None,
        cache_policy: CachePolicy[Any] | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        executor: RemoteExecutor | None = None,
        **deprecated: Any,
    ) -> None:
        if "config_schema" in deprecated:
            warnings.warn(
                "`config_schema` is deprecated and will be removed. "
                "Please use `context_schema` instead.",
                LangGraphDeprecatedSinceV10,
                stacklevel=2,
            )
            context_schema = context_schema or deprecated.pop("config_schema")
        retry_policy = _deprecated_retry("entrypoint", deprecated, retry_policy)
        check_checkpointer(checkpointer)
        check_store(store)
        check_cache(cache)
        check_cache_policy(cache_policy)
        check_retry_policy(retry_policy)
        self.timeout = TimeoutPolicy.coerce(timeout, "@entrypoint(timeout=...)")
        self.checkpointer = checkpointer
        self.store = store
        self.cache = cache
        self.context_schema = context_schema
        self.cache_policy = cache_policy
        self.retry_policy = retry_policy
        self.executor = executor

    @lazy_dataclass()
    class final(Generic[R, S]):
        """Return ``value`` to the caller but save ``save`` as the thread's
        ``previous`` for the next run."""

        value: R
        save: S

        def __init__(self, value: R, save: S) -> None:
            self.value = value
            self.save = save

    def __call__(self, func: Callable[..., Any]) -> Pregel:
        import inspect

        _refuse_generators(func, "entrypoint")
        if not callable(func):
            raise TypeError(f"@entrypoint needs a function, got {type(func).__name__}")
        params = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not params:
            raise TypeError(
                f"entrypoint {func.__qualname__!r} must take one positional parameter: its input"
            )
        name = getattr(func, "__name__", "entrypoint")
        input_type, output_type = _io_types(func, params[0].name)
        if getattr(func, "__module__", None):
            allow_modules(func.__module__)
        node = PregelNode(
            channels=START,
            triggers=[START],
            bound=func,
            writers=[
                ChannelWrite(
                    [
                        ChannelWriteEntry(END, mapper=_pluck_return),
                        ChannelWriteEntry(PREVIOUS, mapper=_pluck_save),
                    ]
                )
            ],
            retry_policy=self.retry_policy,
            cache_policy=self.cache_policy,
            timeout=self.timeout,
        )
        node.orchestrates = True  # its task calls need the loop: it stays in the driver
        graph = Pregel(
            nodes={name: node},
            channels={
                START: EphemeralValue(input_type),
                END: LastValue(output_type),
                PREVIOUS: LastValue(Any),
            },
            input_channels=START,
            output_channels=END,
            stream_channels=END,
            stream_mode="updates",
            checkpointer=self.checkpointer,
            store=self.store,
            cache=self.cache,
            context_schema=self.context_schema,
            name=name,
            executor=self.executor,
        )
        graph.__doc__ = func.__doc__
        graph.__name__ = name  # type: ignore[attr-defined]
        graph.__wrapped__ = func  # type: ignore[attr-defined]
        return graph
