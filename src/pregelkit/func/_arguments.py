"""Checks of the arguments a task is called with, made at the call.

A task future passed to another task is a mistake that shows up far from
where it was made: the future is not the value (``x + 1`` fails inside the
other task), it cannot be pickled into a cache key, and what it resolves to
is not part of any recorded call. Passing ``.result()`` is what was meant.
Futures passed directly, or as items of a list or tuple argument, are found;
deeper nesting is not searched, so the check stays a few type lookups.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PLAIN", "refuse_futures"]

_KNOWN: dict[type, bool] = {}
PLAIN: set[type] = set()
"""Types seen before that are neither futures nor lists/tuples to look into:
the common case costs one set lookup per argument."""


def _is_future_type(t: type) -> bool:
    known = _KNOWN.get(t)
    if known is None:
        # a type made while asyncio was not loaded can never be an asyncio
        # future, so the answer is final either way
        # (likewise concurrent.futures: neither is imported before a run needs it)
        futures: tuple[type, ...] = ()
        for module, name in (("concurrent.futures", "Future"), ("asyncio", "Future")):
            loaded = sys.modules.get(module)
            if loaded is not None:
                futures += (getattr(loaded, name),)
        known = _KNOWN[t] = issubclass(t, futures)
        if not known and t is not list and t is not tuple:
            PLAIN.add(t)
    return known


def _future_in(value: Any) -> bool:
    t = type(value)
    if t is list or t is tuple:
        return any(map(_is_future_type, map(type, value)))
    return _is_future_type(t)


def _all_plain(values: Iterable[Any]) -> bool:
    """Whether every value is of a type already known not to be (or hold) a
    future: the common case, one set lookup per value."""
    plain = PLAIN
    for value in values:
        t = type(value)
        if t in plain:
            continue
        if (t is list or t is tuple) and plain.issuperset(map(type, value)):
            continue
        return False
    return True


def refuse_futures(task_name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming the argument if any is a task future. (A
    call whose arguments are all of ``PLAIN`` types need not ask: its caller
    checks that with one set comparison, no frame.)"""
    if _all_plain(args) and (not kwargs or _all_plain(kwargs.values())):
        return
    for i, arg in enumerate(args):
        if _future_in(arg):
            _refuse(task_name, f"positional argument {i}", arg)
    for key, arg in kwargs.items():
        if _future_in(arg):
            _refuse(task_name, f"argument {key!r}", arg)


def _refuse(task_name: str, which: str, arg: Any) -> None:
    inside = " holds a task future" if type(arg) in (list, tuple) else " is a task future"
    raise TypeError(
        f"task {task_name!r} was called with a future: its {which}{inside}. Pass the value: "
        "call .result() on the future first (`await` it in async code), e.g. "
        "`second(first(x).result())`"
    )
