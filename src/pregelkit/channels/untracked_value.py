"""A channel whose value lives only in memory, never in a checkpoint."""

from __future__ import annotations

from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import _GuardedValue

Value = TypeVar("Value")

__all__ = ["UntrackedValue"]


class UntrackedValue(Generic[Value], _GuardedValue[Value]):
    """Holds a value for the rest of the run without ever saving it.

    For things that cannot or must not be serialized (clients, secrets, large
    caches): a resumed run starts with the channel empty and must write it
    again. ``guard=False`` accepts several writes in a step and keeps the last.
    """

    __slots__ = ()

    clears_on_step = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntrackedValue) and other.guard == self.guard

    def __hash__(self) -> int:
        return hash((UntrackedValue, self.guard))

    def copy(self) -> Self:
        # The checkpoint round trip the default uses would drop the value, but
        # a copy within the run (e.g. for a subgraph or a state snapshot) keeps it.
        new = self._fresh()
        new.value = self.value
        return new

    def checkpoint(self) -> Any:
        return MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        return self._fresh()
