"""Calling user functions: what to inject, decided once per function.

A node or task function may ask for ``config``, ``writer``, ``store``,
``runtime`` or ``previous`` by parameter name. Inspecting a signature costs
microseconds, so it is done when the graph is built, never per call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import FunctionType
from typing import Any

INJECTABLE = ("config", "writer", "store", "runtime", "previous")


class FnSpec:
    """A function plus the facts about it the engine needs on every call."""

    __slots__ = ("fn", "inject", "inject_pos", "is_async", "is_gen", "name")

    def __init__(self, fn: Callable[..., Any], *, skip_first: bool = True) -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}: {fn!r}")
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        if _plain(fn):
            flags = fn.__code__.co_flags
            self.is_async = bool(flags & _CO_COROUTINE)
            self.is_gen = bool(flags & (_CO_GENERATOR | _CO_ASYNC_GENERATOR))
        else:
            import inspect  # when a graph is built, not at `import pregelkit`

            target = inspect.unwrap(fn) if inspect.isfunction(fn) or inspect.ismethod(fn) else fn
            call = target if inspect.isroutine(target) else getattr(target, "__call__", target)  # noqa: B004
            self.is_async = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(target)
            self.is_gen = inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call)
        pairs = _injectables(fn, skip_first)
        self.inject = tuple(name for name, _ in pairs)
        self.inject_pos = tuple(pos for _, pos in pairs)


_CO_GENERATOR, _CO_COROUTINE, _CO_ASYNC_GENERATOR = 0x20, 0x80, 0x200
"""The code flags ``inspect`` reads for these (``inspect.CO_*``)."""


def _plain(fn: Any) -> bool:
    """A function ``def`` or ``lambda`` made, with no attribute set on it (no
    ``__wrapped__``, ``__signature__`` or coroutine mark): its code object
    says all that ``inspect`` would, and the first graph a process builds
    need not import ``inspect`` (and ``ast``, ``dis``, ``tokenize``) for it."""
    return type(fn) is FunctionType and not fn.__dict__


@functools.lru_cache(maxsize=4096)
def _params(fn: Callable[..., Any]) -> tuple[str, ...]:
    if _plain(fn):  # what inspect.signature lists as positional-or-keyword, then keyword-only
        code = fn.__code__
        names = code.co_varnames
        end = code.co_argcount
        return names[code.co_posonlyargcount : end] + names[end : end + code.co_kwonlyargcount]
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    return tuple(
        name
        for name, p in sig.parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def _injectables(fn: Callable[..., Any], skip_first: bool) -> tuple[tuple[str, int], ...]:
    """(name, position) of each injectable parameter; a positional argument at
    that position means the caller passed it explicitly."""
    try:
        params = _params(fn)
    except TypeError:  # unhashable callable
        params = _params.__wrapped__(fn)
    start = 1 if skip_first else 0
    return tuple((n, i) for i, n in enumerate(params) if i >= start and n in INJECTABLE)


class Call:
    """One functional-API task call: the function and the arguments it was given."""

    __slots__ = (
        "args",
        "cache_policy",
        "cache_salt",
        "call_id",
        "identity",
        "kwargs",
        "name",
        "retry_policy",
        "spec",
        "timeout",
    )

    def __init__(
        self,
        spec: FnSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        identity: str,
        retry_policy: Any = None,
        cache_policy: Any = None,
        cache_salt: Callable[[], bytes] | None = None,
        timeout: Any = None,
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.args = args
        self.kwargs = kwargs
        self.name = name
        self.identity = identity
        self.retry_policy = retry_policy
        self.cache_policy = cache_policy
        self.call_id = name
        """What replay compares: name and argument digest (see ``_plan.replay``)."""
        self.cache_salt = cache_salt
        """What the task's code is (see ``_fingerprint``), asked for only when the
        call is cached: part of its cache key."""
