"""Checks of RetryPolicy and CachePolicy fields, run when a policy is made.

A policy is written once and used much later (when a task first fails, or
first hits the cache); a wrong field must fail where it is written, with a
message naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["check_cache_fields", "check_retry_fields", "check_retry_on", "describe"]


def describe(value: Any) -> str:
    """``value`` as an error message shows it: its type, and a short repr."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _is_number(value: Any) -> bool:
    import numbers  # when a policy is made, not at `import pregelkit`

    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _seconds(name: str, value: Any) -> None:
    if not _is_number(value):
        raise TypeError(
            f"RetryPolicy({name}=...) must be a number of seconds, got {describe(value)}"
        )
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"RetryPolicy({name}=...) must be 0 or more seconds, got {value!r}")


def check_retry_fields(
    initial_interval: Any, backoff_factor: Any, max_interval: Any, max_attempts: Any, jitter: Any
) -> None:
    _seconds("initial_interval", initial_interval)
    _seconds("max_interval", max_interval)
    if not _is_number(backoff_factor):
        raise TypeError(
            f"RetryPolicy(backoff_factor=...) must be a number, got {describe(backoff_factor)}"
        )
    if not math.isfinite(backoff_factor) or backoff_factor < 0:
        raise ValueError(
            f"RetryPolicy(backoff_factor=...) must be 0 or more, got {backoff_factor!r}"
        )
    import numbers

    if not isinstance(max_attempts, numbers.Integral) or isinstance(max_attempts, bool):
        raise TypeError(
            f"RetryPolicy(max_attempts=...) must be an int, got {describe(max_attempts)}"
        )
    if max_attempts < 1:
        raise ValueError(
            f"RetryPolicy(max_attempts=...) counts the first attempt too, so it must be 1 or "
            f"more (1: never retry), got {max_attempts}"
        )
    if not isinstance(jitter, bool):
        raise TypeError(f"RetryPolicy(jitter=...) must be True or False, got {describe(jitter)}")


def _is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def check_retry_on(retry_on: Any) -> None:
    """An exception class, a tuple or list of them, or a predicate on the exception."""
    if _is_exception_class(retry_on):
        return
    if isinstance(retry_on, Sequence) and not isinstance(retry_on, (str, bytes)):
        for item in retry_on:
            if not _is_exception_class(item):
                raise TypeError(
                    "RetryPolicy(retry_on=...) as a sequence must hold exception classes only, "
                    f"got {describe(item)} in it"
                )
        return
    if isinstance(retry_on, type) or not callable(retry_on):
        raise TypeError(
            "RetryPolicy(retry_on=...) must be an exception class (e.g. ConnectionError), a "
            "tuple of them, or a function taking the exception and returning True to retry; "
            f"got {describe(retry_on)}"
        )


def check_cache_fields(key_func: Any, ttl: Any) -> None:
    if not callable(key_func):
        raise TypeError(
            "CachePolicy(key_func=...) must be a function of the task's arguments returning "
            f"str or bytes, got {describe(key_func)}"
        )
    if ttl is None:
        return
    if not _is_number(ttl):
        raise TypeError(
            "CachePolicy(ttl=...) must be a number of seconds or None (forever), "
            f"got {describe(ttl)}"
        )
    if not math.isfinite(ttl) or ttl < 0:
        raise ValueError(
            f"CachePolicy(ttl=...) must be 0 or more seconds, or None for no expiry; got {ttl!r}"
        )
