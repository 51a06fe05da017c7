"""A channel that folds every write into its value with a reducer function."""

from __future__ import annotations

import collections.abc
import sys
from collections.abc import Callable, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    NotRequired,
    Required,
    Self,
    TypeVar,
    get_args,
    get_origin,
)

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import _ValueChannel
from pregelkit.errors import InvalidUpdateError
from pregelkit.types import Overwrite

Value = TypeVar("Value")

__all__ = ["BinaryOperatorAggregate"]

_OVERWRITE_KEY = "__overwrite__"
"""``{"__overwrite__": v}`` is how an ``Overwrite`` arrives when the update went
through JSON (an API client cannot build the class)."""

_WRAPPERS = (Annotated, Required, NotRequired)


def _wrappers() -> tuple[Any, ...]:
    """The annotation wrappers to look through. ``ReadOnly`` comes from
    ``typing_extensions`` (``typing`` from 3.13): an annotation can use it only
    if that module is loaded, so it is looked up, never imported."""
    found = [getattr(sys.modules.get(m), "ReadOnly", None) for m in ("typing", "typing_extensions")]
    return _WRAPPERS + tuple(w for w in found if w is not None)


_CONCRETE = {
    collections.abc.Sequence: list,
    collections.abc.MutableSequence: list,
    collections.abc.Set: set,
    collections.abc.MutableSet: set,
    collections.abc.Mapping: dict,
    collections.abc.MutableMapping: dict,
}
"""Abstract annotations a state schema commonly uses, mapped to the class whose
empty instance is the natural starting value."""


def _initial_value(typ: Any) -> Any:
    """The reducer's starting value: ``typ()`` when that works, else ``MISSING``.

    Starting from ``int() == 0`` or ``list() == []`` lets the first write go
    through the reducer like any other, so ``operator.add`` on a list works
    from the first step. ``Annotated[list, ...]`` and the TypedDict markers
    are looked through; an annotation that cannot be called (``int | None``)
    leaves the channel empty until its first write, which is then kept as is.
    """
    wrappers = _wrappers()
    while get_origin(typ) in wrappers:
        typ = get_args(typ)[0]
    typ = _CONCRETE.get(get_origin(typ) or typ, typ)
    try:
        return typ()
    except Exception:
        return MISSING


class BinaryOperatorAggregate(Generic[Value], _ValueChannel[Value, Value]):
    """Combines the step's writes with ``operator(current, write)``, in task order.

    This is the channel behind ``Annotated[list, operator.add]``: several
    tasks can write in one step without conflict. An ``Overwrite(value)``
    write replaces the value instead of being reduced, to reset an
    accumulated list; it wins over the other writes of its step, so only one
    per step is allowed.
    """

    __slots__ = ("operator",)

    clears_on_step = False

    def __init__(
        self, typ: Any, operator: Callable[[Value, Value], Value], *, key: str = ""
    ) -> None:
        super().__init__(typ, key)
        self.operator = operator
        self.value = _initial_value(typ)

    def __eq__(self, other: object) -> bool:
        # Two schemas that declare the same key with their own ``lambda`` get
        # two function objects that cannot be compared; treat them as the same.
        if not isinstance(other, BinaryOperatorAggregate):
            return False
        if _is_lambda(self.operator) or _is_lambda(other.operator):
            return True
        return bool(self.operator == other.operator)

    def __hash__(self) -> int:
        return hash(BinaryOperatorAggregate)

    def _fresh(self) -> Self:
        return type(self)(self.typ, self.operator, key=self.key)

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        # Work on a local so that an error (a second Overwrite, a failing
        # reducer) leaves the channel as it was before the step.
        value = self.value
        overwritten = False
        for update in values:
            if isinstance(update, Overwrite):
                replacement = update.value
            elif isinstance(update, dict) and len(update) == 1 and _OVERWRITE_KEY in update:
                replacement = update[_OVERWRITE_KEY]
            else:
                if not overwritten:
                    value = update if value is MISSING else self.operator(value, update)
                continue
            if overwritten:
                raise InvalidUpdateError(
                    f"At key {self.key!r}: Can receive only one Overwrite per step. "
                    "Make sure a single task writes Overwrite to this key in a step."
                )
            overwritten = True
            value = replacement
        self.value = value
        return True


def _is_lambda(fn: object) -> bool:
    return getattr(fn, "__name__", None) == "<lambda>"
