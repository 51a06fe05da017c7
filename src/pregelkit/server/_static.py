"""``--static DIR``: a directory of static files (a web page talking to the
API) served at ``/ui/``, on the API's own origin.

Same origin, so the page's ``fetch`` calls reach the API with no CORS
headers: the server answers no cross-origin request, and a page on another
site still cannot read its answers. The files are served without an API
key (a browser loading a page sends no ``x-api-key``); the API behind them
still wants one, which the page sends from what its user types. So the
directory must hold nothing secret, as any public web page.
"""

from __future__ import annotations

import os

from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pregelkit.cli._errors import CliError

UI_PATH = "/ui"


def is_ui_path(path: str) -> bool:
    """Whether a request's path is one of the static files' (no key needed)."""
    return path == UI_PATH or path.startswith(UI_PATH + "/")


def check_static(directory: str) -> str:
    """The directory as an absolute path, or a CliError saying what is wrong."""
    path = os.path.abspath(directory)
    if not os.path.isdir(path):
        raise CliError(f"--static {directory!r} is not a directory of files to serve at /ui/")
    return path


def ui_mount(directory: str) -> Mount:
    """The files of ``directory`` at ``/ui/`` (``index.html`` for ``/ui/``).
    Symbolic links leading out of it are not followed (Starlette's default)."""
    return Mount(UI_PATH, app=_Hardened(StaticFiles(directory=directory, html=True)), name="ui")


class _Hardened:
    """Headers on every static answer: no MIME sniffing (a ``.txt`` someone
    put there is never run as a script), and no framing by another site
    (a page that answers interrupts must not be clicked through a frame)."""

    HEADERS = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"))

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *self.HEADERS]
            await send(message)

        await self.app(scope, receive, send_hardened)
