"""``/runs/crons``: LangGraph's crons on the fleet's schedules.

A cron is a schedule of the fleet (``pregelkit.checkpoint.schedules``, its
id the cron id), fired by the workers as every schedule is: each firing is
a run on the queue, run by any worker (the in-process one, or ``pregelkit
worker`` processes with ``--no-workers``); there is no second scheduler.
What the API alone reads (owner, assistant, payload, metadata) is the
cron's row (``_cronrows``).

- A thread cron (``crons.create_for_thread``) runs on its thread, one run
  at a time: a firing that finds the thread's run still active is skipped,
  as LangGraph's server treats a run on a busy thread by default
  (``multitask_strategy="reject"``); the other strategies are refused.
- A stateless cron (``crons.create``) runs each firing on a new thread,
  ``schedule:<cron id>:<slot time>`` as every schedule's slots: not a server
  thread (the SDK does not list it), as LangGraph's default
  ``on_run_completed="delete"`` leaves none; retention prunes it.
- A missed firing (every worker down) fires once when a worker is back
  (catchup ``latest``); ``schedule`` is read in ``timezone`` (UTC if none).
- A run gets the cron's ``input`` (``None`` if none), and ``schedule_id``
  and ``scheduled_at`` in its ``config["configurable"]``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.checkpoint.schedules import Schedule, declare_schedule, schedules
from pregelkit.errors import InvalidScheduleError
from pregelkit.server._api import Api, api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import Body, check_uuid
from pregelkit.server._cronrows import CronRow, forget
from pregelkit.server._errors import ApiError, not_found
from pregelkit.server._json import Json, has_metadata, iso
from pregelkit.server._schemas import check_input
from pregelkit.server._threads import thread_row

if TYPE_CHECKING:
    from pregelkit.server._config import Served

NOT_SERVED = ("interrupt_before", "interrupt_after", "webhook", "context", "checkpoint")
"""Options that would change what a firing does and are not served yet:
refused with 422 naming them, as ``runs.create`` refuses them."""
PAYLOAD = ("assistant_id", "schedule", "input", "timezone", "end_time", "on_run_completed",
           "multitask_strategy")  # fmt: skip
"""What a cron's ``payload`` keeps of the body it was created (or updated) with."""
FIELDS = ("cron_id", "assistant_id", "thread_id", "end_time", "schedule", "timezone",
          "created_at", "updated_at", "user_id", "payload", "next_run_date", "metadata",
          "on_run_completed", "enabled")  # fmt: skip
SORTS = ("cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date",
         "end_time")  # fmt: skip
CATCHUP = "latest"
"""A firing missed while no worker ran fires once when one is back."""


def view(row: CronRow, schedule: Schedule) -> dict[str, Any]:
    """A cron as the SDK's ``Cron``."""
    payload = row.payload
    fires = None if schedule.paused else schedule.next_at  # a paused cron has no next run
    return {
        "cron_id": row.cron_id,
        "assistant_id": row.assistant_id,
        "thread_id": row.thread_id,
        "on_run_completed": None if row.thread_id else payload.get("on_run_completed", "delete"),
        "end_time": None if schedule.end_at is None else schedule.end_at.isoformat(),
        "schedule": payload["schedule"],
        "timezone": payload.get("timezone"),
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "payload": payload,
        "user_id": None,
        "next_run_date": None if fires is None else fires.isoformat(),
        "metadata": row.metadata,
        "enabled": not schedule.paused,
    }


def _checked(body: Body, thread_id: str | None) -> dict[str, Any]:
    """The body's payload fields, each checked (a thread cron's strategy,
    a stateless cron's ``on_run_completed``); what is not served refused."""
    for name in NOT_SERVED:
        if body.any(name) not in (None, [], {}):
            raise ApiError(422, f"{name!r} is not served yet for crons: leave it out")
    if body.obj("config", {}):
        raise ApiError(422, "'config' is not served yet for crons: leave it out")
    strategy = body.choice("multitask_strategy", ("reject", "interrupt", "rollback", "enqueue"))
    if thread_id is not None and strategy not in (None, "reject"):
        raise ApiError(
            422,
            f"multitask_strategy {strategy!r} is not served for crons: a firing that finds its "
            "thread's run still active is skipped ('reject', LangGraph's default)",
        )
    completed = body.choice("on_run_completed", ("delete", "keep"))
    if thread_id is None and completed == "keep":
        raise ApiError(
            422,
            "on_run_completed 'keep' is not served yet: a stateless cron's threads are not "
            "kept as server threads; create a thread and use crons.create_for_thread",
        )
    body.text("schedule")
    body.text("timezone")
    body.text("end_time")
    return {k: body.data[k] for k in PAYLOAD if body.data.get(k) is not None}


def _end(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ApiError(422, f"end_time must be an ISO 8601 time, got {text[:80]!r}") from None


def _declare(
    api: Api, cron_id: str, graph_id: str, thread_id: str | None, payload: dict[str, Any]
) -> Schedule:
    """Record (or update) the cron's schedule; a bad schedule, timezone or
    end time is a 422 that says which."""
    try:
        return declare_schedule(
            api.saver,
            graph_id,
            cron_id,
            cron=payload["schedule"],
            every=None,
            input=payload.get("input"),
            timezone=payload.get("timezone") or "UTC",
            catchup=CATCHUP,
            start_at=None,
            end_at=_end(payload.get("end_time")),
            thread_id=thread_id,
            slot_input=False,
        )
    except (InvalidScheduleError, ImportError) as exc:
        raise ApiError(422, f"schedule {payload['schedule']!r}: {exc}") from None


def _check_input(api: Api, graph_id: str, payload: dict[str, Any]) -> None:
    """The cron's input against the workflow's input schema, as a run's is:
    a firing must not fail every time on an input refused now."""
    if (value := payload.get("input")) is not None:
        check_input(api.graphs[graph_id].get_input_jsonschema(), value)


def _create(api: Api, body: Body, owner: str | None, thread_id: str | None) -> dict[str, Any]:
    if body.text("schedule") is None:
        raise ApiError(422, "field 'schedule' is required (a cron expression, e.g. '0 3 * * *')")
    assistant_id = body.text("assistant_id")
    if assistant_id is None:
        raise ApiError(422, "field 'assistant_id' is required (an assistant id or graph id)")
    payload = _checked(body, thread_id)
    served = api.assistant(assistant_id)
    _check_input(api, served.graph_id, payload)
    metadata = body.obj("metadata", {})
    if thread_id is not None:
        known = thread_row(api, thread_id, owner).metadata.get("graph_id")
        if known is not None and known != served.graph_id:
            raise ApiError(
                409,
                f"thread {thread_id!r} holds the state of graph {known!r}, not "
                f"{served.graph_id!r}: schedule that graph's assistant on it, or another thread",
            )
        api.records.update(
            thread_id, {"graph_id": served.graph_id, "assistant_id": served.assistant_id}, owner
        )
    cron_id = str(uuid.uuid4())
    # the row first: a schedule never fires for a cron nobody owns
    row = api.crons.create(cron_id, owner, served.assistant_id, thread_id, payload, metadata)
    try:
        schedule = _declare(api, cron_id, served.graph_id, thread_id, payload)
        if body.flag("enabled", True) is False:
            schedule = schedule.pause()
    except BaseException:
        api.crons.delete(cron_id)
        raise
    return view(row, schedule)


async def create(request: Request) -> Response:
    """``crons.create``: a stateless cron, each firing on a new thread."""
    api = api_of(request)
    body = await api.body(request)
    return Json(await call(_create, api, body, owner_of(request), None))


async def create_for_thread(request: Request) -> Response:
    """``crons.create_for_thread``: a cron whose firings run on the thread."""
    api = api_of(request)
    tid = check_uuid(request.path_params["thread_id"], "thread_id")
    body = await api.body(request)
    return Json(await call(_create, api, body, owner_of(request), tid))


def _selected(api: Api, body: Body, owner: str | None) -> list[dict[str, Any]]:
    """``owner``'s crons that a search or count body selects, as ``Cron``s.
    A cron whose schedule an operator deleted (``pregelkit schedules
    delete``) fires no more: it is not listed."""
    assistant = body.text("assistant_id")
    if assistant is not None:
        found = [s.assistant_id for s in api.served if assistant in (s.assistant_id, s.graph_id)]
        assistant = found[0] if found else assistant
    thread_id = body.uuid("thread_id")
    enabled = body.flag("enabled")
    metadata = body.obj("metadata", {})
    rows = api.crons.owned(owner, thread_id)
    by_id = {s.schedule_id: s for s in schedules(api.saver)} if rows else {}
    crons = [view(r, by_id[r.cron_id]) for r in rows if r.cron_id in by_id]
    return [
        c
        for c in crons
        if assistant in (None, c["assistant_id"])
        and enabled in (None, c["enabled"])
        and has_metadata(c["metadata"], metadata)
    ]


async def search(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    limit = body.integer("limit", 10, low=1, high=1000)
    offset = body.integer("offset", 0, high=1_000_000)
    sort_by = body.choice("sort_by", SORTS, "created_at")
    descending = body.choice("sort_order", ("asc", "desc"), "desc") == "desc"
    select = body.labels("select")
    if select is not None and (unknown := sorted(set(select) - set(FIELDS))):
        raise ApiError(422, f"select names unknown fields {unknown}: pick from {', '.join(FIELDS)}")
    owner = owner_of(request)
    crons = await call(_selected, api, body, owner)
    # by the field, then by id (ties in a stable order); a cron without the field last
    valued = sorted(
        (c for c in crons if c[sort_by] is not None),
        key=lambda c: (c[sort_by], c["cron_id"]),
        reverse=descending,
    )
    page = [*valued, *(c for c in crons if c[sort_by] is None)][offset : offset + limit]
    if select:
        page = [{k: c[k] for k in select} for c in page]
    return Json(page)


async def count(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    return Json(len(await call(_selected, api, body, owner_of(request))))


def _owned(api: Api, cron_id: str, owner: str | None) -> CronRow:
    row = api.crons.get(check_uuid(cron_id, "cron_id"), owner)
    if row is None:
        raise not_found("cron", cron_id)
    return row


def _served(api: Api, row: CronRow) -> Served:
    """The cron's workflow; a 409 if this server no longer serves it (its
    graph left the config): the cron is there, it just cannot fire here."""
    try:
        return api.assistant(row.assistant_id)
    except ApiError:
        raise ApiError(
            409,
            f"cron {row.cron_id!r} runs assistant {row.assistant_id!r}, which this server no "
            "longer serves (its graph left the config): it does not fire until a server "
            "serving that graph is back; delete the cron, or serve the graph again",
        ) from None


async def update(request: Request) -> Response:
    """``crons.update``: what the body gives replaces the cron's (``metadata``
    too); ``end_time: null`` clears it; ``enabled`` pauses or resumes its
    schedule (resumed, it fires from its next slot after now)."""
    api = api_of(request)
    body = await api.body(request)
    cron_id = request.path_params["cron_id"]
    owner = owner_of(request)

    def update() -> dict[str, Any]:
        row = _owned(api, cron_id, owner)
        given = _checked(body, row.thread_id)
        given.pop("assistant_id", None)
        given.pop("multitask_strategy", None)
        payload = {**row.payload, **given}
        if "end_time" in body.data and body.data["end_time"] is None:
            payload.pop("end_time", None)
        served = _served(api, row)
        _check_input(api, served.graph_id, payload)
        schedule = _declare(api, row.cron_id, served.graph_id, row.thread_id, payload)
        enabled = body.flag("enabled")
        if enabled is not None:
            schedule = schedule.resume() if enabled else schedule.pause()
        metadata = body.obj("metadata", row.metadata)
        return view(api.crons.update(row.cron_id, payload, metadata), schedule)

    return Json(await call(update))


async def delete(request: Request) -> Response:
    """``crons.delete``: it fires no more; runs it queued already still run."""
    api = api_of(request)
    cron_id = request.path_params["cron_id"]
    owner = owner_of(request)

    def delete() -> None:
        forget(api.saver, api.crons, _owned(api, cron_id, owner).cron_id)

    await call(delete)
    return Response(status_code=204)


routes = [
    Route("/runs/crons", create, methods=["POST"]),
    Route("/runs/crons/search", search, methods=["POST"]),
    Route("/runs/crons/count", count, methods=["POST"]),
    Route("/runs/crons/{cron_id}", update, methods=["PATCH"]),
    Route("/runs/crons/{cron_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/crons", create_for_thread, methods=["POST"]),
]
