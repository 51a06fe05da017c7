"""The channel interface: a named slot that reduces a step's updates into a value.

Also the private base of the channels that keep their value as it was
written (``LastValue``, ``AnyValue``, the reducers, ...): they differ only in
how a step's writes replace it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.errors import EmptyChannelError, InvalidUpdateError

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


class _OneType(BaseChannel[Value, Value, C]):
    """A channel whose value and updates are of its declared type."""

    __slots__ = ()

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ


class _ValueChannel(_OneType[Value, C]):
    """A channel whose value is one object of its declared type, kept in
    ``value`` (``MISSING`` while empty) and saved as it is.

    A subclass says how a step's writes replace the value (``update``) and how
    to build an empty channel configured like itself (``_fresh``); restoring a
    checkpoint fills such a channel, so a ``MISSING`` checkpoint leaves the
    fresh value in place (a reducer's ``typ()``, say).
    """

    __slots__ = ("value",)

    def __init__(self, typ: Any, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    @abstractmethod
    def _fresh(self) -> Self:
        """An empty channel of this kind and configuration, under the same key."""

    def checkpoint(self) -> Any:
        return self.value

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._fresh()
        if checkpoint is not MISSING:
            new.value = checkpoint
        return new

    def get(self) -> Value:
        if self.value is MISSING:
            raise EmptyChannelError()
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.value is not MISSING

    def _clear(self) -> bool:
        """Drop the value, as a channel that lasts one step does on a step
        with no writes; return whether there was one."""
        if self.value is MISSING:
            return False
        self.value = MISSING
        return True


class _GuardedValue(_ValueChannel[Value, Value]):
    """A value channel that keeps the last write of a step; with ``guard``
    (the default) several writes in one step are an error instead, as they are
    for ``LastValue``, because their order depends on scheduling. A subclass
    that ``clears_on_step`` drops its value on a step with no writes."""

    __slots__ = ("guard",)

    def __init__(self, typ: Any, guard: bool = True, *, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard

    def _fresh(self) -> Self:
        return type(self)(self.typ, self.guard, key=self.key)

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return self.clears_on_step and self._clear()
        if len(values) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: {type(self).__name__}(guard=True) can receive only one "
                f"value per step, got {len(values)}. Pass guard=False to keep the last of several."
            )
        self.value = values[-1]
        return True
