"""Channels that wait until every one of a set of named writers has written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import _OneType
from pregelkit.errors import EmptyChannelError, InvalidUpdateError

Value = TypeVar("Value")
C = TypeVar("C")

__all__ = ["NamedBarrierValue", "NamedBarrierValueAfterFinish"]


class _Barrier(_OneType[Value, C]):
    """What both barriers share: the names they wait for and the ones written so far."""

    __slots__ = ("names", "seen")

    clears_on_step = False

    def __init__(self, typ: Any, names: set[Value], *, key: str = "") -> None:
        super().__init__(typ, key)
        self.names = names
        self.seen: set[Value] = set()

    def _fresh(self) -> Self:
        return type(self)(self.typ, self.names, key=self.key)

    def update(self, values: Sequence[Value]) -> bool:
        # A name outside ``names`` is a wiring bug, not data. Every name is
        # checked before any is added, so a rejected step leaves the barrier
        # as it was.
        for name in values:
            if name not in self.names:
                expected = ", ".join(sorted(map(repr, self.names)))
                raise InvalidUpdateError(
                    f"At key {self.key!r}: {name!r} is not one of the names this barrier waits "
                    f"for ({expected}). Write only those names, or create the barrier with this "
                    "one too."
                )
        before = len(self.seen)
        self.seen.update(values)
        return len(self.seen) != before


class NamedBarrierValue(Generic[Value], _Barrier[Value, "set[Value]"]):
    """A join: available only once every name in ``names`` has been written.

    A node with several incoming edges (``add_edge(["a", "b"], "c")``) waits on
    one of these; each upstream node writes its own name, possibly in
    different steps. Reading it (consume) re-arms the barrier for the next round.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedBarrierValue) and other.names == self.names

    def __hash__(self) -> int:
        return hash((NamedBarrierValue, frozenset(self.names)))

    def checkpoint(self) -> Any:
        # A copy: ``seen`` grows in place, which must not reach a checkpoint
        # that is still waiting to be written.
        return set(self.seen) if self.seen else MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._fresh()
        if checkpoint is not MISSING:
            new.seen = set(checkpoint)
        return new

    def get(self) -> Value:
        if self.seen != self.names:
            raise EmptyChannelError()
        return None  # type: ignore[return-value]

    def is_available(self) -> bool:
        return self.seen == self.names

    def consume(self) -> bool:
        if self.seen == self.names:
            self.seen = set()
            return True
        return False


class NamedBarrierValueAfterFinish(Generic[Value], _Barrier[Value, Any]):
    """A join that also waits for the run to have nothing else to do.

    Used for deferred nodes with several incoming edges: once every name has
    been written, the barrier opens only at ``finish()``, after all other
    branches have run out of work.
    """

    __slots__ = ("finished",)

    def __init__(self, typ: Any, names: set[Value], *, key: str = "") -> None:
        super().__init__(typ, names, key=key)
        self.finished = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedBarrierValueAfterFinish) and other.names == self.names

    def __hash__(self) -> int:
        return hash((NamedBarrierValueAfterFinish, frozenset(self.names)))

    def checkpoint(self) -> Any:
        if not self.seen and not self.finished:
            return MISSING
        return (set(self.seen), self.finished)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._fresh()
        if checkpoint is not MISSING:
            seen, new.finished = checkpoint
            new.seen = set(seen)
        return new

    def finish(self) -> bool:
        if not self.finished and self.seen == self.names:
            self.finished = True
            return True
        return False

    def consume(self) -> bool:
        if self.finished and self.seen == self.names:
            self.finished = False
            self.seen = set()
            return True
        return False

    def get(self) -> Value:
        if not self.finished or self.seen != self.names:
            raise EmptyChannelError()
        return None  # type: ignore[return-value]

    def is_available(self) -> bool:
        return self.finished and self.seen == self.names
