"""Reading stored values without running anything the data names.

``threads``, ``history`` and ``show`` must work on any database, including
one written by code that is not importable here, and must never import a
module whose name they read from it. Instances of classes the safe loader
does not know are shown as ``StoredObject`` placeholders naming the type,
with the plain data they were stored with.
"""

from __future__ import annotations

from typing import Any

from pregelkit.checkpoint.serde._allowlist import SAFE, Allowlist
from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.checkpoint.serde.jsonplus import TAG_CLOUDPICKLE, JsonPlusSerializer


class StoredObject:
    """An instance of a class that was not imported: its type's name, the
    arguments it was rebuilt with and its state, all plain data."""

    type_name = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> StoredObject:
        obj = super().__new__(cls)
        obj.args = args + tuple(kwargs.items())
        obj.state = None
        obj.items = []
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args: tuple[Any, ...]
        self.state: Any
        self.items: list[Any]

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: Any) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type_name}
        if self.args:
            data["args"] = list(self.args)
        if self.state is not None:
            data["state"] = self.state
        if self.items:
            data["items"] = self.items
        return data

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args]
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and state[0] is None:
            state = state[1]  # __slots__ classes store (None, slots)
        if isinstance(state, dict):
            parts += [f"{k}={v!r}" for k, v in state.items()]
        elif state is not None:
            parts.append(repr(state))
        if self.items:
            parts.append(repr(self.items))
        return f"<{self.type_name}{' ' if parts else ''}{' '.join(parts)}>"


_placeholders: dict[str, type[StoredObject]] = {}


def _placeholder(module: str, name: str) -> type[StoredObject]:
    type_name = f"{module}.{name}"
    found = _placeholders.get(type_name)
    if found is None:
        found = type(name, (StoredObject,), {"type_name": type_name})
        _placeholders[type_name] = found
    return found


class _ViewAllowlist(Allowlist):
    """Every class loads: a safe one as itself, any other as a placeholder."""

    __slots__ = ()

    def find(self, module: str, name: str) -> Any:
        return SAFE.get((module, name)) or _placeholder(module, name)


class Unloaded:
    """A value that is shown, not loaded: code stored by value, or bytes the
    serializer cannot read."""

    def __init__(self, note: str) -> None:
        self.note = note

    def as_data(self) -> dict[str, Any]:
        return {"type": "unloaded", "note": self.note}

    def __repr__(self) -> str:
        return f"<{self.note}>"


class ViewSerializer(JsonPlusSerializer):
    """Loads what the default serializer loads, never imports: unknown classes
    become placeholders, code stored by value and unreadable bytes become a
    note saying so (a broken value must not hide the rest of a checkpoint)."""

    def __init__(self) -> None:
        super().__init__()
        self._allowlist = _ViewAllowlist()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if isinstance(data, tuple) and data and data[0] == TAG_CLOUDPICKLE:
            return Unloaded("code stored by value (cloudpickle): not loaded")
        try:
            return super().loads_typed(data)
        except SerdeError as exc:
            return Unloaded(f"unreadable: {exc}")
