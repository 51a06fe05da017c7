"""JSON Schema from Python type hints, shaped as pydantic writes it, without
pydantic: what ``Pregel.get_input_jsonschema()`` and ``interrupt(...,
response_schema=SomeType)`` return.

Classes with fields (``TypedDict``, dataclasses, ``NamedTuple``) and enums go
to ``$defs`` and are referenced; fields get pydantic's titles ("user_id" ->
"User Id"). A type with no JSON form (a class of no known shape) gives ``{}``,
which accepts anything, rather than an error.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["json_schema"]

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    bytes: {"format": "binary", "type": "string"},
    datetime.datetime: {"format": "date-time", "type": "string"},
    datetime.date: {"format": "date", "type": "string"},
    datetime.time: {"format": "time", "type": "string"},
    datetime.timedelta: {"format": "duration", "type": "string"},
    uuid.UUID: {"format": "uuid", "type": "string"},
    decimal.Decimal: {"anyOf": [{"type": "number"}, {"type": "string"}]},
    pathlib.Path: {"format": "path", "type": "string"},
}
_JSON_VALUES = (str, int, float, bool, type(None))
_WRAPPERS = (typing.Annotated, typing.Required, typing.NotRequired)


def _title(name: str) -> str:
    return name.replace("_", " ").title()


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _hints(tp: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception:  # unresolvable forward references: fields accept anything
        return dict.fromkeys(getattr(tp, "__annotations__", {}), Any)


def _required(tp: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict needs ``key``. Its hint says so first: under
    ``from __future__ import annotations``, Python 3.11 counts a
    ``NotRequired`` key among ``__required_keys__``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Required, typing.NotRequired):
        return origin is typing.Required
    return key in tp.__required_keys__


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def object_schema(self, tp: type) -> dict[str, Any]:
        name = tp.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder, so a recursive type refers to itself
            properties: dict[str, Any] = {}
            required: list[str] = []
            defaults: dict[str, Any] = {}
            if dataclasses.is_dataclass(tp):
                for f in dataclasses.fields(tp):
                    if f.default is not dataclasses.MISSING:
                        defaults[f.name] = f.default
                    elif f.default_factory is dataclasses.MISSING:
                        required.append(f.name)
            elif _is_typeddict(tp):
                required = [k for k, hint in _hints(tp).items() if _required(tp, k, hint)]
            else:  # NamedTuple
                defaults = dict(getattr(tp, "_field_defaults", {}))
                required = [k for k in tp._fields if k not in defaults]  # type: ignore[attr-defined]
            for key, hint in _hints(tp).items():
                prop = {**self.schema(hint), "title": _title(key)}
                if key in defaults and isinstance(defaults[key], _JSON_VALUES):
                    prop["default"] = defaults[key]
                properties[key] = prop
            body: dict[str, Any] = {"properties": properties}
            if required:
                body["required"] = required
            body.update(title=name, type="object")
            self.defs[name] = body
        return {"$ref": f"#/$defs/{name}"}

    def schema(self, tp: Any) -> dict[str, Any]:
        if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
            return {}
        if tp in _SCALARS:
            return dict(_SCALARS[tp])
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in _WRAPPERS:  # Annotated, and a TypedDict key's NotRequired[...]
            return self.schema(args[0])
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.schema(a) for a in args]}
        if origin is typing.Literal:
            kinds = {type(a) for a in args}
            out: dict[str, Any] = {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
            if len(kinds) == 1 and (kind := kinds.pop()) in _SCALARS:
                out.update(_SCALARS[kind])
            return out
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            values = [m.value for m in tp]
            self.defs.setdefault(tp.__name__, {"enum": values, "title": tp.__name__})
            return {"$ref": f"#/$defs/{tp.__name__}"}
        if isinstance(tp, type) and (
            dataclasses.is_dataclass(tp) or _is_typeddict(tp) or hasattr(tp, "_fields")
        ):
            return self.object_schema(tp)
        container = origin or tp
        if container in (list, Sequence, typing.Sequence) or container is list:
            return {"items": self.schema(args[0]) if args else {}, "type": "array"}
        if container in (set, frozenset):
            return {
                "items": self.schema(args[0]) if args else {},
                "type": "array",
                "uniqueItems": True,
            }
        if container is tuple:
            if not args or (len(args) == 2 and args[1] is Ellipsis):
                return {"items": self.schema(args[0]) if args else {}, "type": "array"}
            n = len(args)
            return {
                "maxItems": n,
                "minItems": n,
                "prefixItems": [self.schema(a) for a in args],
                "type": "array",
            }
        if container in (dict, Mapping, typing.Mapping):
            value = self.schema(args[1]) if args else {}
            return {"additionalProperties": value or True, "type": "object"}
        return {}


def json_schema(tp: Any, title: str | None = None) -> dict[str, Any]:
    """The JSON Schema of values of type ``tp`` (``title`` names the whole)."""
    builder = _Builder()
    out = builder.schema(tp)
    if builder.defs:
        out = {"$defs": dict(sorted(builder.defs.items())), **out}
    if title is not None:
        out["title"] = title
    return out
