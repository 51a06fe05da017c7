"""Workflows tests/test_serve_attacks.py serves."""

from __future__ import annotations

import threading
from typing import Any, Literal, TypedDict

from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint

LONE = b"\xff".decode("utf-8", "surrogateescape")
"""A byte no UTF-8 decoding took, kept as a lone surrogate."""


@entrypoint()
def odd(inputs: dict[str, Any]) -> dict[str, Any]:
    """Values Python makes and JSON has no spelling for: NaN, an infinity, a
    lone surrogate (a mean of nothing, bytes decoded with surrogateescape),
    an integer no JSON reader takes."""
    get_stream_writer()({"nan": float("nan"), LONE: LONE})
    return {"nan": float("nan"), "inf": float("-inf"), "text": "é" + LONE, "big": 10**400}


def hangs(headers: dict[bytes, bytes]) -> str | None:
    """A sync auth hook that hangs on the token "hang" (an identity provider
    that never answers), far past its timeout."""
    token = headers.get(b"x-api-key", b"").decode()
    if token == "hang":
        threading.Event().wait()
    return token or None


class Left(TypedDict):
    """A tree node; ``Right`` has the same shape: an input is either."""

    kids: list[Left | Right]
    side: Literal["left"]


class Right(TypedDict):
    kids: list[Left | Right]
    side: Literal["right"]


@entrypoint()
def tree(inputs: Left) -> dict[str, Any]:
    """A recursive union input: checking it took twice as long per level."""
    return {"sides": len(inputs["kids"])}
