"""Errors as the API answers them: a status and ``{"detail": "..."}``, the
shape LangGraph's server uses and the SDK reads into its exceptions
(``NotFoundError``, ``ConflictError``, ...). Nothing a client sends may
become a 500 with a traceback: what is not an ``ApiError`` is logged here
and answered as a bare 500 (``Unexpected``)."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("pregelkit.server")


class ApiError(Exception):
    """An answer other than success: ``status`` and what to do about it."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, f"{what} {ident!r} not found")


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own (an unknown path, a method not allowed) in JSON too."""
    status = int(getattr(exc, "status_code", 500))
    return JSONResponse({"detail": str(getattr(exc, "detail", ""))}, status_code=status)


class StreamCut(Exception):
    """A stream this stopping server breaks off: its connection is closed
    without the chunked body's end, so the client sees a dropped stream and
    reconnects with its last event id. A clean close would not do: the
    client then asks the run's status, and a run another server finished
    meanwhile looks to it like a stream that got everything."""


class Unexpected:
    """ASGI middleware: an exception no route turned into an ``ApiError`` (a
    bug, a database gone) is logged with its traceback and answered 500 in
    JSON. Caught here rather than by Starlette's ``Exception`` handler,
    which answers and then raises it again to the server: uvicorn then
    closed the connection, and the client's next request on it failed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except StreamCut:
            return  # the response left incomplete: the server closes the connection
        except Exception as exc:
            log.error("%s %s failed", scope["method"], scope["path"], exc_info=exc)
            if started:  # too late for a status: the client sees the body cut
                raise
            detail = f"internal error: {type(exc).__name__} (the server's log has the details)"
            await JSONResponse({"detail": detail}, status_code=500)(scope, receive, send)
