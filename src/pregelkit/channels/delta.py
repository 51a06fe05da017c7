"""A reducer channel whose reducer takes a whole batch of writes at once."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Self

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import _ValueChannel
from pregelkit.channels.binop import _CONCRETE, _WRAPPERS
from pregelkit.errors import InvalidUpdateError
from pregelkit.types import Overwrite

__all__ = ["DeltaChannel"]

_OVERWRITE_KEY = "__overwrite__"


def _overwrite(value: Any) -> tuple[bool, Any]:
    if isinstance(value, Overwrite):
        return True, value.value
    if isinstance(value, dict) and len(value) == 1 and _OVERWRITE_KEY in value:
        return True, value[_OVERWRITE_KEY]
    return False, None


def _concrete(typ: Any) -> Any:
    from typing import get_args, get_origin

    while get_origin(typ) in _WRAPPERS:
        typ = get_args(typ)[0]
    return _CONCRETE.get(get_origin(typ) or typ, get_origin(typ) or typ)


class DeltaChannel(_ValueChannel[Any, Any]):
    """Folds each step's writes into the value with one call,
    ``reducer(value, [write, ...])``, starting from ``typ()``.

    The reducer must be deterministic and give the same result however the
    writes are batched: ``reducer(reducer(s, xs), ys) == reducer(s, xs + ys)``.
    An ``Overwrite(v)`` write replaces the value (``None``: back to ``typ()``);
    one per step.

    LangGraph's ``DeltaChannel`` saves only the writes and rebuilds the value
    from ``get_delta_channel_history`` (with a full snapshot every
    ``snapshot_frequency`` updates). pregelkit saves the value itself at each
    checkpoint, so reads never replay history: the values, streams and state
    are the same; storage grows with the value rather than with the writes.
    """

    __slots__ = ("reducer", "snapshot_frequency")

    clears_on_step = False

    def __init__(
        self,
        reducer: Callable[[Any, Sequence[Any]], Any],
        typ: Any = None,
        *,
        snapshot_frequency: int = 100,
    ) -> None:
        if not isinstance(snapshot_frequency, int) or snapshot_frequency <= 0:
            raise ValueError(f"snapshot_frequency must be a positive int, got {snapshot_frequency}")
        typ = list if typ is None else _concrete(typ)
        super().__init__(typ)
        self.reducer = reducer
        self.snapshot_frequency = snapshot_frequency

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeltaChannel):
            return False
        if self.snapshot_frequency != other.snapshot_frequency:
            return False
        lambdas = "<lambda>" in (
            getattr(self.reducer, "__name__", None),
            getattr(other.reducer, "__name__", None),
        )
        return lambdas or bool(self.reducer == other.reducer)

    def __hash__(self) -> int:
        return hash(DeltaChannel)

    def _empty(self) -> Any:
        return self.typ()

    def _fresh(self) -> Self:
        new = type(self)(self.reducer, self.typ, snapshot_frequency=self.snapshot_frequency)
        new.key = self.key
        return new

    def copy(self) -> Self:
        new = self._fresh()
        new.value = self.value if self.value is MISSING else copy.copy(self.value)
        return new

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._fresh()
        new.value = self._empty() if checkpoint is MISSING else checkpoint
        return new

    def replay_writes(self, writes: Sequence[tuple[str, str, Any]]) -> None:
        """Apply stored writes (task id, channel, value), oldest first, in one
        reducer call; the last ``Overwrite`` among them is the new base."""
        values = [v for _, _, v in writes]
        if not values:
            return
        base = self._empty() if self.value is MISSING else self.value
        start = 0
        for i, value in enumerate(values):
            is_overwrite, replacement = _overwrite(value)
            if is_overwrite:
                base = self._empty() if replacement is None else copy.copy(replacement)
                start = i + 1
        rest = values[start:]
        self.value = self.reducer(base, rest) if rest else base

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        overwrites = [v for v in values if _overwrite(v)[0]]
        if len(overwrites) > 1:
            raise InvalidUpdateError(
                f"At key {self.key!r}: Can receive only one Overwrite value per super-step. "
                "Make sure a single task writes Overwrite to this key in a step."
            )
        if overwrites:
            replacement = _overwrite(overwrites[0])[1]
            self.value = self._empty() if replacement is None else copy.copy(replacement)
            return True
        base = self._empty() if self.value is MISSING else self.value
        self.value = self.reducer(base, list(values))
        return True
