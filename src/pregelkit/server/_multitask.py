"""``multitask_strategy``: what a run created on a busy thread does, as on
LangGraph's server: ``enqueue`` (the default) waits for the thread's earlier
runs, ``reject`` is refused, ``interrupt`` cancels them and starts from
where they stopped, ``rollback`` cancels and deletes them (their checkpoints
too) and starts from where the thread was before them.

pregelkit's queue holds one active run per thread (``pregelkit_runs_active``,
what makes ``wf.submit`` idempotent), so an enqueued run cannot be a second
``queued`` row, and a named queue's ``key_concurrency`` (which counts rows
that are running) cannot order runs the index refuses. An enqueued run is
a row of its own status, ``pending``, that no worker claims; the server
processes promote a thread's oldest pending run to ``queued`` once the
thread has no active run, in one statement the unique index guards: two
promoters (several server processes) never start two runs of a thread, and
runs start in the order they were created, whichever process created them
and whichever workers run them. Pending rows are in the database, so a
server stopped (SIGTERM) with runs enqueued leaves them to the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from pregelkit._internal._ids import uuid6
from pregelkit.checkpoint import _parts, _runqueue
from pregelkit.checkpoint._runqueue import IS_ACTIVE, Dialect, RunPlan
from pregelkit.checkpoint.runs import POLL_SECONDS, RunHandle, RunRecord
from pregelkit.server._api import Api, call
from pregelkit.server._errors import ApiError

log = logging.getLogger("pregelkit.server")

PENDING = "pending"
"""An enqueued run's status until its thread's earlier runs have ended."""
STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")
DEFAULT_STRATEGY = "enqueue"
"""LangGraph's server's default ("Enqueue is the default double texting strategy")."""
STOP_WAIT_SECONDS = 30.0
"""How long ``interrupt`` and ``rollback`` wait for the active run to stop."""
ATTEMPTS = 5
"""How often ``interrupt``/``rollback`` cancel again when another create
took the thread between their cancel and their submit."""
PROMOTE_SECONDS = (0.1, 1.0)
"""The promoter's pause while runs are pending, and when none is known."""
PROMOTE_BATCH = 100
"""Threads one promotion reads at most."""
_IN_FLIGHT = f"({IS_ACTIVE} OR status = 'pending')"


def queue_plan(
    d: Dialect,
    thread_id: str,
    workflow: str,
    input: tuple[str, bytes],
    config: tuple[str, bytes],
    enqueue: bool,
    start_at: float | None = None,
) -> RunPlan[tuple[Any, ...] | None]:
    """Queue a run of ``thread_id``: its row, or ``None`` when the thread has
    a run in flight and ``enqueue`` is false. Enqueued behind a run in
    flight, it is ``pending``; it is queued at once only when no run of the
    thread is pending (a run created later never starts before one created
    earlier). ``start_at`` (``after_seconds``): not before then, the queue's
    time (``_runqueue.due_now``): see ``_hold``."""
    # a run pending (not yet promoted) is in flight too: none jumps ahead of it
    held = yield d.q(
        "SELECT 1 FROM pregelkit_runs WHERE thread_id = ? AND status = 'pending' LIMIT 1",
        (thread_id,),
        "one",
    )
    if held is None:
        run_id, created = yield from _runqueue.submit(d, thread_id, workflow, 0, input, config)
        if created:
            if start_at is not None:
                yield from _hold(d, run_id, start_at)
            return (yield from _runqueue.get(d, run_id))
    if not enqueue:
        return None
    run_id = uuid6()
    yield d.q(
        "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
        "input, config_type, config, due_at, created_at, updated_at) "
        "VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?, {now}, {now})",
        (run_id, thread_id, workflow, *input, *config, start_at),
    )
    return (yield from _runqueue.get(d, run_id))


def _hold(d: Dialect, run_id: str, start_at: float) -> RunPlan[None]:
    """A run just queued starts at ``start_at``: it is held as a durable
    sleep that has not started (``sleeping``, due then, no attempt yet),
    which the workers' claim takes once due and starts from its input. In
    the transaction that queued it, so no worker takes it before."""
    yield d.q(
        "UPDATE pregelkit_runs SET status = 'sleeping', due_at = ?, wait_kind = 'sleep' "
        "WHERE run_id = ? AND status = 'queued'",
        (start_at, run_id),
    )


def in_flight(d: Dialect, thread_id: str) -> RunPlan[list[tuple[str, str]]]:
    """The thread's runs queued, running, sleeping, waiting or pending:
    (run id, status), oldest first."""
    rows = yield d.q(
        f"SELECT run_id, status FROM pregelkit_runs WHERE thread_id = ? AND {_IN_FLIGHT} "
        "ORDER BY created_at, run_id",
        (thread_id,),
        "all",
    )
    return [(str(r), str(s)) for r, s in rows]


def cancel_pending(d: Dialect, run_ids: Sequence[str]) -> RunPlan[list[str]]:
    """Cancel those of ``run_ids`` that are pending (they never start);
    the ones cancelled."""
    if not run_ids:
        return []
    marks = ", ".join("?" for _ in run_ids)
    rows = yield d.q(
        "UPDATE pregelkit_runs SET status = 'cancelled', error = 'cancelled before it started', "
        f"finished_at = {{now}}, updated_at = {{now}} WHERE run_id IN ({marks}) "
        "AND status = 'pending' RETURNING run_id",
        tuple(run_ids),
        "all",
    )
    return [str(r[0]) for r in rows]


def promote(d: Dialect) -> RunPlan[tuple[list[str], bool]]:
    """Queue the oldest pending run of each thread with no active run: the
    runs queued, and whether runs stay pending. One ``UPDATE`` per thread
    names the oldest pending run and checks the thread has no active run:
    a concurrent promoter finds it no longer pending (PostgreSQL re-reads
    the row once the other commits), and the unique index refuses a second
    active run in any case."""
    threads = yield d.q(
        "SELECT DISTINCT p.thread_id FROM pregelkit_runs AS p WHERE p.status = 'pending' "
        "AND NOT EXISTS (SELECT 1 FROM pregelkit_runs AS a WHERE a.thread_id = p.thread_id "
        f"AND a.{IS_ACTIVE}) LIMIT ?",
        (PROMOTE_BATCH,),
        "all",
    )
    queued = []
    for (thread_id,) in threads:
        row = yield d.q(
            # an enqueued run given a start time (``queue_plan``'s due_at) is held till then
            "UPDATE pregelkit_runs SET status = CASE WHEN due_at IS NULL THEN 'queued' "
            "ELSE 'sleeping' END, wait_kind = CASE WHEN due_at IS NULL THEN NULL "
            "ELSE 'sleep' END, updated_at = {now} WHERE run_id = ("
            "SELECT run_id FROM pregelkit_runs WHERE thread_id = ? AND status = 'pending' "
            "ORDER BY created_at, run_id LIMIT 1) AND status = 'pending' AND NOT EXISTS ("
            f"SELECT 1 FROM pregelkit_runs AS a WHERE a.thread_id = ? AND a.{IS_ACTIVE}) "
            "RETURNING run_id",
            (thread_id, thread_id),
            "one",
        )
        if row is not None:
            queued.append(str(row[0]))
            # the thread's run before may have been cancelled: its mark is not this run's
            yield d.q(
                "DELETE FROM pregelkit_thread_control WHERE thread_id = ? AND mark = 'cancelled'",
                (thread_id,),
            )
    left = yield d.q("SELECT 1 FROM pregelkit_runs WHERE status = 'pending' LIMIT 1", (), "one")
    return queued, left is not None


def forget_run(d: Dialect, thread_id: str, run_id: str) -> RunPlan[None]:
    """``rollback``: delete an ended run, its stream parts and what it saved:
    its checkpoints (their metadata names it), their writes, and the blobs
    no checkpoint left references. Only its own: a run that started on the
    thread meanwhile keeps what it saved."""
    run_of = (
        "json_extract(metadata_json, '$.pregelkit_run')"
        if d.name == "sqlite"
        else "metadata_json ->> 'pregelkit_run'"
    )
    pairs = (
        "json_each(c.channel_versions)"
        if d.name == "sqlite"
        else "jsonb_each_text(c.channel_versions)"
    )
    its = f"SELECT checkpoint_id FROM pregelkit_checkpoints WHERE thread_id = ? AND {run_of} = ?"
    yield d.q(
        f"DELETE FROM pregelkit_writes WHERE thread_id = ? AND checkpoint_id IN ({its})",
        (thread_id, thread_id, run_id),
    )
    yield d.q(
        f"DELETE FROM pregelkit_checkpoints WHERE thread_id = ? AND {run_of} = ?",
        (thread_id, run_id),
    )
    yield d.q(
        "DELETE FROM pregelkit_blobs WHERE thread_id = ? AND NOT EXISTS ("
        f"SELECT 1 FROM pregelkit_checkpoints AS c, {pairs} AS v "
        "WHERE c.thread_id = pregelkit_blobs.thread_id "
        "AND c.checkpoint_ns = pregelkit_blobs.checkpoint_ns "
        "AND v.key = pregelkit_blobs.channel AND v.value = pregelkit_blobs.version)",
        (thread_id,),
    )
    yield from _parts.delete(d, [run_id])
    yield d.q("DELETE FROM pregelkit_runs WHERE run_id = ?", (run_id,))


def stop_runs(api: Api, thread_id: str, rollback: bool) -> None:
    """``interrupt``/``rollback``: cancel the thread's runs in flight (the
    pending ones first, so none is promoted meanwhile), wait for the active
    one to stop (at its next task boundary) and, for ``rollback``, delete
    them and what they saved."""
    runs = api.saver.run_queue(partial(in_flight, thread_id=thread_id), "runs")
    ids = [r for r, _ in runs]
    api.saver.run_queue(partial(cancel_pending, run_ids=ids), "cancel")
    for run_id, status in runs:
        if status != PENDING:
            wait_stopped(RunHandle(api.saver, run_id, thread_id))
    if rollback:
        for run_id in ids:
            api.saver.run_queue(partial(forget_run, thread_id=thread_id, run_id=run_id), "rollback")


def roll_back(api: Api, handle: RunHandle) -> None:
    """``runs.cancel(action="rollback")``: cancel the run, wait for it to
    stop, then delete it and what it saved. A run that has ended is not
    rolled back (409): the runs after it built on what it saved."""
    pending = api.saver.run_queue(partial(cancel_pending, run_ids=[handle.run_id]), "cancel")
    if not pending:
        status = handle.status()
        if status in _runqueue.FINISHED:
            raise ApiError(
                409,
                f"run {handle.run_id!r} has ended ({status}): only a run in flight is rolled "
                "back; delete its record with runs.delete",
            )
        wait_stopped(handle)
    plan = partial(forget_run, thread_id=handle.thread_id, run_id=handle.run_id)
    api.saver.run_queue(plan, "rollback")


def wait_stopped(handle: RunHandle) -> None:
    """Cancel the run and wait until it has ended (409 past
    ``STOP_WAIT_SECONDS``); a run gone meanwhile (another create's
    ``rollback`` deleted it) has ended too."""
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    pause = POLL_SECONDS[0]
    try:
        handle.cancel()
        while handle.status() in _runqueue.ACTIVE:
            if time.monotonic() > deadline:
                raise ApiError(
                    409,
                    f"thread {handle.thread_id!r}: its run {handle.run_id!r} was cancelled but "
                    f"has not stopped within {STOP_WAIT_SECONDS:.0f} s (a task still running): "
                    "try again",
                )
            time.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS[1])
    except LookupError:
        return


def queue(
    api: Api,
    thread_id: str,
    workflow: str,
    input: Any,
    config: dict[str, Any],
    strategy: str,
    after_seconds: float | None = None,
) -> tuple[RunHandle, RunRecord]:
    """Queue the run under ``strategy`` (the thread's owner checked): its
    handle, and its record as queued (a racing ``rollback`` may delete it
    at once). ``after_seconds``: it starts no sooner."""
    serde = api.saver.serde
    plan = partial(
        queue_plan,
        thread_id=thread_id,
        workflow=workflow,
        input=serde.dumps_typed(input),
        config=serde.dumps_typed(config),
        enqueue=strategy == "enqueue",
        start_at=None if after_seconds is None else _runqueue.due_now(None) + after_seconds,
    )
    for _ in range(ATTEMPTS):
        if strategy in ("interrupt", "rollback"):
            stop_runs(api, thread_id, strategy == "rollback")
        row = api.saver.run_queue(plan, "submit")
        if row is not None:
            api.wake()
            if strategy == "enqueue":
                api.promote()
            record = RunRecord.from_row(row)
            return RunHandle(api.saver, record.run_id, thread_id), record
        if strategy == "reject":
            raise ApiError(
                409,
                f"thread {thread_id!r} has a run queued or running (multitask_strategy "
                "'reject'): wait for it (runs.join), cancel it, or ask for 'enqueue' or "
                "'interrupt'",
            )
    raise ApiError(
        409,
        f"thread {thread_id!r}: other runs kept taking it while this one's "
        f"{strategy!r} stopped them: try again",
    )


def start_promoter(api: Api) -> Callable[[], Awaitable[None]]:
    """Start this process's promoter on the running event loop (and point
    ``api.promote`` at it); returns what stops it."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    stopped = False

    def wake() -> None:
        loop.call_soon_threadsafe(woken.set)

    api.promote = wake
    task = loop.create_task(promoter(api, woken, lambda: stopped))

    async def stop() -> None:
        nonlocal stopped
        stopped = True
        woken.set()
        with contextlib.suppress(Exception):
            await task

    return stop


async def promoter(api: Api, woken: asyncio.Event, stopping: Callable[[], bool]) -> None:
    """Promote pending runs until ``stopping()``: every
    ``PROMOTE_SECONDS[0]`` while some are pending, else every
    ``PROMOTE_SECONDS[1]`` or when ``woken`` (a run enqueued here)."""
    pause = PROMOTE_SECONDS[1]
    while not stopping():
        try:
            await asyncio.wait_for(woken.wait(), pause)
        except TimeoutError:
            pass
        woken.clear()
        if stopping():
            return
        try:
            queued, left = await call(api.saver.run_queue, promote, "promote pending runs")
        except Exception:  # a database hiccup: the next round tries again
            log.warning("promoting pending runs failed", exc_info=True)
            continue
        if queued:
            api.wake()
        pause = PROMOTE_SECONDS[0] if left else PROMOTE_SECONDS[1]
