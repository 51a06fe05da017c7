"""``AsyncWorker``: serve queued runs as asyncio tasks (the decisions: ``_core.py``)."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_THREAD_ID
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.retention import arun_steps
from pregelkit.errors import StorageError
from pregelkit.pregel._api.tee import ainvoke_tee
from pregelkit.pregel.main import Pregel
from pregelkit.runtime import RunControl
from pregelkit.worker import _retention
from pregelkit.worker._core import (
    CANCEL_POLL_SECONDS,
    OUTAGE_PAUSE_SECONDS,
    Outcome,
    WorkerFront,
    log,
    resumed,
)
from pregelkit.worker._parts import AsyncPartWriter
from pregelkit.worker._schedules import acheck

__all__ = ["AsyncWorker"]


class AsyncWorker(WorkerFront):
    """``Worker`` for async workflows and async savers (``AsyncSqliteSaver``,
    ``AsyncPostgresSaver``): each run is an asyncio task on the caller's
    event loop, started with ``ainvoke``; leases work as in ``Worker``."""

    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """Serve until ``stop()`` or SIGTERM/SIGINT (handled when the event
        loop runs in the main thread); then hand back the runs held."""
        loop = asyncio.get_running_loop()
        handled = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop, f"signal {sig.name}")
                handled.append(sig)
        try:
            await self._serve(until_idle=False)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    async def run_until_idle(self) -> int:
        """As ``Worker.run_until_idle``."""
        before = self._core.finished
        await self._serve(until_idle=True)
        return self._core.finished - before

    def wake(self) -> None:
        """As ``Worker.wake``: claim now rather than after the idle pause;
        safe from any thread (``pregelkit serve`` calls it from its own loop)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    def stop(self, reason: str = "worker stopping") -> None:
        """Ask ``run()`` to return; safe from any thread."""
        self._core.stop(reason)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def _serve(self, *, until_idle: bool) -> None:
        core = self._core
        saver = core.saver
        self._loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        runs: set[asyncio.Task[None]] = set()
        declare = core.declare_plan()
        if declare is not None:
            await saver.arun_queue(declare, "declare queues")
        await self._beat()
        beat = asyncio.create_task(self._heartbeats())
        watch = asyncio.create_task(self._watch())
        served = asyncio.Event()
        retain = None if self._retention is None else asyncio.create_task(self._retain(served))
        pause = OUTAGE_PAUSE_SECONDS[0]
        try:
            core.firing.reset()
            while not core.stopping:
                await acheck(core.firing)
                plan = core.claim_plan()
                claimed: list[_runqueue.Claimed] = []
                if plan is not None:
                    try:
                        claimed = await saver.arun_queue(
                            plan, "claim runs", single=core.claims_alone
                        )
                        pause = OUTAGE_PAUSE_SECONDS[0]
                    except StorageError as exc:
                        log.warning("cannot reach the queue (%s); trying again", exc)
                        await _wait(wake, pause)
                        pause = min(pause * 2, OUTAGE_PAUSE_SECONDS[1])
                        continue
                for run in claimed:
                    task = asyncio.create_task(self._execute(run, *core.start(run)))
                    runs.add(task)
                    task.add_done_callback(runs.discard)
                if until_idle and not claimed and await self._idle():
                    break
                # asked every time: a claim that took runs starts the pauses over
                pause_for = core.pause(len(claimed), plan is not None)
                if not claimed or plan is None:
                    await _wait(wake, pause_for)
            core.log_stopping()
            if runs:  # stopping: they drain and are handed back
                await asyncio.gather(*runs, return_exceptions=True)
        finally:
            beat.cancel()
            watch.cancel()
            served.set()
            if retain is not None:  # it stops after its current transaction
                await asyncio.wait({retain}, timeout=_retention.JOIN_SECONDS)
                retain.cancel()
        try:
            await saver.arun_queue(core.stopped_plan(), "worker stopped", single=True)
        except Exception as exc:
            log.warning("cannot record that the worker stopped (%s)", exc)

    async def _idle(self) -> bool:
        if self._core.held or self._core.refilling:
            return False
        try:
            pending = await self._core.saver.arun_queue(
                self._core.pending_plan(), "count runs", single=True
            )
        except StorageError:
            return False
        return bool(pending == 0)

    async def _execute(
        self,
        claimed: _runqueue.Claimed,
        graph: Pregel,
        input: Any,
        cfg: Any,
        control: RunControl,
    ) -> None:
        core = self._core
        while True:
            result: Any = None
            error: BaseException | None = None
            try:
                if claimed.attempts > 1:
                    latest = await core.saver.aget_tuple(
                        {CONF: {CONFIG_KEY_THREAD_ID: claimed.thread_id}}
                    )
                    if core.resumes(claimed, latest):
                        input, cfg = None, resumed(cfg)
                result = await self._invoke(claimed, graph, input, cfg, control)
            except Exception as exc:
                error = exc
            outcome = core.outcome(claimed, result, error)
            answer = None
            try:
                answer = await self._record(outcome)
            finally:  # the slot held for the next run is given up if recording fails
                following = core.recorded(outcome, answer)
            if following is None:
                break
            # claimed with the end of the run before, into its slot: run here
            claimed, graph, input, cfg, control = following
        if self._wake is not None:
            self._wake.set()

    async def _invoke(
        self,
        claimed: _runqueue.Claimed,
        graph: Pregel,
        input: Any,
        cfg: Any,
        control: RunControl,
    ) -> Any:
        """Run it; a run queued with stream modes writes its parts too."""
        modes = self._core.stream_modes(claimed.run_id)
        breakpoints = self._core.breakpoints(claimed.run_id)
        if not modes:
            return await graph.ainvoke(input, cfg, control=control, **breakpoints)
        parts = AsyncPartWriter(self._core.saver, (claimed.run_id, claimed.fence))
        try:
            result = await ainvoke_tee(
                graph, input, cfg, control=control, modes=modes, sink=parts.add, **breakpoints
            )
        finally:
            await parts.close()
        return result

    async def _record(self, outcome: Outcome) -> Any:
        """Record how a run ended; what the plan returned, or ``None``."""
        outcome.log()
        if outcome.plan is None:
            return None
        try:
            return await self._core.saver.arun_queue(
                outcome.plan, "record a run's end", single=outcome.single
            )
        except Exception as exc:
            self._core.settle_failed(outcome, exc)
            return None

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self._core.heartbeat_seconds)
            await self._beat()

    async def _watch(self) -> None:
        """Read whether any run held was cancelled, while runs are held."""
        core = self._core
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            for plan in core.cancels_plans():
                try:
                    cancelled = await core.saver.arun_queue(plan, "read cancels", single=True)
                except Exception as exc:  # read again next time; the runs' own saves report
                    log.debug("cannot read cancels (%s)", exc)
                    break
                core.cancelled(cancelled)

    async def _retain(self, served: asyncio.Event) -> None:
        """Take turns applying the retention policy until serving ends."""
        assert self._retention is not None
        core = self._core

        async def between() -> None:
            await asyncio.sleep(_retention.PAUSE_SECONDS)

        while not served.is_set():
            steps = _retention.turn(core.saver, self._retention, core.worker_id, served.is_set)
            try:
                await arun_steps(core.saver, steps, between)
            except Exception as exc:  # the next turn starts over; the database is consistent
                log.warning("retention: prune failed (%s); trying again later", exc)
            try:
                await asyncio.wait_for(served.wait(), _retention.TRY_SECONDS)
            except TimeoutError:
                pass

    async def _beat(self) -> None:
        core = self._core
        try:
            unrenewed = await core.saver.arun_queue(core.heartbeat_plan(), "renew leases")
        except Exception as exc:
            log.warning("cannot renew leases (%s); trying again", exc)
            return
        core.renewed(unrenewed)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        pass
    event.clear()
