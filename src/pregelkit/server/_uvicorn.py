"""uvicorn's server, which also ends the open streams when it stops."""

from __future__ import annotations

import logging
import socket
from types import FrameType

import uvicorn

from pregelkit.server._api import Api

_CUT = "ASGI callable returned without completing response."
"""What uvicorn logs, as an error, of a response left incomplete: how a
stopping server cuts its streams (``_errors.StreamCut``) on purpose."""


class _CutStreams(logging.Filter):
    """uvicorn's error about an incomplete response, once the server stops:
    the streams it cut, said once at INFO instead."""

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api
        self.cut = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.api.stopping.is_set() and record.getMessage() == _CUT:
            self.cut += 1
            return False
        return True


class Server(uvicorn.Server):
    """On SIGTERM or Ctrl-C uvicorn stops taking requests and waits for the
    open responses to end; a stream tailing a long run would not, so the
    streams are told to end (``Api.stopping``): without their ``end``
    event, so that clients reconnect and resume from their last event id."""

    def __init__(self, api: Api, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.api = api
        self.cut = _CutStreams(api)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.addFilter(self.cut)
        try:
            await super().serve(sockets)
        finally:
            uvicorn_log.removeFilter(self.cut)
            if self.cut.cut:
                logging.getLogger("pregelkit.server").info(
                    "cut %d open stream(s): their clients reconnect with their last event id",
                    self.cut.cut,
                )

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.api.stopping.set()
        super().handle_exit(sig, frame)
