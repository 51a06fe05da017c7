"""``pregelkit schedules [list|pause|resume|delete|trigger] [ID]``: the
schedules of a database (``wf.schedule``), their next fire times, and an
operator's controls over them.

``list`` (the default) prints a table: id, workflow, spec, timezone, state,
the next three fire times in the schedule's timezone, and the last slot
fired. A schedule whose next slot is over a minute past is ``overdue``: no
worker serving its workflow has looked (the table says how to start one).
``trigger`` queues a run now (paused or not) on a thread of its own.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO
from zoneinfo import ZoneInfo

from pregelkit.cli._db import open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command
from pregelkit.cli._render import _print_json, clean

if TYPE_CHECKING:
    from pregelkit.checkpoint.schedules import Schedule

__all__ = ["register"]

ACTIONS = ("list", "pause", "resume", "delete", "trigger")
OVERDUE_SECONDS = 60.0
"""A slot this late has not been seen by any worker (they look every second
or two): the schedule's workflow has no live worker."""


def register(sub: Any, common: argparse.ArgumentParser, tables: argparse.ArgumentParser) -> None:
    p = add_command(
        sub,
        "schedules",
        cmd_schedules,
        [common, tables],
        help="list, pause, resume, delete or trigger schedules",
        description="Without an action (or with `list`): the schedules (wf.schedule) in the "
        "database with their next 3 fire times, in each schedule's timezone. `pause ID` fires "
        "nothing until `resume ID` (which goes on from the next slot, missing none it would "
        "have fired after now); `delete ID` forgets it (runs it queued still run); `trigger "
        "ID` queues a run now, paused or not, on a thread of its own.",
    )
    p.add_argument("action", nargs="?", default="list", choices=ACTIONS, metavar="ACTION",
                   help=f"one of {', '.join(ACTIONS)} (default: list)")  # fmt: skip
    p.add_argument("schedule_id", nargs="?", metavar="ID", help="the schedule (not for list)")
    p.add_argument("--workflow", metavar="NAME", help="list: only this workflow's schedules")


def cmd_schedules(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint.schedules import get_schedule, schedules
    from pregelkit.errors import ScheduleNotFoundError

    if args.action == "list":
        if args.schedule_id is not None:
            raise CliError(
                f"`schedules list` takes no ID (got {args.schedule_id!r}): it lists them all; "
                "--workflow NAME lists one workflow's"
            )
        with open_database(args.db, create=False) as db:
            return _list(schedules(db.saver, args.workflow), args, out)
    if args.schedule_id is None:
        raise CliError(f"`schedules {args.action}` needs the schedule's ID")
    if args.workflow is not None:
        raise CliError("--workflow is for `schedules list`")
    with open_database(args.db, create=False) as db:
        try:
            schedule = get_schedule(db.saver, args.schedule_id)
            return _act(schedule, args, out)
        except ScheduleNotFoundError as exc:
            raise CliError(str(exc), kind="unknown_schedule") from None
        except ImportError as exc:  # resuming a cron schedule computes its next slot
            raise CliError(str(exc)) from None


def _act(schedule: Schedule, args: argparse.Namespace, out: TextIO) -> int:
    action, sid = args.action, schedule.schedule_id
    event: dict[str, Any] = {"event": action, "schedule_id": sid}
    if action == "trigger":
        handle = schedule.trigger()
        event.update(run_id=handle.run_id, thread_id=handle.thread_id)
        line = f"schedule {sid}: run {handle.run_id} queued on thread {handle.thread_id}"
    elif action == "delete":
        schedule.delete()
        line = f"schedule {sid} deleted (runs it queued still run)"
    else:
        schedule = schedule.pause() if action == "pause" else schedule.resume()
        times = _next_times(schedule, 1, {})
        event.update(paused=schedule.paused, next_at=_iso(times[0] if times else None))
        line = f"schedule {sid} {'paused' if schedule.paused else 'resumed'}"
        if times:
            line += f"; next fire at {_local(times[0], schedule.timezone)}"
    if args.json:
        _print_json(event, out)
    else:
        out.write(clean(line) + "\n")
    return 0


def _list(found: list[Schedule], args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.cli._table import print_table

    if args.json:
        for s in found:
            _print_json(_as_json(s, _next_times(s, 3, {})), out)
        return 0
    if not found:
        out.write(
            "no schedules" + (f" of workflow {args.workflow}" if args.workflow else "") + "\n"
        )
        return 0
    from pregelkit._internal._clock import clock
    from pregelkit.cli._commands import _db_args
    from pregelkit.cli._render import shell_join

    now = clock().now()
    rows: list[list[str]] = []
    hints: dict[str, str] = {}
    for s in found:
        times = ", ".join(_local(t, s.timezone) for t in _next_times(s, 3, hints))
        if s.paused:
            state, times = "paused", "-"
        elif s.next_at is None:
            state, times = "ended", "-"
        elif now - s.next_at.timestamp() > OVERDUE_SECONDS:
            state = "overdue"
            command = shell_join(["pregelkit", "worker", f"MODULE:{s.workflow}", *_db_args(args)])
            hints[s.workflow] = f"no worker fires {s.workflow!r}'s schedules: start one: {command}"
        else:
            state = "active"
        last = "-" if s.last_slot_at is None else _local(s.last_slot_at, s.timezone)
        rows.append([s.schedule_id, s.workflow, s.spec, s.timezone, state, times, last])
    print_table(
        ["ID", "WORKFLOW", "SPEC", "TZ", "STATE", "NEXT FIRE TIMES", "LAST FIRED"],
        rows,
        out,
        wide=args.wide,
        cut=("ID", "WORKFLOW", "NEXT FIRE TIMES"),
    )
    for hint in hints.values():
        out.write(clean(hint) + "\n")
    return 0


def _local(when: datetime, tz: str) -> str:
    return when.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def _next_times(s: Schedule, count: int, hints: dict[str, str]) -> list[datetime]:
    """``s``'s next ``count`` fire times; where croniter is not installed, a
    cron schedule's stored next slot only (a listing must not fail on one)."""
    try:
        return s.next_fire_times(count)
    except ImportError as exc:
        hints["croniter"] = f"only each cron schedule's next fire time is shown: {exc}"
        return [] if s.paused or s.next_at is None else [s.next_at]


def _as_json(s: Schedule, times: list[datetime]) -> dict[str, Any]:
    return {
        "schedule_id": s.schedule_id,
        "workflow": s.workflow,
        "cron": s.cron,
        "every_seconds": None if s.every is None else s.every.total_seconds(),
        "timezone": s.timezone,
        "catchup": s.catchup,
        "paused": s.paused,
        "start_at": _iso(s.start_at),
        "end_at": _iso(s.end_at),
        "next_fire_times": [_iso(t) for t in times],
        "last_slot_at": _iso(s.last_slot_at),
    }
