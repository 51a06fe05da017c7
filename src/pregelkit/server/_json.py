"""Values as JSON: what a workflow returns or holds in its state, whatever
Python types it used, made into something a client can read.

Interrupts become ``{"value", "id"}`` as on LangGraph's server; NaN and
infinities ``null`` (as there); an integer past the float range its digits
as a string; a lone surrogate in a string U+FFFD; dataclasses,
pydantic models and named tuples their fields; times ISO 8601; anything
else its ``str`` rather than a failed response.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from pregelkit.types import Interrupt


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        # past the float range, JSON readers (the SDK's orjson) refuse the whole answer
        return value if abs(value) <= sys.float_info.max else str(value)
    if isinstance(value, float):
        # JSON has no NaN or Infinity: null, as LangGraph's server writes them
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if value.isascii() else _utf8(value)
    if isinstance(value, Mapping):
        return {jsonable(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, Interrupt):
        return {"value": jsonable(value.value), "id": value.id}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return jsonable(value._asdict())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump())
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def has_metadata(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` holds each of ``wanted``'s keys with its value, as
    JSON compares them: ``true`` is not ``1`` (Python's ``==`` says it is)."""
    return all(k in metadata and same_json(metadata[k], v) for k, v in wanted.items())


def same_json(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _utf8(text: str) -> str:
    """``text`` with each lone surrogate (``surrogateescape``'d bytes, say) as
    U+FFFD: UTF-8 has no spelling for one, and an answer holding it failed."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class Json(JSONResponse):
    """A response whose content goes through :func:`jsonable` first."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            jsonable(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode("utf-8")


def iso(seconds: float) -> str:
    """A time (seconds since the epoch) as LangGraph's server writes times."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat()
