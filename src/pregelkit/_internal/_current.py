"""The running task, as seen by code inside it.

``interrupt()``, ``get_config()``, ``get_stream_writer()`` and task calls find
their task through this context variable instead of a config dict threaded
through every call: setting it is one ``ContextVar.set`` per task run.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pregelkit.pregel._graph.scope import TaskScope

CURRENT: ContextVar[TaskScope | None] = ContextVar("pregelkit_task_scope", default=None)


def require_scope(what: str) -> TaskScope:
    """The running task's scope, or a clear error naming what needed it."""
    scope = CURRENT.get()
    if scope is None:
        raise RuntimeError(
            f"{what} can only be used inside a running graph: call it from an "
            "@entrypoint, a @task, or a Pregel node, not at module level or in a plain thread."
        )
    return scope
