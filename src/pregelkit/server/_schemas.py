"""A run's ``input`` checked against its workflow's input schema before the
run is queued: a value the workflow's annotation rules out (``n: int`` given
``"x"``) is a 422 naming the field, not a run that fails later on a worker.

The schema is the one ``assistants.get_schemas`` answers
(``get_input_jsonschema()``). The checker understands what pregelkit writes
into such a schema: ``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, ``minItems``/``maxItems``,
``enum``, ``const``, ``anyOf`` and ``$ref`` into ``$defs``. Any other keyword
(``format``, ``uniqueItems``, ...) is not checked: an input is refused only
for what the schema surely rules out. A workflow whose input is unannotated
has the schema ``{}``, and every input passes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pregelkit.server._errors import ApiError

_TYPES: dict[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "object": "an object",
    "array": "an array",
}


def check_input(schema: Mapping[str, Any], value: Any) -> None:
    """Raise a 422 naming the first place where ``value`` breaks ``schema``."""
    try:
        problem = _Checker(schema.get("$defs", {})).problem(schema, value, "input")
    except RecursionError:  # a recursive type, and an input nested past Python's stack
        raise ApiError(422, "the input is nested too deeply to check") from None
    if problem is not None:
        raise ApiError(422, f"{problem} (the workflow's input schema: assistants.get_schemas)")


def _is(kind: str, value: Any) -> bool:
    if kind == "integer":
        # 3.0 is an integer to JSON Schema; True is never one to a client
        return not isinstance(value, bool) and (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        )
    if kind == "number":
        return not isinstance(value, bool) and isinstance(value, (int, float))
    kinds: dict[str, Any] = {
        "string": str,
        "boolean": bool,
        "null": type(None),
        "object": dict,
        "array": list,
    }
    return kind not in kinds or isinstance(value, kinds[kind])


def _shown(value: Any) -> str:
    return json.dumps(value, default=str)[:80]


class _Checker:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.known: dict[tuple[int, int, str], str | None] = {}

    def problem(self, schema: Any, value: Any, where: str) -> str | None:
        """What is wrong with ``value`` at ``where``; ``None`` when nothing.
        Each answer is kept: a recursive union (``list[A | B]`` in both ``A``
        and ``B``) checks the same part of the input once per way to reach it,
        twice per level, and an input 30 levels deep held a thread for hours."""
        key = (id(schema), id(value), where)
        if key not in self.known:
            self.known[key] = self._problem(schema, value, where)
        return self.known[key]

    def _problem(self, schema: Any, value: Any, where: str) -> str | None:
        if not isinstance(schema, Mapping):
            return None  # ``true`` (or a shape this checker does not read): anything goes
        if value is None and "default" in schema and schema["default"] is None:
            return None  # an optional channel of a several-channel input
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = self.defs.get(ref.rsplit("/", 1)[-1])
            if (found := self.problem(target, value, where)) is not None:
                return found
        if "anyOf" in schema:
            options = schema["anyOf"]
            if not any(self.problem(o, value, where) is None for o in options):
                return f"{where} must match one of the input's types, got {_shown(value)}"
        if "const" in schema and value != schema["const"]:
            return f"{where} must be {_shown(schema['const'])}, got {_shown(value)}"
        if "enum" in schema and value not in schema["enum"]:
            allowed = ", ".join(_shown(v) for v in schema["enum"])
            return f"{where} must be one of {allowed}, got {_shown(value)}"
        kind = schema.get("type")
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        if kinds and not any(_is(k, value) for k in kinds):
            wanted = " or ".join(_TYPES.get(k, k) for k in kinds)
            return f"{where} must be {wanted}, got {_shown(value)}"
        if isinstance(value, dict):
            return self._object(schema, value, where)
        if isinstance(value, list):
            return self._array(schema, value, where)
        return None

    def _object(self, schema: Mapping[str, Any], value: dict[str, Any], where: str) -> str | None:
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return f"{where} is missing the required field {key!r}"
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            inner = f"{where}.{key}"
            if key in properties:
                found = self.problem(properties[key], item, inner)
            elif extra is False:
                found = f"{where} has the field {key!r}, which the input does not declare"
            else:
                found = self.problem(extra, item, inner)
            if found is not None:
                return found
        return None

    def _array(self, schema: Mapping[str, Any], value: list[Any], where: str) -> str | None:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if (isinstance(low, int) and len(value) < low) or (
            isinstance(high, int) and len(value) > high
        ):
            count = (
                f"{low}" if low == high else f"{low or 0} to {high if high is not None else 'any'}"
            )
            return f"{where} must have {count} items, got {len(value)}"
        fixed = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            spec = fixed[i] if i < len(fixed) else schema.get("items", True)
            if (found := self.problem(spec, item, f"{where}[{i}]")) is not None:
                return found
        return None
