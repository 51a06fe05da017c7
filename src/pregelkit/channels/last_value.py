"""Channels that hold one value: the default for a plain state key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import _ValueChannel
from pregelkit.errors import EmptyChannelError, InvalidUpdateError

Value = TypeVar("Value")

__all__ = ["LastValue", "LastValueAfterFinish"]


class LastValue(Generic[Value], _ValueChannel[Value, Value]):
    """Keeps the single value written in a step, until another step writes one.

    Two writes in one step are rejected rather than silently ordered: tasks of
    a step run in parallel, so "the last one" would depend on scheduling.
    """

    __slots__ = ()

    clears_on_step = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LastValue)

    def __hash__(self) -> int:
        return hash(LastValue)

    def _fresh(self) -> Self:
        return type(self)(self.typ, self.key)

    def update(self, values: Sequence[Value]) -> bool:
        # Every task's write lands here, so the common case (one value) costs
        # one length check and one store.
        if len(values) != 1:
            if not values:
                return False
            raise InvalidUpdateError(
                f"At key {self.key!r}: Can receive only one value per step. "
                "Use a reducer channel (Topic, BinaryOperatorAggregate) if several tasks write it."
            )
        self.value = values[0]
        return True


class LastValueAfterFinish(Generic[Value], _ValueChannel[Value, tuple[Value, bool]]):
    """Holds back the last value written until the run has nothing else to do.

    Used for deferred nodes: they must see the value only once every other
    branch has finished, and must run once per value, so reading it (consume)
    empties the channel.
    """

    __slots__ = ("finished",)

    clears_on_step = False

    def __init__(self, typ: Any, key: str = "") -> None:
        super().__init__(typ, key)
        self.finished = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LastValueAfterFinish)

    def __hash__(self) -> int:
        return hash(LastValueAfterFinish)

    def _fresh(self) -> Self:
        return type(self)(self.typ, self.key)

    def checkpoint(self) -> Any:
        if self.value is MISSING:
            return MISSING
        return (self.value, self.finished)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._fresh()
        if checkpoint is not MISSING:
            new.value, new.finished = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        # A new value means the run has work again; it waits for the next finish.
        self.finished = False
        self.value = values[-1]
        return True

    def consume(self) -> bool:
        if self.finished:
            self.finished = False
            self.value = MISSING
            return True
        return False

    def finish(self) -> bool:
        if not self.finished and self.value is not MISSING:
            self.finished = True
            return True
        return False

    def get(self) -> Value:
        if self.value is MISSING or not self.finished:
            raise EmptyChannelError()
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.finished and self.value is not MISSING
