"""A worker writing a run's stream parts to the database, in batches.

Only runs queued with stream modes (``pregelkit serve``'s ``runs.stream``
and ``stream_resumable`` runs) have a writer; any other run is invoked as
before and pays nothing. A part is written at once when the last write
was ``BATCH_SECONDS`` ago or more (the first part of a run goes out with
no delay); parts coming faster wait for the next write, at most
``BATCH_SECONDS``, so a run emitting many small parts costs one
transaction per batch rather than one per part. The writes are fenced by
the run's lease: a worker that lost the run writes nothing more for it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from pregelkit.checkpoint import _parts
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.worker._core import log

__all__ = ["AsyncPartWriter", "PartWriter"]

BATCH_SECONDS = 0.05
"""The longest a part waits for the batch it is written with."""


class _Batch:
    """What both writers decide: how a part is stored and when a batch is due."""

    def __init__(self, saver: BaseCheckpointSaver[Any], lease: tuple[str, int]) -> None:
        self.saver = saver
        self.lease = lease
        self.pending: list[_parts.Part] = []
        self.written_at = 0.0

    def append(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        serde = self.saver.serde
        try:
            kind, data = serde.dumps_typed(payload)
        except Exception:  # a custom part the serializer cannot store: its repr
            kind, data = serde.dumps_typed(repr(payload))
        self.pending.append((mode, "|".join(ns), kind, data))

    def wait(self) -> float:
        """How long until the pending parts are due (0: now)."""
        return max(0.0, self.written_at + BATCH_SECONDS - time.monotonic())

    def take(self) -> list[_parts.Part]:
        taken, self.pending = self.pending, []
        self.written_at = time.monotonic()
        return taken

    def put_back(self, taken: list[_parts.Part]) -> None:
        """A write failed: its parts go first in the next one."""
        self.pending[:0] = taken

    def plan(self, taken: list[_parts.Part]) -> Any:
        lease = self.lease
        return lambda d: _parts.write(d, lease, taken)


class PartWriter:
    """For ``Worker``: called on the run's thread; a timer writes the parts
    that came too soon after the last write."""

    def __init__(self, saver: BaseCheckpointSaver[Any], lease: tuple[str, int]) -> None:
        self._batch = _Batch(saver, lease)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def add(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        with self._lock:
            self._batch.append(ns, mode, payload)
            wait = self._batch.wait()
            if wait == 0.0:
                self._write()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self._write()
            except Exception as exc:  # kept: written with the next batch or at the end
                log.warning("run %s: cannot write stream parts yet (%s)", self._batch.lease[0], exc)

    def _write(self) -> None:
        batch = self._batch
        if not batch.pending:
            return
        taken = batch.take()
        try:
            batch.saver.run_queue(batch.plan(taken), "write stream parts")
        except BaseException:
            batch.put_back(taken)
            raise

    def close(self) -> None:
        """At the run's end: write what is pending (before its end is
        recorded, so a reader that sees the run ended has its parts)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._write()


class AsyncPartWriter:
    """For ``AsyncWorker``: called on the event loop; a task writes each batch."""

    def __init__(self, saver: BaseCheckpointSaver[Any], lease: tuple[str, int]) -> None:
        self._batch = _Batch(saver, lease)
        self._task: asyncio.Task[None] | None = None

    def add(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        self._batch.append(ns, mode, payload)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Write batches until none is pending, each when it is due."""
        batch = self._batch
        try:
            while batch.pending:
                await asyncio.sleep(batch.wait())
                taken = batch.take()
                try:
                    await batch.saver.arun_queue(batch.plan(taken), "write stream parts")
                except Exception as exc:  # kept: written at the end
                    batch.put_back(taken)
                    log.warning("run %s: cannot write stream parts yet (%s)", batch.lease[0], exc)
                    return
        finally:
            self._task = None

    async def close(self) -> None:
        """At the run's end: write what is pending (see ``PartWriter.close``)."""
        if self._task is not None:
            await self._task
        batch = self._batch
        if batch.pending:
            taken = batch.take()
            try:
                await batch.saver.arun_queue(batch.plan(taken), "write stream parts")
            except BaseException:
                batch.put_back(taken)
                raise
