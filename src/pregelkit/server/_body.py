"""Request bodies: read under a size limit, parsed as a JSON object, and
their fields checked for type one by one.

The limit holds whether or not the request says its ``Content-Length``
(a chunked body is counted as it arrives and cut off past the limit).
A malformed body or a known field of the wrong type is a 422 naming the
field; fields this server does not know are ignored, as LangGraph's server
does, so newer SDK releases that send more keep working.

JSON that Python reads but no answer could carry back is a 422 too: a
``NaN``, an ``Infinity`` or a number past the float range (``1e400``, or
an integer of 400 digits), a
lone UTF-16 surrogate (``"\\ud800"``), nesting past ``MAX_DEPTH``. Stored,
such a value made every later answer holding it a 500 (a thread's metadata:
each ``threads.search`` of its owner).
"""

from __future__ import annotations

import json
import math
import re
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from pregelkit.server._errors import ApiError

_MISSING: Any = object()
MAX_DEPTH = 256
"""Levels of nesting a body may have: far past any real input, well short
of what breaks Python's recursion (the serializer, the checkpoints)."""


async def read_json(request: Request, limit: int) -> Body:
    """The request's JSON object (``{}`` for an empty body)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, f"bad Content-Length {declared!r}")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return Body({})
    return Body(await run_in_threadpool(_parse, raw))


def _parse(raw: bytes) -> dict[str, Any]:
    """The body's JSON object, checked: on a worker thread, as reading and
    checking 10 MB of small values takes seconds the event loop (every other
    request, every stream) must not wait."""
    try:
        # UTF-8 only, strictly: json.loads would take UTF-16 and, as bytes,
        # let an encoded surrogate through (surrogatepass)
        text = raw.decode("utf-8")
        data = json.loads(
            text, parse_constant=_no_constant, parse_float=_finite, parse_int=_within_floats
        )
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(422, f"the body must be a JSON object, got {type(data).__name__}")
    strings = _SURROGATE_ESCAPE.search(text) is not None
    if strings or text.count("[") + text.count("{") > MAX_DEPTH:
        _check_values(data, strings)
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is past the range of a float")
    return value


def _within_floats(text: str) -> int:
    """An integer JSON readers (the SDK's orjson, LangGraph's server) can
    read back: within the float range, as they read a large one as a float."""
    value = int(text)
    if abs(value) > sys.float_info.max:
        raise ValueError(f"the number {text[:40]}... is past the range of a float")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A ``\\ud800``-``\\udfff`` escape: only a body that has one can hold a
lone surrogate (UTF-8 has none: such bytes fail to decode)."""


def _check_values(data: Any, strings: bool) -> None:
    """A 422 for a body nested past ``MAX_DEPTH`` or (``strings``: look at
    them) holding a lone surrogate in a string or a key: no UTF-8 answer
    can carry one."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise ApiError(422, f"the body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            if strings:
                for key in value:
                    _check_text(key)
            value = value.values()
        for item in value:
            if isinstance(item, (dict, list)):
                pending.append((item, depth + 1))
            elif strings and isinstance(item, str):
                _check_text(item)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _lone_surrogate(text) from None


def _lone_surrogate(text: str) -> ApiError:
    return ApiError(
        422,
        f"the body has a lone surrogate in the string {text[:40]!r}: send text as UTF-8 "
        "(a \\ud800-\\udfff escape must be one of a pair)",
    )


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the body is larger than {limit} bytes (the server's --max-body)")


class Body:
    """A JSON object whose fields are read with their expected type."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    def _get(self, name: str, kinds: tuple[type, ...], kind: str, default: Any) -> Any:
        value = self.data.get(name, _MISSING)
        if value is _MISSING or value is None:
            return default
        # bool is an int to Python, never to a client
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ApiError(422, f"field {name!r} must be {kind}, got {json.dumps(value)[:80]}")
        return value

    def text(self, name: str, default: Any = None) -> Any:
        return self._get(name, (str,), "a string", default)

    def obj(self, name: str, default: Any = None) -> Any:
        return self._get(name, (dict,), "an object", default)

    def array(self, name: str, default: Any = None) -> Any:
        return self._get(name, (list,), "an array", default)

    def flag(self, name: str, default: Any = None) -> Any:
        return self._get(name, (bool,), "true or false", default)

    def integer(self, name: str, default: Any = None, *, low: int = 0, high: int = 10_000) -> Any:
        value = self._get(name, (int,), "an integer", default)
        if value is not None and not low <= value <= high:
            raise ApiError(422, f"field {name!r} must be between {low} and {high}, got {value}")
        return value

    def seconds(self, name: str, high: float) -> Any:
        """A duration: a number of seconds from 0 to ``high``."""
        value = self._get(name, (int, float), "a number of seconds", None)
        if value is not None and not 0 <= value <= high:
            raise ApiError(422, f"field {name!r} must be between 0 and {high:.0f} seconds")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: Any = None) -> Any:
        value = self.text(name, default)
        if value is not None and value not in choices:
            raise ApiError(
                422, f"field {name!r} must be one of {', '.join(choices)}, got {value!r}"
            )
        return value

    def labels(self, name: str, default: Any = None) -> Any:
        """A store namespace: an array of strings."""
        value = self.array(name, default)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise ApiError(422, f"field {name!r} must be an array of strings")
        return value

    def uuid(self, name: str) -> Any:
        value = self.text(name)
        return None if value is None else check_uuid(value, name)

    def any(self, name: str) -> Any:
        return self.data.get(name)


def check_uuid(value: str, what: str) -> str:
    """``value`` as LangGraph's server takes ids: a UUID, any spelling, kept as
    given; in ASCII (Python's UUID takes other scripts' digits, and an id
    that is no HTTP header's text failed the run's answer after queueing it)."""
    try:
        uuid.UUID(value)
    except ValueError:
        valid = False
    else:
        valid = value.isascii()
    if not valid:
        raise ApiError(422, f"{what} must be a UUID, got {value[:80]!r}")
    return value


def query_int(request: Request, name: str, default: int, high: int = 10_000) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) > high:
        raise ApiError(422, f"query parameter {name!r} must be an integer from 0 to {high}")
    return int(raw)


def query_flag(request: Request, name: str) -> bool:
    """A true/false query parameter (the SDK sends ``true`` or ``false``)."""
    raw = request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise ApiError(422, f"query parameter {name!r} must be true or false")
    return raw in ("true", "1")
