"""A channel that collects every write of a step (or of the whole run) in a list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar, Union

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.errors import EmptyChannelError

Value = TypeVar("Value")

__all__ = ["Topic"]


class Topic(Generic[Value], BaseChannel[Sequence[Value], Union[Value, list[Value]], list[Value]]):
    """A pub/sub queue: every task may write, and readers get all the writes.

    By default the list holds one step's writes only (it is how ``Send``
    packets reach the next step); ``accumulate=True`` keeps appending for the
    whole run. A write that is a list contributes its items, so a node can
    publish several values with one return.

    ``Topic(typ, accumulate=True)`` builds an instance of a private subclass
    whose class-level ``clears_on_step`` is False, so both
    ``chan.clears_on_step`` and ``type(chan).clears_on_step`` spare the loop
    from notifying it at every step: an accumulating topic never changes on an
    empty step.
    """

    __slots__ = ("accumulate", "values")

    clears_on_step = True

    def __new__(cls, typ: Any = None, accumulate: bool = False, *, key: str = "") -> Self:
        # Defaults let pickle and copy rebuild an instance with cls.__new__(cls).
        if cls is Topic and accumulate:
            return object.__new__(_AccumulatingTopic)  # type: ignore[return-value]
        return object.__new__(cls)

    def __init__(self, typ: Any, accumulate: bool = False, *, key: str = "") -> None:
        super().__init__(typ, key)
        self.accumulate = accumulate
        self.values: list[Value] = []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topic) and other.accumulate == self.accumulate

    def __hash__(self) -> int:
        return hash((Topic, self.accumulate))

    @property
    def ValueType(self) -> Any:
        return Sequence[self.typ]  # type: ignore[name-defined]

    @property
    def UpdateType(self) -> Any:
        return Union[self.typ, list[self.typ]]  # type: ignore[name-defined]

    def checkpoint(self) -> Any:
        # A copy: an accumulating topic extends its list in place, which must
        # not reach a checkpoint that is still waiting to be written.
        return list(self.values) if self.values else MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.accumulate, key=self.key)
        if checkpoint is not MISSING:
            new.values = list(checkpoint)
        return new

    def update(self, values: Sequence[Value | list[Value]]) -> bool:
        changed = False
        if not self.accumulate and self.values:
            self.values = []
            changed = True
        for value in values:
            if isinstance(value, list):
                if value:
                    self.values.extend(value)
                    changed = True
            else:
                self.values.append(value)
                changed = True
        return changed

    def get(self) -> Sequence[Value]:
        if not self.values:
            raise EmptyChannelError()
        return list(self.values)

    def is_available(self) -> bool:
        return bool(self.values)


class _AccumulatingTopic(Topic[Value]):
    """``Topic(typ, accumulate=True)``: the same channel, minus the per-step notice."""

    __slots__ = ()

    clears_on_step = False
