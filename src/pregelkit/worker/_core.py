"""What a worker decides, written once for ``Worker`` and ``AsyncWorker``.

The drivers only differ in how they wait: threads and ``threading.Event``
for ``Worker``, tasks and ``asyncio.Event`` for ``AsyncWorker``. Which runs
to claim, how a claimed run is started (its input, its config carrying the
lease), and what each way a run can end means for its row are decided here.

A worker watches the cancel marks of the runs it holds itself, one read
for all of them every ``CANCEL_POLL_SECONDS`` (its runs poll nothing), and
stops a cancelled one through the ``RunControl`` the run was started with.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, get_args

from pregelkit._internal._clock import clock
from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_BREAKPOINTS,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_LEASE,
    CONFIG_KEY_STREAM_MODES,
    CONFIG_KEY_THREAD_ID,
    INTERRUPT,
    METADATA_KEY_RUN,
)
from pregelkit.checkpoint import _queues, _runqueue, _waits
from pregelkit.checkpoint._queues import Limits
from pregelkit.checkpoint.base import BaseCheckpointSaver, no_run_queue
from pregelkit.checkpoint.queues import Queue
from pregelkit.checkpoint.retention import RetentionPolicy
from pregelkit.checkpoint.runs import describe_wait
from pregelkit.errors import (
    GraphDrained,
    LeaseLostError,
    RunCancelledError,
    RunSuspended,
    StorageError,
)
from pregelkit.pregel._exec.stop import POLL_SECONDS
from pregelkit.pregel.main import Pregel
from pregelkit.runtime import RunControl
from pregelkit.types import StreamMode
from pregelkit.worker import _retention
from pregelkit.worker._schedules import Firing

__all__ = ["Held", "Outcome", "WorkerCore", "WorkerFront", "log"]

log = logging.getLogger("pregelkit.worker")

IDLE_POLL_SECONDS = (0.2, 1.0)
"""How long an idle worker waits before asking the queue again: the first
pause, doubling while the queue stays empty up to the second (100 idle
workers then ask about 100 times a second, not 500), each pause drawn
within 20% of it so workers started together do not ask in step."""
OUTAGE_PAUSE_SECONDS = (0.5, 5.0)
"""Pauses between tries while the database is unreachable, doubling."""
CANCEL_POLL_SECONDS = POLL_SECONDS
"""How often a worker reads whether any run it holds was cancelled: as
often as a run started by ``invoke`` polls its own mark."""

Plan = Callable[[_runqueue.Dialect], _runqueue.RunPlan[Any]]


@dataclass(slots=True)
class Held:
    """A run this worker holds, and the control it runs with: the worker
    drains it, or cancels it when its cancel mark is seen."""

    claimed: _runqueue.Claimed
    control: RunControl = field(default_factory=RunControl)
    lost: bool = False
    cancelled: bool = False
    modes: tuple[str, ...] = ()
    """The stream modes whose parts are written for the run (none: not streamed)."""
    breakpoints: dict[str, Any] = field(default_factory=dict)
    """``invoke``'s ``interrupt_before`` / ``interrupt_after`` for the run."""

    @property
    def lease(self) -> tuple[str, int]:
        return (self.claimed.run_id, self.claimed.fence)


@dataclass(slots=True)
class Outcome:
    """How the row of a run that ended is updated: a plan to run (``None``:
    leave the row alone, the lease is not ours) and what to log."""

    plan: Plan | None
    message: str
    level: int = logging.INFO
    exc: BaseException | None = field(default=None, repr=False)
    refills: bool = False
    """The plan also claims the run that takes this one's slot
    (``_runqueue.finish_and_claim``)."""
    single: bool = True
    """The plan's statements need no transaction around them (each is
    whole on its own): not when a child run's end wakes its parent."""

    def log(self) -> None:
        """A failed run's traceback goes with its message."""
        failed = self.level >= logging.ERROR and self.exc is not None
        log.log(self.level, self.message, exc_info=self.exc if failed else None)


class WorkerCore:
    """A worker's state: the graphs it serves, the runs it holds, its lease."""

    def __init__(
        self,
        workflows: Sequence[Pregel],
        checkpointer: BaseCheckpointSaver[Any],
        *,
        concurrency: int,
        lease_seconds: float,
        worker_id: str | None,
        poll_seconds: tuple[float, float] = IDLE_POLL_SECONDS,
        queues: Sequence[Queue | str] = (),
    ) -> None:
        if not isinstance(checkpointer, BaseCheckpointSaver):
            raise TypeError(
                "Worker(checkpointer=...) takes a checkpoint saver (SqliteSaver or "
                f"PostgresSaver), got {type(checkpointer).__name__}"
            )
        if not checkpointer.has_run_queue:
            raise no_run_queue(checkpointer)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if (
            isinstance(lease_seconds, bool)
            or not isinstance(lease_seconds, int | float)
            or not 0.1 <= lease_seconds <= 86400
        ):
            raise ValueError(
                f"lease_seconds must be a number of seconds in [0.1, 86400], got {lease_seconds!r}"
            )
        if isinstance(workflows, Pregel) or not isinstance(workflows, Sequence | set):
            raise TypeError("Worker(workflows=...) takes a list of workflows, e.g. [wf1, wf2]")
        graphs: dict[str, Pregel] = {}
        for wf in workflows:
            if not isinstance(wf, Pregel):
                raise TypeError(
                    f"Worker(workflows=...) takes @entrypoint workflows or Pregel graphs, "
                    f"got {type(wf).__name__}"
                )
            if not wf.name:
                raise ValueError("a workflow served by a worker needs a name: Pregel(name=...)")
            if wf.name in graphs:
                raise ValueError(
                    f"two workflows are named {wf.name!r}: runs find their workflow by name, "
                    "so names must differ (Pregel(name=...) or wf.copy(name=...))"
                )
            graphs[wf.name] = wf.copy(checkpointer=checkpointer)
        if not graphs:
            raise ValueError("Worker(workflows=...) is empty: give it the workflows to serve")
        self.graphs = graphs
        self.names = sorted(graphs)
        self.declares, self.queues = _served(queues)
        self.known = _queues.Known()
        self.saver = checkpointer
        self.concurrency = concurrency
        self.lease_seconds = float(lease_seconds)
        self.heartbeat_seconds = self.lease_seconds / 3
        # an idle worker notices a dead worker's expired lease within a
        # heartbeat: takeover stays within lease + two heartbeats
        first, most = poll_seconds
        self.poll_seconds = (first, max(first, min(most, self.heartbeat_seconds)))
        self._idle_pause = first
        self.worker_id = worker_id or (
            f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        )
        self.held: dict[str, Held] = {}
        self.refilling = 0
        """Slots of runs that ended whose next run is being claimed with
        their end: not free for the serving loop's claim meanwhile."""
        self.stopping = False
        self.stop_reason: str | None = None
        self.finished = 0
        # the schedules of its workflows: asked about at most once per longest idle pause
        self.firing = Firing(checkpointer, self.names, self.poll_seconds[1])

    # the queue

    def declare_plan(self) -> Plan | None:
        """At start: store the declarations this worker was given, and check
        the queues it was given by name are declared (``UnknownQueueError``)."""
        if not self.queues:
            return None
        return partial(_declare_and_check, limits=self.declares, names=self.queues)

    @property
    def claims_alone(self) -> bool:
        """Whether a claim is one statement, a transaction of its own: a
        worker serving the default queue only. A worker serving named
        queues locks the limited ones' rows first, then claims."""
        return not self.queues

    def claim_plan(self) -> Plan | None:
        free = self.concurrency - len(self.held) - self.refilling
        if free <= 0 or self.stopping:
            return None
        if self.queues:
            return partial(
                _queues.claim,
                worker_id=self.worker_id,
                workflows=self.names,
                queues=self.queues,
                limit=free,
                lease_seconds=self.lease_seconds,
                known=self.known,
            )
        return partial(
            _runqueue.claim,
            worker_id=self.worker_id,
            workflows=self.names,
            limit=free,
            lease_seconds=self.lease_seconds,
        )

    def pause(self, claimed: int, asked: bool) -> float:
        """How long the serving loop waits before asking the queue again (a
        run ending wakes it sooner): after an empty claim, longer each time."""
        if claimed or not asked:
            self._idle_pause = self.poll_seconds[0]
            return self._idle_pause
        pause = self._idle_pause
        self._idle_pause = min(pause * 2, self.poll_seconds[1])
        # under a test's clock (pregelkit.testing.FakeClock), an advance is seen at once
        return min(pause * random.uniform(0.8, 1.2), clock().poll)

    def pending_plan(self) -> Plan:
        return partial(_runqueue.pending, workflows=self.names, queues=("", *self.queues))

    def heartbeat_plan(self) -> Plan:
        return partial(
            _runqueue.heartbeat,
            worker_id=self.worker_id,
            workflows=self.names,
            held=[h.lease for h in self.held.values()],
            lease_seconds=self.lease_seconds,
        )

    def renewed(self, unrenewed: set[tuple[str, int]]) -> None:
        """After a heartbeat: a run still held under a lease it could not
        renew was taken by another worker; its writes are refused from now on
        (the fence). A run that ended meanwhile is no longer held."""
        for run_id, fence in unrenewed:
            held = self.held.get(run_id)
            if held is not None and held.claimed.fence == fence and not held.lost:
                held.lost = True
                log.warning(
                    "run %s (thread %s): lease lost to another worker; dropping it",
                    run_id,
                    held.claimed.thread_id,
                )

    def cancels_plans(self) -> list[Plan]:
        """The reads of which runs held here were cancelled: one statement
        each, for up to ``HEARTBEAT_BATCH`` runs; none when none is held."""
        held, batch = list(self.held), _runqueue.HEARTBEAT_BATCH
        return [
            partial(_runqueue.cancels, run_ids=held[start : start + batch])
            for start in range(0, len(held), batch)
        ]

    def cancelled(self, run_ids: set[str]) -> None:
        """Stop the runs the cancels read found (each once): they end at
        their next task boundary, what finished saved, as ``cancelled``."""
        for run_id in run_ids:
            held = self.held.get(run_id)
            if held is not None and not held.cancelled:
                held.cancelled = True
                held.control._cancel()

    def stopped_plan(self) -> Plan:
        return partial(_runqueue.worker_stopped, worker_id=self.worker_id)

    # a run

    def start(self, claimed: _runqueue.Claimed) -> tuple[Pregel, Any, dict[str, Any], RunControl]:
        """The graph, input, config and control a claimed run is invoked
        with. A run claimed again (its worker died) resumes from its
        checkpoint when it had saved one: ``input`` is then None. A run
        whose input or config cannot be read is not held (its lease lapses)."""
        serde = self.saver.serde
        config: dict[str, Any] = dict(serde.loads_typed(claimed.config))
        input = serde.loads_typed(claimed.input)
        asked = dict(config.get(CONF) or {})
        modes = _stream_modes(asked.pop(CONFIG_KEY_STREAM_MODES, None))
        breakpoints = _breakpoints(asked.pop(CONFIG_KEY_BREAKPOINTS, None))
        conf = {
            # a task's result is saved before the run goes on (as Temporal and
            # DBOS record a step): a worker's death re-runs at most the
            # bodies it was running, never one that had finished
            CONFIG_KEY_DURABILITY: "sync",
            **asked,
            CONFIG_KEY_THREAD_ID: claimed.thread_id,
            CONFIG_KEY_LEASE: (claimed.run_id, claimed.fence),
        }
        metadata = {**(config.get("metadata") or {}), METADATA_KEY_RUN: claimed.run_id}
        config = {**config, CONF: conf, "metadata": metadata}
        held = self.held[claimed.run_id] = Held(claimed, modes=modes, breakpoints=breakpoints)
        if self.stopping:  # a stop that came as it was claimed
            held.control.request_drain(self.stop_reason or "worker stopping")
        return self.graphs[claimed.workflow], input, config, held.control

    def breakpoints(self, run_id: str) -> dict[str, Any]:
        """``invoke``'s ``interrupt_before`` / ``interrupt_after`` for a run
        held here (none: the graph's own)."""
        held = self.held.get(run_id)
        return {} if held is None else held.breakpoints

    def stream_modes(self, run_id: str) -> tuple[str, ...]:
        """The modes whose parts are written for a run held here."""
        held = self.held.get(run_id)
        return () if held is None else held.modes

    def resumes(self, claimed: _runqueue.Claimed, latest: Any) -> bool:
        """Whether the run already saved a checkpoint (an earlier holder of
        it did): then it resumes from there instead of starting again."""
        return (
            claimed.attempts > 1
            and latest is not None
            and latest.metadata.get(METADATA_KEY_RUN) == claimed.run_id
        )

    def outcome(
        self, claimed: _runqueue.Claimed, result: Any, exc: BaseException | None
    ) -> Outcome:
        """What the run's end means for its row."""
        held = self.held.pop(claimed.run_id, None)
        lease = (claimed.run_id, claimed.fence)
        what = f"run {claimed.run_id} (thread {claimed.thread_id}, {claimed.workflow})"
        if isinstance(exc, LeaseLostError) or (held is not None and held.lost):
            return Outcome(None, f"{what}: lease lost, dropped", logging.WARNING, exc)
        if isinstance(exc, GraphDrained):
            return Outcome(
                partial(_runqueue.hand_back, lease=lease), f"{what}: handed back (stopping)"
            )
        if isinstance(exc, RunSuspended):
            # the slot is free: the row says what the run waits for, and a
            # worker claims it again once it is due
            plan = partial(
                _waits.suspend,
                lease=lease,
                status=exc.status,
                kind=exc.kind,
                due_at=exc.due_at,
                topic=exc.topic,
            )
            # one statement for a sleep; a wait also looks whether what it
            # waits for came meanwhile, in the same transaction
            return Outcome(plan, f"{what}: {waiting_for(exc)}", single=exc.kind == "sleep")
        if isinstance(exc, StorageError):
            # the database failed: give the run back if it can still be
            # reached, else its lease lapses and another worker takes it
            return Outcome(
                partial(_runqueue.hand_back, lease=lease),
                f"{what}: stopped by a database failure, handed back",
                logging.WARNING,
                exc,
            )
        self.finished += 1
        child = (
            None if claimed.parent_thread is None else (claimed.parent_thread, claimed.thread_id)
        )
        finish = partial(self._finish, lease, exc, child)
        if isinstance(exc, RunCancelledError):
            return finish(_runqueue.CANCELLED, None, str(exc), f"{what}: cancelled")
        if exc is not None:
            error = f"{type(exc).__name__}: {exc}"
            return finish(_runqueue.FAILED, None, error, f"{what}: failed: {error}", logging.ERROR)
        status = (
            _runqueue.INTERRUPTED
            if isinstance(result, dict) and INTERRUPT in result
            else _runqueue.DONE
        )
        try:
            stored = self.saver.serde.dumps_typed(result)
        except Exception as err:
            error = f"the run ended but its result cannot be stored: {err}"
            return finish(_runqueue.FAILED, None, error, f"{what}: {error}", logging.ERROR)
        return finish(status, stored, None, f"{what}: {status}")

    def _finish(
        self,
        lease: tuple[str, int],
        exc: BaseException | None,
        child: tuple[str, str] | None,
        status: str,
        result: tuple[str, bytes] | None,
        error: str | None,
        message: str,
        level: int = logging.INFO,
    ) -> Outcome:
        """A run's end recorded with the claim of the run that takes its
        slot, in one statement (a run's end and the next one's start cost
        one transaction, not two): unless the worker stops, or the run
        ended by an exception that stops the worker's thread too. A child
        run's end also wakes its parent, in the same transaction."""
        ending = partial(
            _runqueue.finish, lease=lease, status=status, result=result, error=error, child=child
        )
        single = child is None
        if self.stopping or not isinstance(exc, Exception | None):
            return Outcome(ending, message, level, exc, single=single)
        self.refilling += 1
        if self.queues:
            plan = partial(
                _queues.finish_and_claim,
                *ending.args,
                **ending.keywords,
                worker_id=self.worker_id,
                workflows=self.names,
                queues=self.queues,
                lease_seconds=self.lease_seconds,
                known=self.known,
            )
            return Outcome(plan, message, level, exc, refills=True, single=False)
        plan = partial(
            _runqueue.finish_and_claim,
            *ending.args,
            **ending.keywords,
            worker_id=self.worker_id,
            workflows=self.names,
            lease_seconds=self.lease_seconds,
        )
        return Outcome(plan, message, level, exc, refills=True, single=single)

    def recorded(
        self, outcome: Outcome, answer: Any
    ) -> tuple[_runqueue.Claimed, Pregel, Any, dict[str, Any], RunControl] | None:
        """After a run's end was recorded (``answer``: what its plan
        returned; ``None`` if that failed): the run claimed with it, started
        in the slot the ended run leaves, for the same thread or task to run."""
        if not outcome.refills:
            return None
        self.refilling -= 1
        if answer is None:
            return None
        ended, claimed = answer
        if not ended:
            log.warning("%s; but the lease was lost before it was recorded", outcome.message)
        if claimed is None:
            return None
        try:
            return (claimed, *self.start(claimed))
        except Exception:
            log.exception(
                "run %s (thread %s, %s): cannot start it; its lease lapses",
                claimed.run_id,
                claimed.thread_id,
                claimed.workflow,
            )
            return None

    def settle_failed(self, outcome: Outcome, exc: BaseException) -> None:
        """Recording how a run ended failed too: the lease decides (it lapses,
        or it was lost); either way the run is not ours any more."""
        if isinstance(exc, LeaseLostError):
            log.warning("%s; but the lease was lost before it was recorded", outcome.message)
        else:
            log.warning("%s; recording it failed (%s): the lease lapses", outcome.message, exc)

    def stop(self, reason: str = "worker stopping") -> None:
        """Stop claiming; the runs held drain (their started tasks finish and
        are saved) and are handed back to the queue."""
        self.stopping = True
        if self.stop_reason is None:
            self.stop_reason = reason
        for held in list(self.held.values()):
            held.control.request_drain(reason)

    def log_stopping(self) -> None:
        """Say why the worker stops and what it waits for: logged by the
        serving loop once it sees the stop (a signal handler must not log:
        it may interrupt a write to the same stream)."""
        if self.stop_reason is None:
            return
        count = len(self.held)
        if count == 0:
            waits = "no run held"
        elif count == 1:
            waits = "waiting for 1 run to finish its started tasks, then handing it back"
        else:
            waits = f"waiting for {count} runs to finish their started tasks, then handing them"
            waits += " back"
        if count:
            waits += " to the queue"
        log.info("stopping (%s): claiming no more runs; %s", self.stop_reason, waits)


def _stream_modes(asked: Any) -> tuple[str, ...]:
    """The stream modes a run was queued with, the known ones only."""
    if not isinstance(asked, list | tuple):
        return ()
    return tuple(m for m in asked if m in STREAM_MODES)


STREAM_MODES = frozenset(get_args(StreamMode))


def resumed(config: dict[str, Any]) -> dict[str, Any]:
    """The config of a run that resumes from its own latest checkpoint: a
    run queued to start from an older one (``checkpoint_id``, a fork) goes
    on from where it got to, not from its start again."""
    conf = {k: v for k, v in config[CONF].items() if k != CONFIG_KEY_CHECKPOINT_ID}
    return {**config, CONF: conf}


def _breakpoints(asked: Any) -> dict[str, Any]:
    """The ``interrupt_before`` / ``interrupt_after`` a run was queued with,
    as ``invoke``'s keywords (``invoke`` checks the node names)."""
    if not isinstance(asked, dict):
        return {}
    return {
        f"interrupt_{when}": nodes
        for when in ("before", "after")
        if isinstance(nodes := asked.get(when), str | list)
    }


def _served(queues: Sequence[Queue | str]) -> tuple[list[Limits], list[str]]:
    """The declarations a worker makes at start, and the named queues it
    serves (besides the default queue, which every worker serves)."""
    if isinstance(queues, str | Queue) or not isinstance(queues, Sequence | set):
        raise TypeError(
            "Worker(queues=...) takes a list of Queue(...) declarations or declared queues' "
            "names, e.g. [Queue('emails', concurrency=5)]"
        )
    declares: dict[str, Limits] = {}
    names: list[str] = []
    for queue in queues:
        if isinstance(queue, Queue):
            if queue.name in declares and declares[queue.name] != queue.limits():
                raise ValueError(f"Worker(queues=...) declares queue {queue.name!r} twice, apart")
            declares[queue.name] = queue.limits()
            name = queue.name
        elif isinstance(queue, str) and queue:
            name = queue
        else:
            raise TypeError(
                f"Worker(queues=...) takes Queue(...) declarations or queue names, got {queue!r}"
            )
        if name not in names:
            names.append(name)
    return list(declares.values()), sorted(names)


def _declare_and_check(
    d: _runqueue.Dialect, limits: Sequence[Limits], names: Sequence[str]
) -> _runqueue.RunPlan[None]:
    yield from _queues.declare(d, limits)
    yield from _queues.declared(d, names)


def waiting_for(suspended: RunSuspended) -> str:
    """What a suspended run waits for, as the worker logs it."""
    what = describe_wait(suspended.kind, suspended.due_at, suspended.topic)
    return f"{suspended.status} {what}".rstrip()


class WorkerFront:
    """What ``Worker`` and ``AsyncWorker`` are built from: the arguments,
    checked once, and the core holding the decisions."""

    def __init__(
        self,
        workflows: Sequence[Pregel],
        checkpointer: BaseCheckpointSaver[Any],
        *,
        concurrency: int = 8,
        lease_seconds: float = 30.0,
        worker_id: str | None = None,
        queues: Sequence[Queue | str] = (),
        retention: RetentionPolicy | None = None,
    ) -> None:
        """``workflows``: the graphs this worker serves, found by name (a
        queued run names its workflow). ``checkpointer``: the database the
        runs are queued in and saved to (a SQLite or PostgreSQL saver); the
        workflows run with it, whatever saver they were built with.
        ``concurrency``: runs at a time. ``lease_seconds``: how long a run
        this worker stops renewing stays its own before another worker may
        take it (renewed every third of it). ``worker_id``: a name in
        ``pregelkit runs`` (default: host, pid and a random suffix).
        ``queues``: the named queues it serves besides the default one, as
        ``Queue(...)`` declarations (stored when it starts: the latest
        declaration of a name wins) or names of queues declared already.
        ``retention``: a ``pregelkit.durable.RetentionPolicy`` this worker
        applies in the background, taking turns with the fleet's other
        workers (one at a time, at most every five minutes)."""
        self._retention = _retention.checked(retention)
        self._core = WorkerCore(
            workflows,
            checkpointer,
            concurrency=concurrency,
            lease_seconds=lease_seconds,
            worker_id=worker_id,
            queues=queues,
        )
        self._lock = threading.Lock()
        self._event = threading.Event()

    @property
    def worker_id(self) -> str:
        return self._core.worker_id
