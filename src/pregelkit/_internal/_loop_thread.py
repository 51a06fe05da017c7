"""The error a sync method of an async saver or store raises on its own
event loop's thread.

Waiting there for the loop would deadlock (PostgreSQL) or stall every other
coroutine for the call (SQLite), so it is refused. LangGraph raises
``asyncio.InvalidStateError`` for this; pregelkit's error is that and a
``RuntimeError``, so code written for either catches it.
"""

from __future__ import annotations

import asyncio

__all__ = ["SyncCallOnLoopError"]


class SyncCallOnLoopError(RuntimeError, asyncio.InvalidStateError):
    """A blocking call was made on the thread that runs the event loop it
    would block: await the ``a``-prefixed method, or call from another thread."""
