"""An example input for a workflow, made from its input's JSON Schema (the
entrypoint's type hint), for the hint ``pregelkit run`` gives when the input
is missing: ``'"hello"'`` for a ``str``, ``'[1, 2, 3]'`` for a
``list[int]``, an object with the fields of a ``TypedDict``. A workflow
whose input has no type hint gets ``None``: the hint then names no value."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.pregel import Pregel

_SCALARS: dict[str, Any] = {
    "string": "hello",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "null": None,
}
_DEPTH = 4
"""How deep nested schemas are followed (a recursive type ends somewhere)."""


def example_input(graph: Pregel) -> str | None:
    """A JSON text the workflow accepts as its input, or ``None`` when its
    input's type says nothing (no hint, ``Any``) or cannot be read."""
    try:
        schema = graph.get_input_jsonschema()
    except Exception:  # a type the schema writer does not know: no example
        return None
    found = _example(schema, schema.get("$defs", {}), _DEPTH)
    return None if found is _UNKNOWN else json.dumps(found, ensure_ascii=False)


_UNKNOWN = object()


def _example(schema: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth < 0:
        return _UNKNOWN
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _example(defs.get(ref.rsplit("/", 1)[-1]), defs, depth - 1)
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return _example(options[0], defs, depth)
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            items = [_example(s, defs, depth - 1) for s in schema["prefixItems"]]
            return _UNKNOWN if _UNKNOWN in items else items
        item = _example(schema.get("items", {}), defs, depth - 1)
        if item is _UNKNOWN:
            return [1, 2, 3]
        return [1, 2, 3] if type(item) is int else [item]
    if kind == "object":
        fields = schema.get("properties") or {}
        if not fields:
            value = _example(schema.get("additionalProperties", {}), defs, depth - 1)
            return {"key": "value" if value is _UNKNOWN else value}
        found = {name: _example(sub, defs, depth - 1) for name, sub in fields.items()}
        return {name: ("..." if v is _UNKNOWN else v) for name, v in found.items()}
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    return _UNKNOWN
