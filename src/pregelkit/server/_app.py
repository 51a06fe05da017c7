"""The ASGI application: routes per resource, API keys, JSON errors, and
(unless ``--no-workers``) in-process workers that run the queued runs."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.server import (
    _assistants,
    _crons,
    _multitask,
    _runs,
    _stateless,
    _store,
    _streams,
    _threads,
)
from pregelkit.server._api import Api
from pregelkit.server._auth import ApiKeys
from pregelkit.server._errors import ApiError, Unexpected, on_api_error, on_http_error
from pregelkit.server._hook import Hook, HookAuth
from pregelkit.server._json import Json
from pregelkit.server._origin import SameOrigin
from pregelkit.server._static import ui_mount


async def ok(request: Request) -> Response:
    return Json({"ok": True})


async def info(request: Request) -> Response:
    from pregelkit import __version__

    return Json(
        {
            "version": __version__,
            "server": "pregelkit",
            "flags": {"assistants": True, "crons": True, "langsmith": False},
        }
    )


def create_app(
    api: Api,
    keys: Sequence[str] = (),
    start_workers: Callable[[], Callable[[], None]] | None = None,
    static: str | None = None,
    hook: Hook | None = None,
) -> Starlette:
    """The application over ``api``. ``start_workers`` starts the in-process
    workers and returns what stops them (called when the server stops);
    ``static`` is a directory served at ``/ui/`` (``_static``); ``hook``
    (the config's ``auth``) admits requests in place of ``keys``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = start_workers() if start_workers is not None else None
        promoting = _multitask.start_promoter(api)
        sweeping = asyncio.create_task(_stateless.sweep_forever(api))
        try:
            yield
        finally:
            await promoting()
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
            if stop is not None:
                stop()

    app = Starlette(
        routes=[
            Route("/ok", ok, methods=["GET"]),
            Route("/info", info, methods=["GET"]),
            *_assistants.routes,
            *_threads.routes,
            *_store.routes,
            *_streams.routes,
            *_crons.routes,
            *_stateless.routes,
            *_runs.routes,
            *([ui_mount(static)] if static is not None else []),
        ],
        middleware=[
            Middleware(SameOrigin, open=not keys and hook is None),
            Middleware(HookAuth, hook=hook, open_ui=static is not None)
            if hook
            else Middleware(ApiKeys, keys=keys, open_ui=static is not None),
            Middleware(Unexpected),
        ],
        exception_handlers={
            ApiError: on_api_error,
            HTTPException: on_http_error,
        },
        lifespan=lifespan,
    )
    app.state.api = api
    return app


def in_thread(worker: Any) -> Callable[[], Callable[[], None]]:
    """``start_workers`` for the server's workers (``cli._workers.Workers``):
    they serve in a thread; stopping lets their runs finish their started
    tasks and hands them back."""

    def start() -> Callable[[], None]:
        thread = threading.Thread(target=worker.run, name="pregelkit-serve-worker", daemon=True)
        thread.start()

        def stop() -> None:
            worker.stop("server stopping")
            thread.join()

        return stop

    return start
