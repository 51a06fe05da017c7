"""``/threads``: create, get, search, count, update, delete, copy, and a thread's state
(now or at a checkpoint), its history, and updates to it.

A thread is a row of its own (``_records``) plus what runs saved in the
checkpoints. The workflow that reads its state is the one its runs used,
named by the ``graph_id`` its metadata gets from its first run (as on
LangGraph's server); a thread no run has touched has an empty state.
Its status: ``busy`` while a run is queued or running, ``interrupted`` when
its last run stopped at an interrupt, ``error`` when it failed, else ``idle``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.checkpoint.runs import delete_ended_runs, handle_of_thread
from pregelkit.errors import InvalidUpdateError
from pregelkit.server._api import Api, api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import Body, check_uuid, query_flag
from pregelkit.server._cronrows import forget_thread
from pregelkit.server._errors import ApiError, not_found
from pregelkit.server._json import Json, has_metadata, iso, jsonable
from pregelkit.server._multitask import stop_runs
from pregelkit.server._records import ThreadRow
from pregelkit.server._snapshots import empty_state, thread_state

STATUSES = ("idle", "busy", "interrupted", "error")
MAX_IDS = 10_000
"""The most thread ids one search names: each is a query parameter, and
PostgreSQL takes at most 65,535 in a query (past them, a 500)."""
_RUN_STATUS = {
    "pending": "busy",
    "queued": "busy",
    "running": "busy",
    "sleeping": "busy",
    "waiting": "busy",
    "interrupted": "interrupted",
    "failed": "error",
}


def status_of(api: Api, thread_id: str) -> str:
    handle = handle_of_thread(api.saver, thread_id) if api.saver.has_run_queue else None
    if handle is None:
        return "idle"
    return _RUN_STATUS.get(handle.status(), "idle")


def thread_status(api: Api, row: ThreadRow, state: dict[str, Any] | None = None) -> str:
    """The status its latest run gives it; without one (a copy, or a thread
    whose runs retention pruned) ``interrupted`` if its state waits at an
    interrupt, else ``idle``. ``state``: its state, if read already."""
    handle = handle_of_thread(api.saver, row.thread_id) if api.saver.has_run_queue else None
    if handle is not None:
        return _RUN_STATUS.get(handle.status(), "idle")
    state = state_of(api, row) if state is None else state
    return "interrupted" if any(task["interrupts"] for task in state["tasks"]) else "idle"


def state_of(
    api: Api, row: ThreadRow, checkpoint: dict[str, Any] | None = None, subgraphs: bool = False
) -> dict[str, Any]:
    graph = api.graphs.get(str(row.metadata.get("graph_id")))
    if graph is None:
        return empty_state(row.thread_id)
    config = {"configurable": {"thread_id": row.thread_id, **(checkpoint or {})}}
    snapshot = graph.get_state(config, subgraphs=subgraphs)
    if snapshot.metadata is None:  # nothing saved (there)
        if checkpoint:
            raise not_found("checkpoint", str(checkpoint["checkpoint_id"]))
        return empty_state(row.thread_id)
    return thread_state(snapshot)


def view(api: Api, row: ThreadRow, status: str | None = None) -> dict[str, Any]:
    """A thread as the SDK's ``Thread``."""
    state = state_of(api, row)
    interrupts: dict[str, list[Any]] = {}
    for task in state["tasks"]:
        if task["interrupts"]:
            interrupts[task["id"]] = task["interrupts"]
    return {
        "thread_id": row.thread_id,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "metadata": row.metadata,
        "status": status or thread_status(api, row, state),
        "values": state["values"],
        "interrupts": interrupts,
    }


def thread_row(api: Api, thread_id: str, owner: str | None) -> ThreadRow:
    """``owner``'s thread: another key's is not found (not forbidden: that
    would tell it exists)."""
    row = api.records.get(check_uuid(thread_id, "thread_id"), owner)
    if row is None:
        raise not_found("thread", thread_id)
    return row


async def create(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    thread_id = body.uuid("thread_id") or str(uuid.uuid4())
    metadata = body.obj("metadata", {})
    if_exists = body.choice("if_exists", ("raise", "do_nothing"), "raise")
    owner = owner_of(request)

    def create() -> dict[str, Any]:
        row = api.records.create(thread_id, metadata, owner)
        if row is None:
            row = api.records.get(thread_id, owner)
            if if_exists == "raise" or row is None:
                raise ApiError(409, f"thread {thread_id!r} exists already")
        return view(api, row)

    return Json(await call(create))


async def get(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]
    owner = owner_of(request)
    return Json(await call(lambda: view(api, thread_row(api, tid, owner))))


async def update(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]
    metadata = (await api.body(request)).obj("metadata", {})
    owner = owner_of(request)

    def update() -> dict[str, Any]:
        row = api.records.update(check_uuid(tid, "thread_id"), metadata, owner)
        if row is None:
            raise not_found("thread", tid)
        return view(api, row)

    return Json(await call(update))


async def delete(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]

    owner = owner_of(request)

    def delete() -> None:
        thread_row(api, tid, owner)
        if status_of(api, tid) == "busy":
            raise ApiError(409, f"thread {tid!r} has a run queued or running: cancel it first")
        forget_thread(api.saver, api.crons, tid)  # its crons would run on no thread
        api.records.delete(tid)
        # a run queued since the check above: cancelled (a run created after
        # the row went cancels itself, ``_runs.submit``), then the state goes,
        # and the records of its ended runs (a thread made again with this
        # id, by any key, must not list them)
        if api.saver.has_run_queue:
            stop_runs(api, tid, rollback=True)
        api.saver.delete_thread(tid)
        if api.saver.has_run_queue:
            delete_ended_runs(api.saver, tid)

    await call(delete)
    return Response(status_code=204)


async def search(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    metadata = body.obj("metadata", {})
    ids = body.labels("ids")
    status = body.choice("status", STATUSES)
    values = body.obj("values", {})
    limit = body.integer("limit", 10, high=1000)
    offset = body.integer("offset", 0, high=1_000_000)
    _check_sort(body)
    select = _select(body)
    if ids is not None:
        if len(ids) > MAX_IDS:
            raise ApiError(422, f"'ids' names {len(ids)} threads: search at most {MAX_IDS} at once")
        ids = [check_uuid(i, "ids[]") for i in ids]
    owner = owner_of(request)

    def search() -> list[dict[str, Any]]:
        statuses: dict[str, str] = {}
        keep = _keeper(api, status, values, statuses)
        rows = api.records.search(owner, metadata, ids, keep, limit, offset)
        found = [view(api, row, statuses[row.thread_id]) for row in rows]
        return [{k: t.get(k) for k in select} for t in found] if select else found

    return Json(await call(search))


async def count(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    metadata = body.obj("metadata", {})
    status = body.choice("status", STATUSES)
    keep = _keeper(api, status, body.obj("values", {}), {})
    rows = await call(api.records.search, owner_of(request), metadata, None, keep, 10**12, 0)
    return Json(len(rows))


def _keeper(
    api: Api, status: str | None, values: dict[str, Any], statuses: dict[str, str]
) -> Callable[[ThreadRow], bool]:
    """What keeps a thread in a search or count: its ``status``, and its
    state's ``values`` holding those of the filter (as its metadata must);
    each status it reads kept in ``statuses``."""

    def keep(row: ThreadRow) -> bool:
        state = state_of(api, row) if values else None
        statuses[row.thread_id] = thread_status(api, row, state)
        if status is not None and statuses[row.thread_id] != status:
            return False
        held = state["values"] if state is not None else None
        return not values or (isinstance(held, dict) and has_metadata(held, values))

    return keep


SELECTABLE = ("thread_id", "created_at", "updated_at", "metadata", "config", "context",
              "status", "values", "interrupts")  # fmt: skip
"""A thread's fields a search may ``select`` (the SDK's ``ThreadSelectField``;
``config`` and ``context`` are null here)."""


def _select(body: Body) -> list[str] | None:
    """The fields a search ``select``s; ``extract`` is refused, not ignored
    (a client would look for an ``extracted`` field that never comes)."""
    if body.any("extract") not in (None, {}):
        raise ApiError(422, "'extract' is not served yet for threads.search: leave it out")
    select: list[str] | None = body.labels("select")
    if select and (unknown := sorted(set(select) - set(SELECTABLE))):
        raise ApiError(
            422, f"select names unknown fields {unknown}: pick from {', '.join(SELECTABLE)}"
        )
    return select


async def copy(request: Request) -> Response:
    """A new thread with the metadata and every checkpoint of this one."""
    api = api_of(request)
    tid = request.path_params["thread_id"]
    owner = owner_of(request)

    def copy() -> dict[str, Any]:
        source = thread_row(api, tid, owner)
        if status_of(api, tid) == "busy":
            raise ApiError(409, f"thread {tid!r} has a run queued or running: copy it after")
        new_id = str(uuid.uuid4())
        api.saver.copy_thread(tid, new_id)
        row = api.records.create(new_id, source.metadata, owner)
        assert row is not None  # a fresh uuid4
        return view(api, row)

    return Json(await call(copy))


def _check_sort(body: Body) -> None:
    """Threads come newest first (by last update); other orders are not
    served yet, and a client asking for one is told rather than misled."""
    sort_by = body.text("sort_by", "updated_at")
    sort_order = body.choice("sort_order", ("asc", "desc"), "desc")
    if (sort_by, sort_order) != ("updated_at", "desc"):
        raise ApiError(422, "threads are listed by updated_at, newest first; other orders are "
                       "not served yet")  # fmt: skip


async def get_state(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]
    checkpoint_id = request.path_params.get("checkpoint_id")
    checkpoint = {"checkpoint_id": _no_nul(checkpoint_id)} if checkpoint_id else None
    subgraphs = query_flag(request, "subgraphs")
    owner = owner_of(request)
    return Json(
        await call(lambda: state_of(api, thread_row(api, tid, owner), checkpoint, subgraphs))
    )


async def get_state_at(request: Request) -> Response:
    """``POST /threads/{id}/state/checkpoint``: the state at ``checkpoint``."""
    api = api_of(request)
    tid = request.path_params["thread_id"]
    body = await api.body(request)
    checkpoint = _checkpoint(body)
    subgraphs = bool(body.flag("subgraphs", False))
    owner = owner_of(request)
    return Json(
        await call(lambda: state_of(api, thread_row(api, tid, owner), checkpoint, subgraphs))
    )


def _checkpoint(body: Body) -> dict[str, Any] | None:
    """``checkpoint`` (an object) or ``checkpoint_id`` of a body, as config keys."""
    given = Body(body.obj("checkpoint", {}))
    checkpoint_id = given.text("checkpoint_id") or body.text("checkpoint_id")
    if checkpoint_id is None:
        return None
    out = {"checkpoint_id": _no_nul(checkpoint_id)}
    if ns := given.text("checkpoint_ns"):
        out["checkpoint_ns"] = _no_nul(ns)
    return out


def _no_nul(ident: str) -> str:
    """A checkpoint id or namespace as the saver can look it up: PostgreSQL
    refuses a NUL character in a query (a 500 there, an empty answer on
    SQLite), so both answer it as no such checkpoint."""
    if "\x00" in ident:
        raise not_found("checkpoint", ident)
    return ident


def _graph_of(api: Api, row: ThreadRow) -> Any:
    graph = api.graphs.get(str(row.metadata.get("graph_id")))
    if graph is None:
        raise ApiError(
            409,
            f"thread {row.thread_id!r} has no workflow yet: its state is set by its first run "
            "(its metadata then names the graph_id)",
        )
    return graph


async def update_state(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]
    body = await api.body(request)
    values = body.any("values")
    as_node = body.text("as_node")
    checkpoint = _checkpoint(body)
    owner = owner_of(request)

    def update() -> dict[str, Any]:
        row = thread_row(api, tid, owner)
        graph = _graph_of(api, row)
        if checkpoint:
            state_of(api, row, checkpoint)  # a 404 unless it exists
        config = {"configurable": {"thread_id": tid, **(checkpoint or {})}}
        try:
            new = graph.update_state(config, values, as_node=as_node)
        except (ValueError, TypeError, KeyError, InvalidUpdateError) as exc:
            raise ApiError(422, f"cannot update the state: {exc}") from None
        api.records.update(tid, {}, owner)
        return {"checkpoint": jsonable(new.get("configurable", {}))}

    return Json(await call(update))


async def history(request: Request) -> Response:
    api = api_of(request)
    tid = request.path_params["thread_id"]
    body = await api.body(request)
    limit = body.integer("limit", 10, high=1000)
    metadata = body.obj("metadata")
    before = Body(body.obj("before", {})).text("checkpoint_id")
    before = None if before is None else _no_nul(before)
    checkpoint = _checkpoint(body)
    owner = owner_of(request)

    def history() -> list[dict[str, Any]]:
        row = thread_row(api, tid, owner)
        graph = api.graphs.get(str(row.metadata.get("graph_id")))
        if graph is None:
            return []
        config = {"configurable": {"thread_id": tid, **(checkpoint or {})}}
        ahead = {"configurable": {"thread_id": tid, "checkpoint_id": before}} if before else None
        snapshots = graph.get_state_history(config, filter=metadata, before=ahead, limit=limit)
        try:
            return [thread_state(s) for s in snapshots]
        except ValueError as exc:
            if not metadata:
                raise
            # the saver refuses the filter (a NUL in a key) as it reads the first
            raise ApiError(422, f"cannot filter the history: {exc}") from None

    return Json(await call(history))


routes = [
    Route("/threads", create, methods=["POST"]),
    Route("/threads/search", search, methods=["POST"]),
    Route("/threads/count", count, methods=["POST"]),
    Route("/threads/{thread_id}", get, methods=["GET"]),
    Route("/threads/{thread_id}/copy", copy, methods=["POST"]),
    Route("/threads/{thread_id}", update, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state_at, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["POST"]),
]
