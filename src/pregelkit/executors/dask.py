"""Task and node bodies on a Dask cluster.

``DaskExecutor(client)`` runs ``fn(*args)`` on the workers of a
``distributed.Client`` (a ``LocalCluster`` or a real scheduler) and hands back
a ``concurrent.futures.Future``: the driver's thread or event loop waits on it
without holding a Dask connection of its own. It knows nothing of tasks; what
a body is, what it may reach and what its result means is
``pregelkit.pregel._exec.remote``'s business.

A worker lost while it runs a body: the scheduler runs the body again on
another worker (up to ``distributed.scheduler.allowed-failures`` times, then
``KilledWorker``, which the task's retry policy sees like any failure). The
driver records a result only when one comes back, so a body that died is
never recorded, and one that ran twice is recorded once.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import distributed

__all__ = ["DaskExecutor"]


class _Remote(concurrent.futures.Future[Any]):
    """A future of work on the cluster: cancelling it cancels the work there,
    and it keeps the Dask future alive (a dropped Dask future is forgotten)."""

    def __init__(self, work: Any) -> None:
        super().__init__()  # stays pending until the outcome lands: so it can be cancelled
        self.work = work

    def cancel(self) -> bool:
        self.work.cancel()
        return super().cancel()


class DaskExecutor:
    """Run task and node bodies on a Dask cluster:
    ``@entrypoint(checkpointer=..., executor=DaskExecutor(client))``,
    ``Pregel(..., executor=...)`` or ``graph.copy(executor=...)``.

    The client stays the caller's: this executor neither starts nor closes it.
    Workers need pregelkit and the modules the bodies use installed (functions
    defined in ``__main__`` travel by value).
    """

    def __init__(self, client: distributed.Client) -> None:
        if not isinstance(client, distributed.Client):
            raise TypeError(
                "DaskExecutor takes a distributed.Client, e.g. "
                "DaskExecutor(distributed.Client('tcp://scheduler:8786')), "
                f"got {type(client).__name__}"
            )
        if client.asynchronous:
            raise TypeError(
                "DaskExecutor needs a synchronous distributed.Client (the default, not "
                "asynchronous=True): it serves ainvoke() too, without blocking the event loop"
            )
        self.client = client
        self._fetch: concurrent.futures.ThreadPoolExecutor | None = None

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, name: str
    ) -> concurrent.futures.Future[Any]:
        """Start ``fn(*args)`` on a worker. Each call is new work (``pure=False``):
        a retry of the same body with the same input must run again, not be
        served the failed attempt's outcome."""
        work: Any = self.client.submit(fn, *args, key=f"pregelkit-{name}-{_token()}", pure=False)
        fut = _Remote(work)
        fetch = self._fetch
        if fetch is None:
            fetch = self._fetch = concurrent.futures.ThreadPoolExecutor(
                _FETCHERS, thread_name_prefix="pregelkit-dask-fetch"
            )
        # Dask runs done-callbacks on one thread; fetching a result there would
        # fetch them one at a time (measured: 10x slower on a 500-task fan-out)
        work.add_done_callback(lambda done: fetch.submit(_settle, fut, done))
        return fut

    def __reduce__(self) -> Any:
        raise TypeError(
            "a DaskExecutor holds a live client and cannot be pickled; keep it out of "
            "task arguments and config (the graph passes it where it is needed)"
        )

    def __repr__(self) -> str:
        return f"DaskExecutor({self.client!r})"


_FETCHERS = 16  # results fetched from the workers at once


def _token() -> str:
    import uuid

    return uuid.uuid4().hex


def _settle(fut: _Remote, work: Any) -> None:
    """Copy the Dask future's outcome (called on a client thread when it is done)."""
    try:
        if work.cancelled():
            fut.cancel()
        elif (exc := work.exception()) is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(work.result())
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by the driver meanwhile: nobody wants the outcome
