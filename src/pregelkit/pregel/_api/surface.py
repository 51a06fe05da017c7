"""What callers read off a graph besides running it: its input and output
types as Python types and as JSON Schema (from the channels' type hints, no
pydantic), and ``map()``, the graph applied to each item of a list.

LangGraph gets these from langchain-core's ``Runnable``; a ``Pregel`` has
them through this mixin.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from pregelkit.warnings import LangGraphDeprecatedSinceV10

if TYPE_CHECKING:
    from pregelkit.channels.base import BaseChannel

__all__ = ["MappedGraph", "RunnableSurface"]


def _title(name: str) -> str:
    return name.replace("_", " ").title()


class RunnableSurface:
    """Schemas and ``map()`` for ``Pregel``."""

    name: str
    channels: Mapping[str, BaseChannel[Any, Any, Any]]
    input_channels: str | Sequence[str]
    output_channels: str | Sequence[str]

    @property
    def _schema_name(self) -> str:
        # An @entrypoint graph (it wraps its function) is named after the
        # function, but LangGraph titles its schemas "LangGraphInput"/"...Output".
        return "LangGraph" if getattr(self, "__wrapped__", None) is not None else self.name

    def _typed(self, keys: str | Sequence[str], kind: str) -> Any:
        if isinstance(keys, str):
            return getattr(self.channels[keys], kind)
        fields = {k: getattr(self.channels[k], kind) | None for k in keys}
        suffix = "Input" if kind == "UpdateType" else "Output"
        return TypedDict(f"{self._schema_name}{suffix}", fields, total=False)  # type: ignore[operator]

    def _jsonschema(self, keys: str | Sequence[str], kind: str, suffix: str) -> dict[str, Any]:
        from pregelkit._internal._jsonschema import json_schema  # lazy: keeps imports fast

        title = f"{self._schema_name}{suffix}"
        if isinstance(keys, str):
            return json_schema(getattr(self.channels[keys], kind), title)
        properties = {}
        defs: dict[str, Any] = {}
        for key in keys:
            schema = json_schema(getattr(self.channels[key], kind))
            defs.update(schema.pop("$defs", {}))
            properties[key] = {**schema, "default": None, "title": _title(key)}
        out: dict[str, Any] = {"$defs": defs} if defs else {}
        out.update(properties=properties, title=title, type="object")
        return out

    @property
    def input_schema(self) -> Any:
        """The type of the input: the input channel's update type, or a
        ``TypedDict`` of every input channel (all optional)."""
        return self._typed(self.input_channels, "UpdateType")

    @property
    def output_schema(self) -> Any:
        """The type of the output: the output channel's value type, or a
        ``TypedDict`` of every output channel."""
        return self._typed(self.output_channels, "ValueType")

    def get_input_jsonschema(self, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """JSON Schema of the input, as LangGraph (through pydantic) writes it."""
        return self._jsonschema(self.input_channels, "UpdateType", "Input")

    def get_output_jsonschema(self, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """JSON Schema of the output, as LangGraph (through pydantic) writes it."""
        return self._jsonschema(self.output_channels, "ValueType", "Output")

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """JSON Schema of ``context_schema`` (a ``TypedDict`` or dataclass),
        inlined as pydantic writes it; ``None`` without one."""
        from pregelkit._internal._jsonschema import json_schema  # lazy: keeps imports fast

        context = getattr(self, "context_schema", None)
        if context is None:
            return None
        schema = json_schema(context)
        ref = schema.pop("$ref", None)
        defs = schema.pop("$defs", {})
        if ref is None or ref.rsplit("/", 1)[-1] not in defs:
            raise ValueError(f"context_schema must be a TypedDict or a dataclass, got {context!r}")
        body: dict[str, Any] = defs.pop(ref.rsplit("/", 1)[-1])
        return {**({"$defs": defs} if defs else {}), **body}

    def config_schema(self) -> dict[str, Any]:
        """Deprecated (LangGraph 1.0): the JSON Schema of ``context_schema``,
        an empty object without one; use ``get_context_jsonschema()``."""
        warnings.warn(
            "`config_schema` is deprecated. Use `get_context_jsonschema` for the relevant "
            "schema instead.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        return self.get_context_jsonschema() or {"properties": {}, "type": "object"}

    def get_config_jsonschema(self) -> dict[str, Any]:
        """Deprecated (LangGraph 1.0): use ``get_context_jsonschema()``."""
        warnings.warn(
            "`get_config_jsonschema` is deprecated. Use `get_context_jsonschema` instead.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        return self.get_context_jsonschema() or {"properties": {}, "type": "object"}

    def map(self) -> MappedGraph:
        """The graph applied to each item of a list input: ``invoke([a, b])``
        returns ``[invoke(a), invoke(b)]`` (run as a ``batch``)."""
        return MappedGraph(self)


class MappedGraph:
    """A graph run once per item of its input list (``Pregel.map()``); it is
    callable, so it can be a node of another graph."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        return self.invoke(inputs)

    def invoke(
        self, inputs: Sequence[Any], config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Any]:
        result: list[Any] = self.graph.batch(list(inputs), config, **kwargs)
        return result

    async def ainvoke(
        self, inputs: Sequence[Any], config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Any]:
        result: list[Any] = await self.graph.abatch(list(inputs), config, **kwargs)
        return result
