"""``Worker``: serve queued runs with threads (the decisions: ``_core.py``)."""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

from pregelkit._internal._constants import CONF, CONFIG_KEY_THREAD_ID
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint.retention import run_steps
from pregelkit.errors import StorageError
from pregelkit.pregel._api.tee import invoke_tee
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
from pregelkit.worker._parts import PartWriter
from pregelkit.worker._schedules import check

__all__ = ["Worker"]


class Worker(WorkerFront):
    """Runs the queued runs (``wf.submit``) of its workflows, up to
    ``concurrency`` at a time, each in a thread of its own.

    Each run it claims is held under a lease of ``lease_seconds``, renewed
    every third of it. A worker that dies (or stops renewing: paused, cut
    off) loses its runs to other workers once the lease expires; they resume
    each from its last checkpoint, and the old holder can write nothing
    more for them (``LeaseLostError``). Several workers, in any number of
    processes and machines, may serve one database.

    It also fires the schedules of its workflows (``wf.schedule``): at most
    once a second it looks whether a slot is due, and queues its run; each
    slot fires once, whichever worker looks first (``worker/_schedules.py``).
    """

    def run(self) -> None:
        """Serve until ``stop()`` or SIGTERM/SIGINT (handled when called from
        the main thread): then claim nothing more, let the runs held finish
        their started tasks, hand them back to the queue, and return."""
        restore = _on_signals(self.stop)
        try:
            self._serve(until_idle=False)
        finally:
            restore()

    def run_until_idle(self) -> int:
        """Serve until no run of these workflows is queued or running, here
        or on another worker (a dead worker's runs are waited for and taken
        over); returns how many runs this call saw end."""
        before = self._core.finished
        self._serve(until_idle=True)
        return self._core.finished - before

    def wake(self) -> None:
        """Ask the serving loop to claim now rather than after its idle
        pause (up to a second): for a caller that just queued a run this
        worker serves, in this process (``pregelkit serve``)."""
        self._event.set()

    def stop(self, reason: str = "worker stopping") -> None:
        """Ask ``run()`` to return (safe from a signal handler or any thread)."""
        self._core.stop(reason)
        self._event.set()

    # serving

    def _serve(self, *, until_idle: bool) -> None:
        core = self._core
        saver = core.saver
        beating = threading.Event()
        beat = threading.Thread(
            target=self._heartbeats, args=(beating,), name="pregelkit-worker-heartbeat", daemon=True
        )
        watch = threading.Thread(
            target=self._watch, args=(beating,), name="pregelkit-worker-cancels", daemon=True
        )
        retain = threading.Thread(
            target=self._retain, args=(beating,), name="pregelkit-retention", daemon=True
        )
        pause = OUTAGE_PAUSE_SECONDS[0]
        declare = core.declare_plan()
        if declare is not None:
            saver.run_queue(declare, "declare queues")
        try:
            # leaving the pool waits for the runs held: they end or drain
            with ThreadPoolExecutor(core.concurrency, thread_name_prefix="pregelkit-run") as pool:
                self._beat()
                beat.start()
                watch.start()
                core.firing.reset()
                if self._retention is not None:
                    retain.start()
                while not core.stopping:
                    check(core.firing)
                    with self._lock:
                        plan = core.claim_plan()
                    claimed: list[_runqueue.Claimed] = []
                    if plan is not None:
                        try:
                            claimed = saver.run_queue(plan, "claim runs", single=core.claims_alone)
                            pause = OUTAGE_PAUSE_SECONDS[0]
                        except StorageError as exc:
                            log.warning("cannot reach the queue (%s); trying again", exc)
                            self._event.wait(pause)
                            pause = min(pause * 2, OUTAGE_PAUSE_SECONDS[1])
                            self._event.clear()
                            continue
                    for run in claimed:
                        with self._lock:
                            started = core.start(run)
                        pool.submit(self._execute, run, *started)
                    if until_idle and not claimed and self._idle():
                        break
                    # asked every time: a claim that took runs starts the pauses over
                    pause_for = core.pause(len(claimed), plan is not None)
                    if not claimed or plan is None:
                        self._event.wait(pause_for)
                        self._event.clear()
                with self._lock:
                    core.log_stopping()
        finally:
            beating.set()
            if retain.is_alive():  # it stops after its current transaction
                retain.join(_retention.JOIN_SECONDS)
        self._stopped()

    def _idle(self) -> bool:
        """Nothing held here, and no run of these workflows queued or
        running anywhere (a dead worker's run counts until it is taken)."""
        with self._lock:
            if self._core.held or self._core.refilling:
                return False
        try:
            pending = self._core.saver.run_queue(
                self._core.pending_plan(), "count runs", single=True
            )
        except StorageError:
            return False
        return bool(pending == 0)

    def _execute(
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
                    latest = core.saver.get_tuple({CONF: {CONFIG_KEY_THREAD_ID: claimed.thread_id}})
                    if core.resumes(claimed, latest):
                        input, cfg = None, resumed(cfg)
                result = self._invoke(claimed, graph, input, cfg, control)
            except BaseException as exc:
                error = exc
            with self._lock:
                outcome = core.outcome(claimed, result, error)
            answer = None
            try:
                answer = self._record(outcome)
            finally:  # the slot held for the next run is given up if recording fails
                with self._lock:
                    following = core.recorded(outcome, answer)
            if following is None:
                break
            # claimed with the end of the run before, into its slot: run here
            claimed, graph, input, cfg, control = following
        self._event.set()
        if error is not None and not isinstance(error, Exception):
            raise error

    def _invoke(
        self,
        claimed: _runqueue.Claimed,
        graph: Pregel,
        input: Any,
        cfg: Any,
        control: RunControl,
    ) -> Any:
        """Run it; a run queued with stream modes writes its parts too."""
        with self._lock:
            modes = self._core.stream_modes(claimed.run_id)
            breakpoints = self._core.breakpoints(claimed.run_id)
        if not modes:
            return graph.invoke(input, cfg, control=control, **breakpoints)
        parts = PartWriter(self._core.saver, (claimed.run_id, claimed.fence))
        try:
            result = invoke_tee(
                graph, input, cfg, control=control, modes=modes, sink=parts.add, **breakpoints
            )
        finally:
            parts.close()
        return result

    def _record(self, outcome: Outcome) -> Any:
        """Record how a run ended; what the plan returned, or ``None``."""
        outcome.log()
        if outcome.plan is None:
            return None
        try:
            return self._core.saver.run_queue(
                outcome.plan, "record a run's end", single=outcome.single
            )
        except Exception as exc:
            self._core.settle_failed(outcome, exc)
            return None

    def _heartbeats(self, done: threading.Event) -> None:
        while not done.wait(self._core.heartbeat_seconds):
            self._beat()

    def _watch(self, done: threading.Event) -> None:
        """Read whether any run held was cancelled, while runs are held."""
        core = self._core
        while not done.wait(CANCEL_POLL_SECONDS):
            with self._lock:
                plans = core.cancels_plans()
            for plan in plans:
                try:
                    cancelled = core.saver.run_queue(plan, "read cancels", single=True)
                except Exception as exc:  # read again next time; the runs' own saves report
                    log.debug("cannot read cancels (%s)", exc)
                    break
                with self._lock:
                    core.cancelled(cancelled)

    def _retain(self, done: threading.Event) -> None:
        """Take turns applying the retention policy until serving ends."""
        assert self._retention is not None
        core = self._core
        while True:
            steps = _retention.turn(core.saver, self._retention, core.worker_id, done.is_set)
            try:
                run_steps(core.saver, steps, between=lambda: done.wait(_retention.PAUSE_SECONDS))
            except Exception as exc:  # the next turn starts over; the database is consistent
                log.warning("retention: prune failed (%s); trying again later", exc)
            if done.wait(_retention.TRY_SECONDS):
                return

    def _beat(self) -> None:
        core = self._core
        with self._lock:
            plan = core.heartbeat_plan()
        try:
            unrenewed = core.saver.run_queue(plan, "renew leases")
        except Exception as exc:
            log.warning("cannot renew leases (%s); trying again", exc)
            return
        with self._lock:
            core.renewed(unrenewed)

    def _stopped(self) -> None:
        try:
            self._core.saver.run_queue(self._core.stopped_plan(), "worker stopped", single=True)
        except Exception as exc:
            log.warning("cannot record that the worker stopped (%s)", exc)


def _on_signals(stop: Any) -> Any:
    """Call ``stop`` on SIGTERM and SIGINT while serving (main thread only);
    returns what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: FrameType | None) -> None:
        stop(f"signal {signal.Signals(signum).name}")

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, previous in old.items():
            signal.signal(sig, previous)

    return restore
