"""A channel for writes that are known to agree: any one of them will do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import EmptyChannelError

Value = TypeVar("Value")

__all__ = ["AnyValue"]


class AnyValue(Generic[Value], BaseChannel[Value, Value, Value]):
    """Keeps the last of a step's writes and forgets it at the next step.

    Meant for values every writer computes identically (so order does not
    matter); unlike ``LastValue`` several writes in a step are not an error,
    and unlike ``EphemeralValue(guard=False)`` nothing is checked at all.
    """

    __slots__ = ("value",)

    clears_on_step = True

    def __init__(self, typ: Any, *, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyValue)

    def __hash__(self) -> int:
        return hash(AnyValue)

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ

    def checkpoint(self) -> Any:
        return self.value

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, key=self.key)
        new.value = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            if self.value is MISSING:
                return False
            self.value = MISSING
            return True
        self.value = values[-1]
        return True

    def get(self) -> Value:
        if self.value is MISSING:
            raise EmptyChannelError()
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.value is not MISSING
