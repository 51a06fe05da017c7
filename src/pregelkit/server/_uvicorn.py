"""uvicorn's server, which also ends the open streams when it stops."""

from __future__ import annotations

from types import FrameType

import uvicorn

from pregelkit.server._api import Api


class Server(uvicorn.Server):
    """On SIGTERM or Ctrl-C uvicorn stops taking requests and waits for the
    open responses to end; a stream tailing a long run would not, so the
    streams are told to end (``Api.stopping``): without their ``end``
    event, so that clients reconnect and resume from their last event id."""

    def __init__(self, api: Api, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.api = api

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.api.stopping.set()
        super().handle_exit(sig, frame)
