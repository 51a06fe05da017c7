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


_OVERDUE = "timeout graceful shutdown exceeded"
"""What uvicorn logs, as errors, of the requests it cancels once
``--stop-timeout`` has passed (its count, then each one's traceback)."""


class _CutStreams(logging.Filter):
    """uvicorn's errors about the responses a stopping server cuts (the
    streams it ends, the requests still open past ``--stop-timeout``), said
    once at INFO instead."""

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api
        self.cut = 0
        self.overdue = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.api.stopping.is_set():
            return True
        if record.getMessage() == _CUT:
            self.cut += 1
            return False
        error = record.exc_info[1] if record.exc_info else None
        if _OVERDUE in record.getMessage() or _OVERDUE in str(error or ""):
            self.overdue += record.getMessage().startswith("Exception")
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
            log = logging.getLogger("pregelkit.server")
            if self.cut.cut:
                log.info(
                    "cut %d open stream(s): their clients reconnect with their last event id",
                    self.cut.cut,
                )
            if self.cut.overdue:
                log.info("cut %d request(s) still open past --stop-timeout", self.cut.overdue)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.api.stopping.set()
        super().handle_exit(sig, frame)
