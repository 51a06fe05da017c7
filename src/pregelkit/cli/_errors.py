"""The one exception the command line reports as the user's mistake."""

from __future__ import annotations


class CliError(Exception):
    """A mistake the user can fix: printed without a traceback, exit status 2.

    ``kind`` is the stable ``error.type`` of ``--json`` output (``usage``,
    ``database``, ``unknown_thread``, ``target``, ``thread_busy``,
    ``not_resumable``: an action that makes no sense in the thread's state;
    ``not_pending``, ``ambiguous``: an answer for no pending interrupt, or for
    one of several without ``--to``; ``install``: the ``cli`` extra is
    missing; ``too_large``: a message over the size limit;
    ``unknown_schedule``: no schedule has that id), so a script can
    branch on it without parsing prose."""

    def __init__(self, message: str, *, kind: str = "usage", thread_id: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.thread_id = thread_id
