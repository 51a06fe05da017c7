"""Errors as the API answers them: a status and ``{"detail": "..."}``, the
shape LangGraph's server uses and the SDK reads into its exceptions
(``NotFoundError``, ``ConflictError``, ...). Nothing a client sends may
become a 500 with a traceback: what is not an ``ApiError`` is logged here
and answered as a bare 500."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

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


async def on_unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(
        {"detail": f"internal error: {type(exc).__name__} (the server's log has the details)"},
        status_code=500,
    )
