"""A channel for writes that are known to agree: any one of them will do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit.channels.base import _ValueChannel

Value = TypeVar("Value")

__all__ = ["AnyValue"]


class AnyValue(Generic[Value], _ValueChannel[Value, Value]):
    """Keeps the last of a step's writes and forgets it at the next step.

    Meant for values every writer computes identically (so order does not
    matter); unlike ``LastValue`` several writes in a step are not an error,
    and unlike ``EphemeralValue(guard=False)`` nothing is checked at all.
    """

    __slots__ = ()

    clears_on_step = True

    def __init__(self, typ: Any, *, key: str = "") -> None:
        super().__init__(typ, key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyValue)

    def __hash__(self) -> int:
        return hash(AnyValue)

    def _fresh(self) -> Self:
        return type(self)(self.typ, key=self.key)

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return self._clear()
        self.value = values[-1]
        return True
