"""A workflow with a typed input and auth hooks, named by the configs of
tests/test_serve_auth.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any, NotRequired, TypedDict

from pregelkit.func import entrypoint
from pregelkit.server import AuthError


class Inner(TypedDict):
    tags: list[str]


class Payload(TypedDict):
    n: int
    inner: NotRequired[Inner]


@entrypoint()
def typed(inputs: Payload) -> dict[str, Any]:
    return {"doubled": 2 * inputs["n"], "tags": inputs.get("inner", {}).get("tags", [])}


USERS = {"token-ann": "ann", "token-bob": "bob", "token-élodie": "élodie"}


async def authenticate(authorization: str | None, path: str) -> dict[str, Any]:
    """Bearer tokens, async: "slow" outlasts the timeout, "raise" is a bug
    in the hook, "none" answers an empty identity."""
    token = (authorization or "").removeprefix("Bearer ")
    if token == "slow":
        await asyncio.sleep(60)
    if token == "raise":
        raise RuntimeError("the identity provider is down")
    if token == "none":
        return {"identity": ""}
    if token not in USERS:
        raise AuthError(401, "unknown token")
    return {"identity": USERS[token], "permissions": []}


def authenticate_sync(headers: dict[bytes, bytes]) -> str | None:
    """The x-api-key header as the identity's token, in a sync hook."""
    token = headers.get(b"x-api-key", b"").decode()
    if token == "slow":
        time.sleep(3)  # past the 1 s timeout
    if token == "forbidden":
        raise AuthError(403, "this token may not call the API")
    return USERS.get(token)


def asks_for_the_body(body: bytes) -> str:
    """A hook that asks for what no hook is given: refused at start."""
    return "x"
