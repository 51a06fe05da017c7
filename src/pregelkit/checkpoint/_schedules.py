"""Schedules' SQL and decisions, written once for SQLite and PostgreSQL.

A schedule is a row of ``pregelkit_schedules``; each slot it fired is a row
of ``pregelkit_schedule_slots`` whose key is (schedule id, slot time), and
its run's thread is derived from the two (:func:`thread_of`), or is the
schedule's own ``thread_id`` when it has one (``pregelkit serve``'s thread
crons): then its slots run one at a time, and a slot that finds the thread's
run still active is skipped, not queued behind it. Workers fire
due slots themselves, no leader: :func:`fire` locks the due schedule rows
(PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so two workers fire different
schedules; SQLite: ``BEGIN IMMEDIATE`` serializes), inserts a slot row per
slot (``ON CONFLICT DO NOTHING``), queues a run per slot inserted through
``_runqueue.submit`` and moves ``next_at`` on, in one transaction: a slot
is fired once, whatever dies when. Which slots fire is ``_slots.due_slots``.

Times here are the process clock's (``_runqueue.due_now``), so
``pregelkit.testing.FakeClock`` drives schedules in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pregelkit.checkpoint import _runqueue, _slots
from pregelkit.checkpoint._runqueue import Dialect, RunPlan
from pregelkit.checkpoint._slots import Spec
from pregelkit.errors import InvalidScheduleError, ScheduleNotFoundError

__all__ = [
    "COLUMNS",
    "Failed",
    "Fired",
    "declare",
    "delete",
    "due",
    "fire",
    "get",
    "list_schedules",
    "set_paused",
    "thread_of",
    "trigger",
]

COLUMNS = """schedule_id, workflow, cron, every_seconds, timezone, catchup, start_at, end_at,
    paused, next_at, last_slot_at, created_at, updated_at, input_type, input, thread_id"""
"""A schedule's row as the plans read it (``Schedule.from_row``)."""

Fired = tuple[str, float, str | None]
"""(schedule id, slot time, run id) of a slot fired; run id ``None``: the
slot was skipped, its schedule's own thread still running the last one."""
Failed = tuple[str, str]
"""(schedule id, why) of a due schedule this process cannot compute (a cron
schedule where croniter is not installed): left due for another worker."""
Dumps = Callable[[Any], tuple[str, bytes]]
"""The saver's ``serde.dumps_typed``: how a run's input and config are stored."""


def thread_of(schedule_id: str, slot: float) -> str:
    """The thread of a slot's run: ``schedule:<id>:<UTC ISO slot>``."""
    return f"schedule:{schedule_id}:{_slots.iso(slot)}"


def _for_update(d: Dialect) -> str:
    return " FOR UPDATE" if d.name == "postgres" else ""


def spec_of(row: Sequence[Any]) -> Spec:
    """A schedule's spec, from its ``COLUMNS`` row."""
    return Spec(row[2], row[3], row[4], row[6], row[7])


def declare(
    d: Dialect,
    schedule_id: str,
    workflow: str,
    spec: Spec,
    catchup: str,
    input: tuple[str, bytes],
    now: float,
    thread_id: str | None = None,
) -> RunPlan[tuple[Any, ...]]:
    """Record the schedule, or update the one of that id: a paused one stays
    paused (an operator's pause outlives a deploy that declares it again);
    ``next_at`` is kept while the slots are the same (declaring again fires
    and skips nothing), and is the first slot after now (and after the last
    one fired) when they changed. ``thread_id``: the one thread every slot
    runs on (``None``: each on its own). Returns its row."""
    for _ in range(2):
        row = yield d.q(
            f"SELECT {COLUMNS} FROM pregelkit_schedules WHERE schedule_id = ?{_for_update(d)}",
            (schedule_id,),
            "one",
        )
        if row is None:
            inserted = yield d.q(
                f"""
                INSERT INTO pregelkit_schedules (schedule_id, workflow, cron, every_seconds,
                    timezone, catchup, start_at, end_at, paused, next_at, created_at, updated_at,
                    input_type, input, thread_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (schedule_id) DO NOTHING
                RETURNING {COLUMNS}
                """,
                (
                    schedule_id,
                    workflow,
                    spec.cron,
                    spec.every,
                    spec.timezone,
                    catchup,
                    spec.start_at,
                    spec.end_at,
                    spec.next_slot(now),
                    now,
                    now,
                    *input,
                    thread_id,
                ),
                "one",
            )
            if inserted is None:  # declared at the same moment elsewhere: update that one
                continue
            return tuple(inserted)
        if row[1] != workflow:
            raise InvalidScheduleError(
                f"schedule {schedule_id!r} belongs to workflow {row[1]!r}, not {workflow!r}: "
                "give this one another id, or delete that one first "
                f"(`pregelkit schedules delete {schedule_id} --db URL`)"
            )
        next_at = row[9]
        if spec_of(row) != spec:
            last = row[10]
            next_at = spec.next_slot(now if last is None else max(now, last))
        updated = yield d.q(
            f"""
            UPDATE pregelkit_schedules SET cron = ?, every_seconds = ?, timezone = ?,
                catchup = ?, start_at = ?, end_at = ?, next_at = ?, updated_at = ?,
                input_type = ?, input = ?, thread_id = ?
            WHERE schedule_id = ? RETURNING {COLUMNS}
            """,
            (
                spec.cron,
                spec.every,
                spec.timezone,
                catchup,
                spec.start_at,
                spec.end_at,
                next_at,
                now,
                *input,
                thread_id,
                schedule_id,
            ),
            "one",
        )
        return tuple(updated)
    raise RuntimeError(f"could not declare schedule {schedule_id!r}: try again")


def get(d: Dialect, schedule_id: str) -> RunPlan[tuple[Any, ...]]:
    row = yield d.q(
        f"SELECT {COLUMNS} FROM pregelkit_schedules WHERE schedule_id = ?", (schedule_id,), "one"
    )
    if row is None:
        raise ScheduleNotFoundError(schedule_id)
    return tuple(row)


def list_schedules(d: Dialect, workflow: str | None) -> RunPlan[list[tuple[Any, ...]]]:
    where, params = ("WHERE workflow = ? ", (workflow,)) if workflow else ("", ())
    rows = yield d.q(
        f"SELECT {COLUMNS} FROM pregelkit_schedules {where}ORDER BY schedule_id", params, "all"
    )
    return [tuple(row) for row in rows]


def set_paused(d: Dialect, schedule_id: str, paused: bool, now: float) -> RunPlan[tuple[Any, ...]]:
    """Pause, or resume: a resumed schedule fires from its next slot after
    now (the slots while it was paused are not caught up, whatever its
    ``catchup``). Pausing a paused one (or resuming a running one) changes
    nothing."""
    row = yield d.q(
        f"SELECT {COLUMNS} FROM pregelkit_schedules WHERE schedule_id = ?{_for_update(d)}",
        (schedule_id,),
        "one",
    )
    if row is None:
        raise ScheduleNotFoundError(schedule_id)
    if bool(row[8]) == paused:
        return tuple(row)
    next_at = row[9]
    if not paused:
        last = row[10]
        next_at = spec_of(row).next_slot(now if last is None else max(now, last))
    updated = yield d.q(
        f"UPDATE pregelkit_schedules SET paused = ?, next_at = ?, updated_at = ? "
        f"WHERE schedule_id = ? RETURNING {COLUMNS}",
        (int(paused), next_at, now, schedule_id),
        "one",
    )
    return tuple(updated)


def delete(d: Dialect, schedule_id: str) -> RunPlan[None]:
    """Forget the schedule. Its runs already queued still run; its slot rows
    stay (they keep a schedule declared again under this id from firing a
    slot twice), for retention to prune."""
    row = yield d.q(
        "DELETE FROM pregelkit_schedules WHERE schedule_id = ? RETURNING schedule_id",
        (schedule_id,),
        "one",
    )
    if row is None:
        raise ScheduleNotFoundError(schedule_id)


def trigger(d: Dialect, schedule_id: str, now: float, dumps: Dumps) -> RunPlan[tuple[str, str]]:
    """Queue a run of the schedule now, paused or not, on a thread of its
    own (``schedule:<id>:trigger:<now>``), or on the schedule's thread if it
    has one (its active run, if it has one: nothing is queued behind it):
    (run id, thread id). No slot is used up: the schedule fires as before."""
    row = yield from get(d, schedule_id)
    thread = row[15] or f"schedule:{schedule_id}:trigger:{_slots.iso(now)}"
    run_id, _ = yield from _queue(d, row, thread, now, dumps)
    return run_id, thread


def _queue(
    d: Dialect, row: Sequence[Any], thread: str, slot: float, dumps: Dumps
) -> RunPlan[tuple[str, bool]]:
    """Queue the run of one slot: (run id, True), or the thread's active run
    and False (nothing queued). Its config carries ``schedule_id`` and
    ``scheduled_at`` (ISO 8601 UTC); a schedule declared with no input
    gives each run its slot time (the ``scheduled_at`` string) as input."""
    scheduled_at = _slots.iso(slot)
    config = {
        "configurable": {"thread_id": thread, "schedule_id": row[0], "scheduled_at": scheduled_at}
    }
    input = dumps(scheduled_at) if row[13] is None else (str(row[13]), bytes(row[14]))
    return (yield from _runqueue.submit(d, thread, str(row[1]), 0, input, dumps(config)))


_DUE = """
    FROM pregelkit_schedules
    WHERE workflow IN (%s) AND paused = 0 AND next_at IS NOT NULL AND next_at <= ?
"""


def due(d: Dialect, workflows: Sequence[str], now: float) -> RunPlan[bool]:
    """Whether a schedule of ``workflows`` has a slot due: what a worker
    asks on its loop (one indexed read, no transaction); only then does it
    :func:`fire`."""
    names = ", ".join("?" for _ in workflows)
    row = yield d.q(f"SELECT 1 {_DUE % names} LIMIT 1", (*workflows, now), "one")
    return row is not None


def fire(
    d: Dialect,
    workflows: Sequence[str],
    now: float,
    dumps: Dumps,
    limit: int = 10,
) -> RunPlan[tuple[list[Fired], list[Failed]]]:
    """Fire the due slots of up to ``limit`` schedules of ``workflows`` (the
    earliest due first): the slots ``catchup`` says, a run queued for each
    slot not fired before. A schedule whose slots cannot be computed here
    is left as it is; the others fire."""
    names = ", ".join("?" for _ in workflows)
    rows = yield d.q(
        f"SELECT {COLUMNS} {_DUE % names} ORDER BY next_at LIMIT ?{{skip_locked}}",
        (*workflows, now, limit),
        "all",
    )
    fired: list[Fired] = []
    failed: list[Failed] = []
    for row in rows:
        schedule_id = str(row[0])
        try:
            slots, next_at = _slots.due_slots(spec_of(row), float(row[9]), now, str(row[5]))
        except Exception as exc:
            failed.append((schedule_id, f"{type(exc).__name__}: {exc}"))
            continue
        for slot in slots:
            thread = row[15] or thread_of(schedule_id, slot)
            new = yield d.q(
                "INSERT INTO pregelkit_schedule_slots (schedule_id, slot_at, thread_id, "
                "fired_at) VALUES (?, ?, ?, ?) ON CONFLICT (schedule_id, slot_at) DO NOTHING "
                "RETURNING slot_at",
                (schedule_id, slot, thread, now),
                "one",
            )
            if new is None:  # fired before (a clock that went back, a re-declared schedule)
                continue
            run_id, queued = yield from _queue(d, row, thread, slot, dumps)
            if not queued:  # its own thread still runs the last slot: this one is skipped
                fired.append((schedule_id, slot, None))
                continue
            yield d.q(
                "UPDATE pregelkit_schedule_slots SET run_id = ? "
                "WHERE schedule_id = ? AND slot_at = ?",
                (run_id, schedule_id, slot),
            )
            fired.append((schedule_id, slot, run_id))
        yield d.q(
            "UPDATE pregelkit_schedules SET next_at = ?, updated_at = ?, "
            "last_slot_at = COALESCE(?, last_slot_at) WHERE schedule_id = ?",
            (next_at, now, slots[-1] if slots else None, schedule_id),
        )
    return fired, failed
