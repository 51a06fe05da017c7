"""Sentinels shared across the engine."""

from __future__ import annotations

from typing import Any, Final


class _Missing:
    """The value of an empty channel; distinct from ``None``, which is a value."""

    __slots__ = ()
    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> Any:
        return (_Missing, ())


MISSING: Final[Any] = _Missing()
