"""Queued runs: ``wf.submit(...)`` records a run request in the checkpointer's
database and returns a :class:`RunHandle`; workers (``pregelkit.Worker``)
claim and run the requests.

The queue lives beside the checkpoints (``pregelkit_runs``), so a run and its
checkpoints are in one database and one backup, and no other broker is
needed. A thread has at most one queued or running run: submitting again
while one is returns its handle (the thread id is the idempotency key, as a
workflow id is in Temporal).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from pregelkit._internal._clock import clock
from pregelkit._internal._constants import CONF, CONFIG_KEY_THREAD_ID
from pregelkit.checkpoint import _parts, _runqueue
from pregelkit.checkpoint._runqueue import (
    CANCELLED,
    DONE,
    FAILED,
    FINISHED,
    INTERRUPTED,
    QUEUED,
    RUNNING,
    SLEEPING,
    STATUSES,
    WAITING,
)
from pregelkit.errors import RunCancelledError, RunFailedError

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "CANCELLED",
    "DONE",
    "FAILED",
    "INTERRUPTED",
    "QUEUED",
    "RUNNING",
    "SLEEPING",
    "STATUSES",
    "WAITING",
    "RunHandle",
    "RunRecord",
    "Routing",
    "asubmit_run",
    "delete_run",
    "describe_wait",
    "list_runs",
    "submit_run",
]

POLL_SECONDS = (0.02, 0.5)
"""How often ``result()`` reads the run's row: from the first to the
longest pause, doubling (a poll is one read by primary key)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run request as the queue holds it.

    ``lease_left``: seconds until the holder's lease expires (negative once
    it has; ``None`` when no worker holds the run). ``waiting``: for a
    queued run, why no worker takes it (set by :func:`list_runs`).
    For a sleeping or waiting run (``pregelkit.durable``): ``due_at``, when
    it resumes (seconds since the epoch; ``None``: when what it waits for
    comes), ``wait_kind`` (``sleep``, ``recv`` or ``child``) and
    ``wait_topic`` (the message topic, '' for the default one, or the
    child's thread). ``parent_thread``: the thread of the workflow that
    started this run as its child."""

    run_id: str
    thread_id: str
    workflow: str
    status: str
    priority: int
    fence: int
    worker: str | None
    lease_left: float | None
    attempts: int
    cancel_requested: bool
    error: str | None
    created_at: float
    finished_at: float | None
    waiting: str | None = None
    due_at: float | None = None
    wait_kind: str | None = None
    wait_topic: str | None = None
    parent_thread: str | None = None
    queue: str = ""
    """Its queue ('' is the default one) and key (``submit(key=...)``)."""
    queue_key: str | None = None
    not_before: float | None = None
    """A debounced run starts no sooner (seconds since the epoch)."""

    @classmethod
    def from_row(cls, row: tuple[Any, ...], waiting: str | None = None) -> RunRecord:
        (run_id, thread, workflow, status, priority, fence, worker, lease_left) = row[:8]
        attempts, cancel_requested, error, created_at, finished_at = row[8:13]
        due_at, wait_kind, wait_topic, parent_thread, queue, key, not_before = row[13:20]
        return cls(
            str(run_id),
            str(thread),
            str(workflow),
            str(status),
            int(priority),
            int(fence),
            worker,
            None if lease_left is None else float(lease_left),
            int(attempts),
            bool(cancel_requested),
            error,
            float(created_at),
            None if finished_at is None else float(finished_at),
            waiting,
            None if due_at is None else float(due_at),
            wait_kind,
            wait_topic,
            parent_thread,
            str(queue),
            key,
            None if not_before is None else float(not_before),
        )

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @property
    def waits_for(self) -> str | None:
        """What a sleeping or waiting run waits for, in words (``None`` for
        a run in another status)."""
        if self.status not in (SLEEPING, WAITING):
            return None
        return describe_wait(self.wait_kind, self.due_at, self.wait_topic)


def describe_wait(kind: str | None, due_at: float | None, topic: str | None) -> str:
    """What a run waits for, after its status: ``until 2026-11-29 15:00:00
    UTC`` (a sleep), ``for a message on topic 'orders'``, ``for child thread
    'p/child/0'``, with the deadline of a wait that has one."""
    import datetime

    until = ""
    if due_at is not None:
        when = datetime.datetime.fromtimestamp(due_at, datetime.UTC)
        until = f"until {when:%Y-%m-%d %H:%M:%S} UTC"
    if kind == "sleep" or kind is None:
        return until
    if kind == "child":
        what = f"for child thread {topic!r}"
    else:
        what = "for a message on " + (f"topic {topic!r}" if topic else "the default topic")
    return f"{what} {until}".rstrip()


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a submit goes besides its thread (``wf.submit``'s ``queue=``,
    ``key=``, ``dedup_id=``, ``debounce=``), checked."""

    queue: str = ""
    key: str | None = None
    dedup_id: str | None = None
    debounce: float | None = None

    @classmethod
    def of(
        cls,
        queue: str | None = None,
        key: str | None = None,
        dedup_id: str | None = None,
        debounce: float | timedelta | None = None,
    ) -> Routing:
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(
                f"submit(queue=...) takes a declared queue's name, got {queue!r} "
                "(leave it out for the default queue)"
            )
        for what, value in (("key", key), ("dedup_id", dedup_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"submit({what}=...) takes a non-empty string, got {value!r}")
        if key is not None and queue is None:
            raise ValueError(
                "submit(key=...) needs queue=...: a key is counted against its queue's "
                "key_concurrency, and the default queue has no limits"
            )
        if isinstance(debounce, timedelta):
            debounce = debounce.total_seconds()
        if debounce is not None:
            if isinstance(debounce, bool) or not isinstance(debounce, int | float):
                raise TypeError(f"submit(debounce=...) takes seconds, got {debounce!r}")
            if not (math.isfinite(debounce) and 0 < debounce <= 366 * 86400):
                raise ValueError(
                    f"submit(debounce=...) takes seconds in (0, a year], got {debounce!r}"
                )
            if key is None:
                raise ValueError(
                    "submit(debounce=...) needs key=... (and queue=...): a newer submit with "
                    "the same queue and key replaces a debounced run that has not started"
                )
        return cls(queue or "", key, dedup_id, None if debounce is None else float(debounce))

    @property
    def plain(self) -> bool:
        """The default queue and no dedup id: today's submit, unchanged."""
        return not self.queue and self.dedup_id is None


DEFAULT_ROUTE = Routing()
MAX_PRIORITY = 2**31 - 1
"""The highest priority a run takes (a 32-bit column on PostgreSQL)."""


def _plain_submit(
    d: _runqueue.Dialect, thread_id: str, **kwargs: Any
) -> _runqueue.RunPlan[tuple[str, str, bool]]:
    run_id, created = yield from _runqueue.submit(d, thread_id, **kwargs)
    return run_id, thread_id, created


def _request(
    saver: BaseCheckpointSaver[Any],
    workflow: str,
    input: Any,
    config: Mapping[str, Any] | None,
    priority: int,
    parent_thread: str | None,
    detached: bool = False,
    route: Routing = DEFAULT_ROUTE,
) -> partial[_runqueue.RunPlan[tuple[str, str, bool]]]:
    """The submit plan; argument checks happen here, before any database
    call. It returns (run id, its thread, whether queued now)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int (higher runs first), got {priority!r}")
    if not -MAX_PRIORITY - 1 <= priority <= MAX_PRIORITY:
        # PostgreSQL's column is 32-bit (SQLite's 64): the same bound on both
        raise ValueError(
            f"priority must be between {-MAX_PRIORITY - 1} and {MAX_PRIORITY}, got {priority}"
        )
    conf = (config or {}).get(CONF) or {}
    thread_id = conf.get(CONFIG_KEY_THREAD_ID)
    if thread_id is None or thread_id == "":
        raise ValueError(
            "submit() needs a thread id, the run's identity (submitting twice for one thread "
            "returns the same run): pass config={'configurable': {'thread_id': '...'}}"
        )
    try:
        stored_input = saver.serde.dumps_typed(input)
        stored_config = saver.serde.dumps_typed(dict(config or {}))
    except Exception as exc:
        raise TypeError(
            f"submit() stores the input and config in the database for a worker to load, "
            f"but they cannot be serialized: {exc}"
        ) from exc
    if not route.plain:
        from pregelkit.checkpoint import _queues

        return partial(
            _queues.submit,
            thread_id=str(thread_id),
            workflow=workflow,
            priority=priority,
            input=stored_input,
            config=stored_config,
            queue=route.queue,
            key=route.key,
            dedup_id=route.dedup_id,
            debounce=route.debounce,
        )
    return partial(
        _plain_submit,
        thread_id=str(thread_id),
        workflow=workflow,
        priority=priority,
        input=stored_input,
        config=stored_config,
        parent_thread=parent_thread,
        detached=detached,
    )


def submit_run(
    saver: BaseCheckpointSaver[Any],
    workflow: str,
    input: Any,
    config: Mapping[str, Any] | None,
    priority: int = 0,
    parent_thread: str | None = None,
    detached: bool = False,
    route: Routing = DEFAULT_ROUTE,
) -> RunHandle:
    """Queue a run of the workflow named ``workflow`` (what ``wf.submit``
    does). ``parent_thread``: the thread of the workflow that submits it as
    its child (``pregelkit.durable``): its end wakes the parent, and the
    parent's cancel cancels it unless ``detached``. ``route``: its queue,
    key, dedup id and debounce."""
    plan = _request(saver, workflow, input, config, priority, parent_thread, detached, route)
    run_id, thread_id, _ = saver.run_queue(lambda d: plan(d), "submit")
    return RunHandle(saver, run_id, thread_id)


async def asubmit_run(
    saver: BaseCheckpointSaver[Any],
    workflow: str,
    input: Any,
    config: Mapping[str, Any] | None,
    priority: int = 0,
    parent_thread: str | None = None,
    route: Routing = DEFAULT_ROUTE,
) -> RunHandle:
    """The async twin of :func:`submit_run`."""
    plan = _request(saver, workflow, input, config, priority, parent_thread, route=route)
    run_id, thread_id, _ = await saver.arun_queue(lambda d: plan(d), "submit")
    return RunHandle(saver, run_id, thread_id)


def handle_of_thread(saver: BaseCheckpointSaver[Any], thread_id: str) -> RunHandle | None:
    """The handle of the thread's active run, else of its newest, if it
    has any (``_runqueue.latest_of_thread``)."""
    run_id = saver.run_queue(partial(_runqueue.latest_of_thread, thread_id=thread_id), "runs")
    return None if run_id is None else RunHandle(saver, run_id, thread_id)


async def ahandle_of_thread(saver: BaseCheckpointSaver[Any], thread_id: str) -> RunHandle | None:
    """The async twin of :func:`handle_of_thread` (what an async saver
    needs on its own event loop)."""
    plan = partial(_runqueue.latest_of_thread, thread_id=thread_id)
    run_id = await saver.arun_queue(plan, "runs")
    return None if run_id is None else RunHandle(saver, run_id, thread_id)


def cancel_thread_runs(saver: BaseCheckpointSaver[Any], thread_id: str) -> bool:
    """Cancel the thread's active run (queued, running, sleeping or
    waiting), if it has one (what
    ``cancel(config)`` does besides marking the thread); whether it had one."""
    if not saver.has_run_queue:
        return False
    handle = handle_of_thread(saver, thread_id)
    if handle is None or handle.status() not in _runqueue.ACTIVE:
        return False
    handle.cancel()
    return True


async def acancel_thread_runs(saver: BaseCheckpointSaver[Any], thread_id: str) -> bool:
    """The async twin of :func:`cancel_thread_runs`."""
    if not saver.has_run_queue:
        return False
    run_id = await saver.arun_queue(
        partial(_runqueue.latest_of_thread, thread_id=thread_id), "runs"
    )
    if run_id is None:
        return False
    handle = RunHandle(saver, run_id, thread_id)
    if await handle.astatus() not in _runqueue.ACTIVE:
        return False
    await handle.acancel()
    return True


def delete_run(saver: BaseCheckpointSaver[Any], run_id: str) -> str | None:
    """Delete an ended run's record: its queue row and its stream parts (the
    checkpoints it saved stay: they are the thread's). Returns the run's
    status, ``None`` if there is no such run; a run that has not finished
    (done, failed, cancelled or interrupted) is not deleted: cancel it
    first."""
    status: str | None = saver.run_queue(partial(_delete_ended, run_id=run_id), "delete run")
    return status


def _delete_ended(d: _runqueue.Dialect, run_id: str) -> _runqueue.RunPlan[str | None]:
    row = yield d.q("SELECT status FROM pregelkit_runs WHERE run_id = ?", (run_id,), "one")
    if row is None or row[0] not in _runqueue.FINISHED:
        return None if row is None else str(row[0])
    # the guard again: the row read above is not locked
    finished = ", ".join(f"'{s}'" for s in _runqueue.FINISHED)
    yield d.q(f"DELETE FROM pregelkit_runs WHERE run_id = ? AND status IN ({finished})", (run_id,))
    yield from _parts.delete(d, [run_id])
    return str(row[0])


def delete_ended_runs(saver: BaseCheckpointSaver[Any], thread_id: str) -> int:
    """Delete the records of the thread's ended runs (queue rows and stream
    parts), as a deleted thread's: a thread made again with its id must not
    list them. How many went."""
    deleted: int = saver.run_queue(partial(_delete_ended_of, thread_id=thread_id), "delete runs")
    return deleted


def _delete_ended_of(d: _runqueue.Dialect, thread_id: str) -> _runqueue.RunPlan[int]:
    finished = ", ".join(f"'{s}'" for s in _runqueue.FINISHED)
    rows = yield d.q(
        f"DELETE FROM pregelkit_runs WHERE thread_id = ? AND status IN ({finished}) "
        "RETURNING run_id",
        (thread_id,),
        "all",
    )
    ids = [str(r[0]) for r in rows]
    for at in range(0, len(ids), _PARTS_BATCH):
        yield from _parts.delete(d, ids[at : at + _PARTS_BATCH])
    return len(ids)


_PARTS_BATCH = 500
"""Runs whose stream parts one statement deletes (within every database's
parameter limit)."""


LIVE_SECONDS = 60.0
"""A worker not seen for this long no longer counts as serving its workflows."""


def list_runs(
    saver: BaseCheckpointSaver[Any],
    status: str | None = None,
    limit: int = 100,
    thread_id: str | None = None,
) -> list[RunRecord]:
    """Runs newest first (``thread_id``: that thread's only); each queued run
    says why no worker takes it: no live worker serves its workflow, its
    debounce, or which limit of its queue holds it."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown run status {status!r}: one of {', '.join(STATUSES)}")
    rows, workers = saver.run_queue(
        partial(
            _runqueue.list_runs,
            status=status,
            limit=limit,
            live_seconds=LIVE_SECONDS,
            thread_id=thread_id,
        ),
        "runs",
    )
    served: set[str] = set()
    for _, workflows, _ in workers:
        served.update(str(workflows).split("\n"))
    states = None
    if any(row[3] == QUEUED and row[17] for row in rows):
        from pregelkit.checkpoint.queues import queue_states

        states = queue_states(saver)
    records = []
    now = clock().now()
    for row in rows:
        waiting = None
        if row[3] == QUEUED and row[2] not in served:
            waiting = (
                f"no live worker serves workflow {row[2]!r}"
                + (f" (live workers serve: {', '.join(sorted(served))})" if served else "")
                + f": start one with `pregelkit worker MODULE:{row[2]} --db URL`"
            )
        record = RunRecord.from_row(row, waiting)
        if states is not None and waiting is None and record.status == QUEUED and record.queue:
            record = replace(record, waiting=_held(record, states, now))
        records.append(record)
    return records


def _held(record: RunRecord, states: Mapping[str, Any], now: float) -> str | None:
    """What keeps a queued run of a named queue from starting now: its
    debounce, or the limit of its queue it is held by."""
    import datetime

    if record.not_before is not None and record.not_before > now:
        when = datetime.datetime.fromtimestamp(record.not_before, datetime.UTC)
        return (
            f"debounced: starts at {when:%Y-%m-%d %H:%M:%S} UTC unless a newer submit of "
            f"key {record.queue_key!r} replaces it"
        )
    state = states.get(record.queue)
    if state is None:
        return f"queue {record.queue!r} is not declared: declare it for a worker to serve it"
    held: str | None = state.holds(record.queue_key)
    return held


def _replaced_by(error: str | None) -> str | None:
    """The run that replaced a debounced one, from its error."""
    from pregelkit.checkpoint._queues import REPLACED

    if error is None or not error.startswith(REPLACED):
        return None
    return error[len(REPLACED) :].split(" ", 1)[0]


class RunHandle:
    """A queued run: its state, its result, and a way to cancel it. Holds
    only ids, so a handle can be rebuilt anywhere with the same saver."""

    def __init__(self, saver: BaseCheckpointSaver[Any], run_id: str, thread_id: str) -> None:
        self.saver = saver
        self.run_id = run_id
        self.thread_id = thread_id

    def __repr__(self) -> str:
        return f"RunHandle(thread_id={self.thread_id!r}, run_id={self.run_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.run_id == self.run_id

    def __hash__(self) -> int:
        return hash(self.run_id)

    def _plan(self, d: _runqueue.Dialect) -> _runqueue.RunPlan[tuple[Any, ...] | None]:
        return _runqueue.get(d, self.run_id)

    def _row(self, row: tuple[Any, ...] | None) -> tuple[Any, ...]:
        if row is None:
            raise LookupError(f"run {self.run_id!r} is not in the queue any more")
        return row

    def record(self) -> RunRecord:
        return RunRecord.from_row(self._row(self.saver.run_queue(self._plan, "run status")))

    async def arecord(self) -> RunRecord:
        row = await self.saver.arun_queue(self._plan, "run status")
        return RunRecord.from_row(self._row(row))

    def status(self) -> str:
        """queued, running, sleeping, waiting, interrupted, done, failed or
        cancelled (sleeping and waiting: ``pregelkit.durable``)."""
        return self.record().status

    async def astatus(self) -> str:
        return (await self.arecord()).status

    def cancel(self) -> str:
        """Cancel the run: a queued run never starts; a running one stops at
        its next task boundary on whichever worker holds it (what finished
        is saved). Returns the status the run had then."""
        status = self.saver.run_queue(partial(_runqueue.cancel, run_id=self.run_id), "cancel")
        return str(self._row((status,))[0])

    async def acancel(self) -> str:
        status = await self.saver.arun_queue(
            partial(_runqueue.cancel, run_id=self.run_id), "cancel"
        )
        return str(self._row((status,))[0])

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end (through any sleep or wait of it, as
        ``invoke`` does) and return what ``invoke`` would have: the
        workflow's output, or for a run stopped at ``interrupt()`` a dict with
        the interrupts under ``"__interrupt__"``. Raises ``RunFailedError``,
        ``RunCancelledError``, or ``TimeoutError`` after ``timeout`` seconds
        (the run goes on; ask again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = POLL_SECONDS[0]
        while True:
            row = self._row(self.saver.run_queue(self._plan, "run result"))
            if row[3] in FINISHED:
                return self._outcome(row)
            pause = self._pause(deadline, pause, row[3])
            time.sleep(pause)

    async def aresult(self, timeout: float | None = None) -> Any:
        """The async twin of :meth:`result`."""
        import asyncio  # here, not at import: it costs ~40 ms to `import pregelkit.func`

        deadline = None if timeout is None else time.monotonic() + timeout
        pause = POLL_SECONDS[0]
        while True:
            row = self._row(await self.saver.arun_queue(self._plan, "run result"))
            if row[3] in FINISHED:
                return self._outcome(row)
            pause = self._pause(deadline, pause, row[3])
            await asyncio.sleep(pause)

    def _pause(self, deadline: float | None, pause: float, status: str) -> float:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"run {self.run_id!r} of thread {self.thread_id!r} is still {status}; "
                    "it goes on: call result() again to keep waiting"
                )
            return min(pause * 2, POLL_SECONDS[1], left)
        return min(pause * 2, POLL_SECONDS[1])

    def _outcome(self, row: tuple[Any, ...]) -> Any:
        status, error = row[3], row[10]
        if status == FAILED:
            raise RunFailedError(self.thread_id, self.run_id, str(error))
        if status == CANCELLED:
            replaced = _replaced_by(error)
            raise RunCancelledError(self.thread_id, replaced_by=replaced)
        rtype, rvalue = row[_runqueue.RESULT_AT], row[_runqueue.RESULT_AT + 1]
        if rtype is None:
            return None
        return self.saver.serde.loads_typed((str(rtype), bytes(rvalue)))
