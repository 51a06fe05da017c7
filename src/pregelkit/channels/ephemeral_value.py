"""A channel whose value is seen by the step after the write, then dropped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import EmptyChannelError, InvalidUpdateError

Value = TypeVar("Value")

__all__ = ["EphemeralValue"]


class EphemeralValue(Generic[Value], BaseChannel[Value, Value, Value]):
    """Carries a value for exactly one step: a trigger, not state.

    The graph's input and branch signals use it so a node fires once per
    write instead of on every later step. ``guard=False`` accepts several
    writes in a step and keeps the last, for signals where any one will do.
    """

    __slots__ = ("guard", "value")

    clears_on_step = True

    def __init__(self, typ: Any, guard: bool = True, *, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EphemeralValue) and other.guard == self.guard

    def __hash__(self) -> int:
        return hash((EphemeralValue, self.guard))

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ

    def checkpoint(self) -> Any:
        return self.value

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.guard, key=self.key)
        new.value = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            if self.value is MISSING:
                return False
            self.value = MISSING
            return True
        if len(values) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: EphemeralValue(guard=True) can receive only one value "
                f"per step, got {len(values)}. Pass guard=False to keep the last of several."
            )
        self.value = values[-1]
        return True

    def get(self) -> Value:
        if self.value is MISSING:
            raise EmptyChannelError()
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.value is not MISSING
