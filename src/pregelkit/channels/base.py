"""The channel interface: a named slot that reduces a step's updates into a value."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.errors import EmptyChannelError

Value = TypeVar("Value")
Update = TypeVar("Update")
C = TypeVar("C")

__all__ = ["BaseChannel"]


class BaseChannel(Generic[Value, Update, C], ABC):
    """A channel holds one value and decides how a step's writes combine into it.

    Subclasses implement ``get``, ``update`` and ``from_checkpoint``; the rest
    has working defaults. ``update`` receives every write of one step at once
    (possibly none) and returns whether the value changed.
    """

    __slots__ = ("key", "typ")

    clears_on_step: ClassVar[bool] = True
    """Whether ``update([])`` can change an available value (an ephemeral
    channel empties itself at the next step). The loop notifies only available
    channels with this flag at each step boundary, so a graph of many
    ``LastValue`` channels pays nothing per step for the ones not written."""

    def __init__(self, typ: Any, key: str = "") -> None:
        self.typ = typ
        self.key = key

    @property
    @abstractmethod
    def ValueType(self) -> Any:
        """The type of the value this channel holds."""

    @property
    @abstractmethod
    def UpdateType(self) -> Any:
        """The type of an update this channel accepts."""

    def copy(self) -> Self:
        """An independent copy with the same value."""
        return self.from_checkpoint(self.checkpoint())

    def checkpoint(self) -> C | Any:
        """The value to store; ``MISSING`` when the channel is empty."""
        try:
            return self.get()
        except EmptyChannelError:
            return MISSING

    @abstractmethod
    def from_checkpoint(self, checkpoint: C | Any) -> Self:
        """A new channel of this kind holding ``checkpoint`` (``MISSING``: empty)."""

    @abstractmethod
    def get(self) -> Value:
        """The current value; raises ``EmptyChannelError`` when there is none."""

    def is_available(self) -> bool:
        """Whether ``get`` would return a value."""
        try:
            self.get()
            return True
        except EmptyChannelError:
            return False

    @abstractmethod
    def update(self, values: Sequence[Update]) -> bool:
        """Apply one step's updates (in task order); return whether the value changed."""

    def consume(self) -> bool:
        """Called when a task subscribed to this channel ran; return whether it changed."""
        return False

    def finish(self) -> bool:
        """Called when the run has no more tasks; return whether it changed."""
        return False
