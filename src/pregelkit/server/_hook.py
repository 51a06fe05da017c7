"""The auth hook: a function of the deployment's, named in the config, that
decides who each request comes from, in place of the API keys.

``pregelkit.json`` (or ``langgraph.json``) names it as LangGraph's does::

    "auth": {"path": "./auth.py:authenticate", "timeout_seconds": 10}

``path`` names a function (sync or ``async``) or a ``langgraph_sdk.Auth``
whose ``@auth.authenticate`` handler is used. It receives, by parameter name
as LangGraph's handlers do, any of ``headers`` (``dict[bytes, bytes]``, names
lower-case), ``authorization`` (that header as text, or ``None``),
``method``, ``path`` and ``query_params``; it returns the caller's identity
(a non-empty string, a dict with ``"identity"``, or an object with an
``identity`` attribute), or refuses by raising an exception with a
``status_code`` from 400 to 499 and a ``detail`` (``AuthError``, or the
SDK's ``Auth.exceptions.HTTPException``). The identity owns what the request
creates, as a key does (``_auth.owner_of``): threads, runs, crons, store.

Only the config names the hook: no request can make the server load code.
A hook that fails, answers no identity, or takes longer than
``timeout_seconds`` is a refusal (500 or 503), never a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from pregelkit.cli._errors import CliError
from pregelkit.cli._target import load_object
from pregelkit.server._auth import OPEN_PATHS, OWNER, refuse
from pregelkit.server._config import read_config, relative
from pregelkit.server._static import is_ui_path

log = logging.getLogger("pregelkit.server")

PARAMETERS = ("headers", "authorization", "method", "path", "query_params")
"""What a hook may ask for, by parameter name (a subset of LangGraph's)."""
TIMEOUT_SECONDS = 10.0


class AuthError(Exception):
    """Raised by an auth hook to refuse a request: answered ``status_code``
    (401 by default) with ``{"detail": detail}``."""

    def __init__(self, status_code: int = 401, detail: str = "unauthorized") -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


@dataclass(frozen=True)
class Hook:
    """The loaded hook: the function, what it asks for, and its time limit."""

    spec: str
    fn: Callable[..., Any]
    wants: tuple[str, ...]
    timeout: float

    async def identity(self, scope: Scope) -> str:
        """Who the request comes from; an ``AuthError`` when the hook refuses."""
        given = _arguments(scope, self.wants)
        pending: Awaitable[Any]
        if _is_async(self.fn):
            pending = self.fn(**given)
        else:  # on a thread of its own, which a timeout abandons
            pending = _in_thread(functools.partial(self.fn, **given))
        try:
            answer = await asyncio.wait_for(pending, self.timeout)
        except TimeoutError:
            raise AuthError(
                503, f"the auth hook did not answer within {self.timeout:g} s: try again"
            ) from None
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status <= 499:
                raise AuthError(status, str(getattr(exc, "detail", "") or "refused")) from None
            log.error("the auth hook %s failed", self.spec, exc_info=exc)
            raise AuthError(
                500, f"the auth hook failed: {type(exc).__name__} (the server's log has it)"
            ) from None
        return _identity_of(answer, self.spec)


SYNC_CALLS = threading.BoundedSemaphore(32)
"""Sync hook calls at once: past them (calls that outlast their timeout
and hang on) a request is a 503 at once rather than one more thread."""


def _in_thread(call: Callable[[], Any]) -> asyncio.Future[Any]:
    """``call()`` on a daemon thread, its answer in a future of the running
    loop. Not the loop's executor, which a stopping server waits for: a
    call hanging on past its timeout made SIGTERM hang forever."""
    if not SYNC_CALLS.acquire(blocking=False):
        raise AuthError(503, "the auth hook is busy: too many of its calls did not answer yet")
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # timed out meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = call()
        except Exception as exc:  # the hook's, handed to the request that called it
            error = exc
        except BaseException as exc:  # SystemExit and the like must not stop the server
            error = RuntimeError(f"the hook raised {type(exc).__name__}")
        finally:
            SYNC_CALLS.release()
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="pregelkit-auth-hook", daemon=True).start()
    return future


def _is_async(fn: Callable[..., Any]) -> bool:
    """An ``async def``, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def owner_of_identity(identity: str) -> str:
    """The owner recorded for an identity: a digest, as for a key (another
    domain, so an identity spelled like a key is not that key's owner)."""
    return hashlib.sha256(b"pregelkit-identity:" + identity.encode()).hexdigest()[:32]


def _identity_of(answer: Any, spec: str) -> str:
    if answer is None:
        raise AuthError(401, "the auth hook answered no identity")
    identity = answer.get("identity") if isinstance(answer, Mapping) else answer
    identity = getattr(identity, "identity", identity)
    if not isinstance(identity, str) or not identity:
        log.error("the auth hook %s answered %r, not an identity", spec, answer)
        raise AuthError(500, "the auth hook answered no identity string (the server's log has it)")
    return identity


def _arguments(scope: Scope, wants: tuple[str, ...]) -> dict[str, Any]:
    headers = {bytes(k).lower(): bytes(v) for k, v in scope["headers"]}
    given: dict[str, Any] = {}
    for name in wants:
        if name == "headers":
            given[name] = headers
        elif name == "authorization":
            raw = headers.get(b"authorization")
            given[name] = None if raw is None else _text(raw)
        elif name == "method":
            given[name] = scope["method"]
        elif name == "path":
            given[name] = scope["path"]
        else:
            from urllib.parse import parse_qsl

            given[name] = dict(parse_qsl(_text(scope.get("query_string", b""))))
    return given


def _text(raw: bytes) -> str:
    """A header as text: UTF-8, as clients send it, else Latin-1 (HTTP's own)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def load_hook(config: str | None) -> Hook | None:
    """The hook the config's ``auth`` section names; ``None`` without one."""
    if config is None:
        return None
    section = read_config(config).get("auth")
    if section is None:
        return None
    where = f"the config {config!r}"
    if not isinstance(section, dict) or not isinstance(section.get("path"), str):
        raise CliError(
            f'{where}: "auth" must be an object with a "path" naming the hook, '
            '{"auth": {"path": "./auth.py:authenticate"}}'
        )
    timeout = section.get("timeout_seconds", TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise CliError(f'{where}: "auth" "timeout_seconds" must be a positive number')
    spec = relative(section["path"], os.path.dirname(os.path.abspath(config)))
    fn = _function_of(load_object(spec, "the auth hook"), spec)
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        raise CliError(f"the auth hook {spec!r} has no signature to read") from None
    unknown = [n for n in parameters if n not in PARAMETERS]
    if unknown:
        raise CliError(
            f"the auth hook {spec!r} asks for {', '.join(map(repr, unknown))}: it can take "
            f"{', '.join(PARAMETERS)} (by name)"
        )
    return Hook(spec, fn, tuple(parameters), float(timeout))


def _function_of(found: Any, spec: str) -> Callable[..., Any]:
    """The hook ``found`` is: a function, or a ``langgraph_sdk.Auth``'s
    authenticate handler. Its ``@auth.on`` rules are refused rather than
    ignored: here every resource is scoped to the identity, and a deployment
    that counted on its own rules must not run without them unawares."""
    if hasattr(found, "_authenticate_handler") and hasattr(found, "_handlers"):
        if found._handlers or getattr(found, "_global_handlers", None):
            raise CliError(
                f"the Auth at {spec!r} has @auth.on authorization handlers, which pregelkit "
                "serve does not run (it scopes threads, runs, crons and the store to the "
                "identity the authenticate handler answers): remove them, or name a function"
            )
        found = found._authenticate_handler
        if found is None:
            raise CliError(f"the Auth at {spec!r} has no @auth.authenticate handler")
    if not callable(found):
        raise CliError(f"the auth hook {spec!r} is not a function, it is {type(found).__name__}")
    fn: Callable[..., Any] = found
    return fn


class HookAuth:
    """ASGI middleware: each request (but ``/ok``, and the ``--static``
    page's files, as with keys) is admitted by the hook,
    which names its owner, or answered with the hook's refusal in JSON."""

    def __init__(self, app: ASGIApp, hook: Hook, open_ui: bool = False) -> None:
        self.app = app
        self.hook = hook
        self.open_ui = open_ui

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in OPEN_PATHS or (self.open_ui and is_ui_path(path)):
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.hook.identity(scope)
        except AuthError as exc:
            await refuse(send, exc.status_code, exc.detail)
            return
        scope.setdefault("state", {})[OWNER] = owner_of_identity(identity)
        await self.app(scope, receive, send)
