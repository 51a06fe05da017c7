"""API keys: who may call the server, and whose threads they see.

The SDK sends its key in the ``x-api-key`` header (its ``api_key`` argument
or ``LANGGRAPH_API_KEY``). Keys are given with ``--auth-key`` (repeatable)
or ``PREGELKIT_API_KEY`` (comma-separated). Without any key the server
answers everyone, so it refuses to listen beyond the loopback interface
without one: an open port on a network must not run workflows for anybody.

Each thread records who created it (a digest of the key, never the key) and
a key sees only its own threads and their runs, crons and store namespaces
(``_store``). A thread created on a server without keys belongs to no key: it
is seen only while the server has none. An auth hook named in the config
(``_hook``) replaces the keys: the identity it answers owns what the request
creates, the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Iterable, Sequence

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from pregelkit.cli._errors import CliError
from pregelkit.server._static import is_ui_path

KEY_ENV = "PREGELKIT_API_KEY"
OWNER = "pregelkit_owner"
OPEN_PATHS = frozenset({"/ok"})
"""Answered without a key: a load balancer's health check carries none (nor
does a browser loading the ``--static`` page at ``/ui/``: ``_static``)."""


def owner_id(key: bytes) -> str:
    """Who a key's holder is, as stored with each thread they create: a
    digest, so the database never holds a key."""
    return hashlib.sha256(b"pregelkit-owner:" + key).hexdigest()[:32]


def owner_of(request: Request) -> str | None:
    """The owner of the request's key; ``None`` on a server without keys."""
    owner: str | None = request.scope.get("state", {}).get(OWNER)
    return owner


def keys_from(given: Sequence[str] | None, env: str | None) -> tuple[str, ...]:
    """The accepted keys: ``--auth-key`` values and ``PREGELKIT_API_KEY``'s."""
    keys = [k.strip() for k in (*(given or ()), *(env or "").split(","))]
    return tuple(k for k in keys if k)


def check_bind(host: str, keys: Sequence[str], hook: bool = False) -> None:
    """Refuse to listen beyond loopback without a key (or an auth hook)."""
    if keys or hook or is_loopback(host):
        return
    raise CliError(
        f"refusing to listen on {host} without an API key: anyone who reaches the port could "
        f"run the workflows. Give one with --auth-key KEY (or {KEY_ENV}=KEY1,KEY2), and clients "
        "send it as the x-api-key header (the SDK's api_key= or LANGGRAPH_API_KEY); or name an "
        'auth hook in the config ("auth": {"path": "auth.py:authenticate"}); or listen on '
        "127.0.0.1"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ApiKeys:
    """ASGI middleware: a request without one of ``keys`` in ``x-api-key``
    is answered 401 (JSON) before any route sees it. No keys: all pass."""

    def __init__(self, app: ASGIApp, keys: Iterable[str], open_ui: bool = False) -> None:
        self.app = app
        self.keys = tuple(k.encode() for k in keys)
        self.open_ui = open_ui

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or (self.open_ui and is_ui_path(path))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or self._open(scope["path"]):
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-api-key")
        # every key compared, in constant time: no timing tells which was close
        if given is not None and any([hmac.compare_digest(given, k) for k in self.keys]):
            scope.setdefault("state", {})[OWNER] = owner_id(given)
            await self.app(scope, receive, send)
            return
        detail = (
            "missing API key: send it in the x-api-key header"
            if given is None
            else ("wrong API key")
        )
        await refuse(send, 401, detail)


async def refuse(send: Send, status: int, detail: str) -> None:
    """Answer ``status`` with ``{"detail": detail}`` before any route runs."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
