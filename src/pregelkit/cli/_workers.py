"""The workers of ``pregelkit worker`` and ``pregelkit serve``: a ``Worker``
(threads, ``invoke``) for the plain-``def`` workflows and an
``AsyncWorker`` (``ainvoke``, an async saver, an event loop in a thread of
its own) for the ``async def`` ones, since neither can run the other's.
Each claims only its own workflows (a queued run names its workflow), and
each runs up to ``concurrency`` runs at a time: an async run mostly waits
on I/O, and a split would starve whichever kind the traffic favours."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit.cli._async_db import open_async_saver
from pregelkit.cli._db import open_database

if TYPE_CHECKING:
    from pregelkit.pregel import Pregel
    from pregelkit.worker import AsyncWorker, Worker

__all__ = ["Workers", "is_async"]


def is_async(graph: Pregel) -> bool:
    """Whether ``graph`` must run with ``ainvoke``: one of its nodes (an
    ``async def`` entrypoint, or a graph's async node) is a coroutine
    function, which ``invoke`` refuses."""
    return any(node.is_async for node in graph.nodes.values())


class Workers:
    """Serves ``graphs`` from the database at ``location``: the sync ones on
    a ``Worker`` (its database opened on ``stack``), the async ones on an
    ``AsyncWorker``; ``run`` serves until ``stop`` (or, called in the main
    thread, SIGTERM/SIGINT), and then both hand their runs back."""

    def __init__(
        self,
        graphs: Sequence[Pregel],
        location: str,
        stack: contextlib.ExitStack,
        *,
        concurrency: int,
        lease_seconds: float = 30.0,
        queues: Sequence[str] = (),
    ) -> None:
        from pregelkit.worker import Worker

        options: dict[str, Any] = {
            "concurrency": concurrency,
            "lease_seconds": lease_seconds,
            "queues": queues,
        }
        sync = [g for g in graphs if not is_async(g)]
        asynchronous = [g for g in graphs if is_async(g)]
        self.sync: Worker | None = None
        self.on_loop: OnLoop | None = None
        if sync:
            db = stack.enter_context(
                open_database(location, create=True, pool_size=concurrency + 2)
            )
            self.sync = Worker(sync, db.saver, **options)
        self._sync_names = [str(g.name) for g in sync]
        if asynchronous:
            self.on_loop = OnLoop(asynchronous, location, options)
            stack.callback(self.on_loop.close)
        self._done = threading.Event()

    @property
    def serving(self) -> list[tuple[str, list[str]]]:
        """Each worker's id and the names of the workflows it serves."""
        found: list[tuple[str, list[str]]] = []
        if self.sync is not None:
            found.append((self.sync.worker_id, self._sync_names))
        if self.on_loop is not None:
            found.append((self.on_loop.worker.worker_id, self.on_loop.names))
        return found

    def run(self) -> None:
        """Serve until ``stop()``, or until a worker fails (its error is
        raised here once the other one stopped too)."""
        errors: list[BaseException] = []

        def serve(target: Callable[[], None]) -> None:
            try:
                target()
            except BaseException as exc:
                errors.append(exc)
            finally:
                self._done.set()

        targets = [w.run for w in (self.sync, self.on_loop) if w is not None]
        threads = [
            threading.Thread(target=serve, args=(t,), name="pregelkit-workers", daemon=True)
            for t in targets
        ]
        from pregelkit.worker._sync import _on_signals

        restore = _on_signals(self.stop)
        try:
            for thread in threads:
                thread.start()
            self._done.wait()
            self.stop("worker stopping" if not errors else "the other worker failed")
            for thread in threads:
                thread.join()
        finally:
            restore()
        if errors:
            raise errors[0]

    def wake(self) -> None:
        """Ask both workers to claim now (a run was just queued here)."""
        if self.sync is not None:
            self.sync.wake()
        if self.on_loop is not None:
            self.on_loop.worker.wake()

    def stop(self, reason: str = "worker stopping") -> None:
        """Ask both to stop (safe from a signal handler or any thread)."""
        if self.sync is not None:
            self.sync.stop(reason)
        if self.on_loop is not None:
            self.on_loop.stop(reason)
        self._done.set()


class OnLoop:
    """An ``AsyncWorker`` on an event loop in a thread of its own, with an
    async saver opened in that loop. Built ready to serve (the database
    open, or its error raised); ``run`` serves until ``stop``."""

    def __init__(self, graphs: Sequence[Pregel], location: str, options: dict[str, Any]) -> None:
        self.names = [str(g.name) for g in graphs]
        self._graphs = graphs
        self._location = location
        self._options = options
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._worker: AsyncWorker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._go: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._main(),), name="pregelkit-async-worker", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    @property
    def worker(self) -> AsyncWorker:
        assert self._worker is not None
        return self._worker

    async def _main(self) -> None:
        from pregelkit.worker import AsyncWorker

        try:
            size = int(self._options["concurrency"]) + 2
            async with open_async_saver(self._location, pool_size=size) as saver:
                self._worker = AsyncWorker(self._graphs, saver, **self._options)
                self._loop = asyncio.get_running_loop()
                self._go = asyncio.Event()
                self._ready.set()
                await self._go.wait()
                await self._worker.run()
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    def run(self) -> None:
        """Serve until ``stop()``; raise what ended serving otherwise."""
        self._call(lambda go: go.set())
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self, reason: str) -> None:
        """Ask the worker to stop (in its loop: its runs are held there) and
        to return at once if it never started serving."""

        def stop(go: asyncio.Event) -> None:
            self.worker.stop(reason)
            go.set()

        self._call(stop)

    def close(self) -> None:
        """Stop and wait for the thread: the saver closes in its loop."""
        self.stop("worker closing")
        self._thread.join()

    def _call(self, fn: Callable[[asyncio.Event], None]) -> None:
        loop, go = self._loop, self._go
        if loop is None or go is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop ended: nothing left to ask
            loop.call_soon_threadsafe(fn, go)
