"""What every route works with: the served workflows, the database (saver
and store) and the limits, one ``Api`` per application.

Routes are ``async``; the database work they do runs on a worker thread
(``call``) through the same sync savers and stores the CLI and workers use,
so SQLite and PostgreSQL take one code path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from pregelkit.server._body import Body, read_json
from pregelkit.server._cronrows import CronRecords
from pregelkit.server._errors import not_found

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.pregel import Pregel
    from pregelkit.server._config import Served
    from pregelkit.server._records import ThreadRecords
    from pregelkit.store.base import BaseStore

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class Api:
    served: list[Served]
    saver: BaseCheckpointSaver[Any]
    store: BaseStore
    records: ThreadRecords
    max_body: int
    wake: Callable[[], None] = lambda: None
    """Called after a run is queued: wakes the in-process worker, if any."""
    promote: Callable[[], None] = lambda: None
    """Called after a run is enqueued: wakes this process's promoter of
    pending runs (``_multitask``)."""
    started_at: float = field(default_factory=time.time)
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set when the server stops: open streams end (without ``end``, so
    clients reconnect and resume)."""
    reading: dict[str, float] = field(default_factory=dict)
    """Temporary threads whose run a request of this process still answers
    (a stateless ``runs.stream`` or ``runs.wait``), with when it began
    (``time.monotonic``): the sweep leaves them to it (``_stateless``)."""
    made: set[str] = field(default_factory=set)
    """Temporary threads this process created, not yet deleted: the sweep
    deletes them as soon as their runs end (another process's, only once
    they settled, ``_stateless``)."""
    graphs: dict[str, Pregel] = field(init=False)
    """By graph id: the configured graph bound to the saver and store."""
    crons: CronRecords = field(init=False)
    """The crons' rows (their firing is the fleet's schedules)."""

    def __post_init__(self) -> None:
        self.crons = CronRecords(self.records)
        self.graphs = {
            s.graph_id: s.graph.copy(checkpointer=self.saver, store=self.store) for s in self.served
        }

    def assistant(self, ident: str) -> Served:
        """The assistant ``ident`` names: its id, or its graph id (as the SDK allows)."""
        for s in self.served:
            if ident in (s.assistant_id, s.graph_id):
                return s
        raise not_found("assistant", ident)

    async def body(self, request: Request) -> Body:
        return await read_json(request, self.max_body)


def api_of(request: Request) -> Api:
    api: Api = request.app.state.api
    return api


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking database work off the event loop."""
    return await run_in_threadpool(fn, *args, **kwargs)
