"""A channel whose value lives only in memory, never in a checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import EmptyChannelError, InvalidUpdateError

Value = TypeVar("Value")

__all__ = ["UntrackedValue"]


class UntrackedValue(Generic[Value], BaseChannel[Value, Value, Value]):
    """Holds a value for the rest of the run without ever saving it.

    For things that cannot or must not be serialized (clients, secrets, large
    caches): a resumed run starts with the channel empty and must write it
    again. ``guard=False`` accepts several writes in a step and keeps the last.
    """

    __slots__ = ("guard", "value")

    clears_on_step = False

    def __init__(self, typ: Any, guard: bool = True, *, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntrackedValue) and other.guard == self.guard

    def __hash__(self) -> int:
        return hash((UntrackedValue, self.guard))

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ

    def copy(self) -> Self:
        # The checkpoint round trip the default uses would drop the value, but
        # a copy within the run (e.g. for a subgraph or a state snapshot) keeps it.
        new = type(self)(self.typ, self.guard, key=self.key)
        new.value = self.value
        return new

    def checkpoint(self) -> Any:
        return MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        return type(self)(self.typ, self.guard, key=self.key)

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        if len(values) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: UntrackedValue(guard=True) can receive only one value "
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
