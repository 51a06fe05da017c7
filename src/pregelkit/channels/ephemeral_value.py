"""A channel whose value is seen by the step after the write, then dropped."""

from __future__ import annotations

from typing import Generic, TypeVar

from pregelkit.channels.base import _GuardedValue

Value = TypeVar("Value")

__all__ = ["EphemeralValue"]


class EphemeralValue(Generic[Value], _GuardedValue[Value]):
    """Carries a value for exactly one step: a trigger, not state.

    The graph's input and branch signals use it so a node fires once per
    write instead of on every later step. ``guard=False`` accepts several
    writes in a step and keeps the last, for signals where any one will do.
    """

    __slots__ = ()

    clears_on_step = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EphemeralValue) and other.guard == self.guard

    def __hash__(self) -> int:
        return hash((EphemeralValue, self.guard))
