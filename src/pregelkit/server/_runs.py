"""``/threads/{id}/runs``: runs on the queue (``wf.submit``), run by the
workers (in process, or ``pregelkit worker`` processes with
``--no-workers``): create (a background run), wait, get, list, join, cancel,
delete (a run's record; an active run must be cancelled first).

A run created on a busy thread follows its ``multitask_strategy``
(``_multitask``: enqueue by default, reject, interrupt, rollback); one
created with ``checkpoint_id`` (or ``checkpoint``) starts from that older
checkpoint of the thread, a fork. Options that would change what a run does
and are not served yet (``context``, ``webhook``, ...) are refused with 422
naming the option, rather than ignored: a run that silently did something
else would be worse.

Waiting for a run polls its queue row from the event loop (a thread is
held only for each read), so many waiting clients cost no threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit._internal._constants import CONFIG_KEY_BREAKPOINTS, CONFIG_KEY_STREAM_MODES
from pregelkit.checkpoint.runs import (
    POLL_SECONDS,
    RunHandle,
    RunRecord,
    delete_run,
    list_runs,
)
from pregelkit.errors import RunCancelledError, RunFailedError
from pregelkit.server import _options
from pregelkit.server._api import Api, api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import Body, check_uuid, query_int
from pregelkit.server._errors import ApiError, not_found
from pregelkit.server._json import Json, iso, jsonable
from pregelkit.server._multitask import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    cancel_pending,
    forget_run,
    queue,
    roll_back,
    wait_stopped,
)
from pregelkit.server._options import Options, breakpoints, checkpoint_of
from pregelkit.server._schemas import check_input
from pregelkit.server._threads import thread_row
from pregelkit.types import Command

NOT_SERVED = (
    "context",
    "webhook",
    "feedback_keys",
)
RUN_STATUS = {
    "pending": "pending",
    "queued": "pending",
    "running": "running",
    "sleeping": "running",
    "waiting": "running",
    "interrupted": "interrupted",
    "done": "success",
    "failed": "error",
    "cancelled": "interrupted",
}
"""pregelkit's run statuses as LangGraph's server names them."""
MAX_LISTED = 10_000
"""The most runs of one thread a status filter reads."""
MAX_AFTER_SECONDS = 366 * 86400.0
"""The latest a run created with ``after_seconds`` may start: a year on."""
RESERVED_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map")


def view(api: Api, record: RunRecord, options: Options | None = None) -> dict[str, Any]:
    """A run as the SDK's ``Run`` (``assistant_id`` null for a run of a
    workflow this server does not serve, queued by another program;
    ``options``: the ``metadata`` and ``multitask_strategy`` it was created
    with, ``_options.read`` gives them back)."""
    metadata, strategy = options or ({}, None)
    served = next((s for s in api.served if s.graph_id == record.workflow), None)
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "assistant_id": None if served is None else served.assistant_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.finished_at or record.created_at),
        # a run held by after_seconds sleeps before its first attempt: pending
        "status": "pending"
        if record.status == "sleeping" and record.attempts == 0
        else RUN_STATUS.get(record.status, record.status),
        "metadata": dict(metadata or {}),
        "multitask_strategy": strategy,
        "kwargs": {},
    }


STREAMED = ("values", "updates", "custom", "tasks", "checkpoints", "debug")
"""The stream modes served: their parts travel through the database."""


def stream_modes(body: Body) -> tuple[str, ...]:
    """The body's ``stream_mode`` (a mode or a list of them; ``values`` if
    none), each one served."""
    asked = body.any("stream_mode")
    modes = ["values"] if asked in (None, []) else [asked] if isinstance(asked, str) else asked
    if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
        raise ApiError(422, "field 'stream_mode' must be a stream mode or a list of them")
    for mode in modes:
        if mode not in STREAMED:
            raise ApiError(
                422, f"stream mode {mode!r} is not served yet: ask for {', '.join(STREAMED)}"
            )
    if body.flag("stream_subgraphs", False):
        raise ApiError(422, "'stream_subgraphs' is not served yet: leave it out")
    return tuple(dict.fromkeys(modes))


def submit(
    api: Api,
    thread_id: str,
    owner: str | None,
    body: Body,
    modes: tuple[str, ...] = (),
    temporary: bool = False,
) -> tuple[RunHandle, Options, RunRecord]:
    """Queue the run the body asks for on ``owner``'s thread ``thread_id``:
    checks first, in the order a client can fix them. ``modes``: the stream
    modes whose parts its worker writes to the database; ``temporary``: a
    thread created here is deleted once its run ends (``_stateless``)."""
    for name in NOT_SERVED:
        if body.any(name) not in (None, [], {}):
            raise ApiError(422, f"{name!r} is not served yet by pregelkit serve: leave it out")
    strategy = body.choice("multitask_strategy", STRATEGIES, DEFAULT_STRATEGY)
    assistant_id = body.text("assistant_id")
    if assistant_id is None:
        raise ApiError(422, "field 'assistant_id' is required (an assistant id or graph id)")
    served = api.assistant(assistant_id)
    metadata = body.obj("metadata", {})
    config = Body(body.obj("config", {}))
    configurable = {
        k: v
        for k, v in config.obj("configurable", {}).items()
        if k not in RESERVED_CONFIGURABLE and not k.startswith("__")
    }
    command = body.obj("command")
    value: Any = body.any("input")
    if command is not None:
        if value is not None:
            raise ApiError(422, "give 'input' or 'command', not both")
        value = _command(Body(command))
    elif value is not None:
        check_input(api.graphs[served.graph_id].get_input_jsonschema(), value)
    if_not_exists = body.choice("if_not_exists", ("reject", "create"), "reject")
    after = body.seconds("after_seconds", MAX_AFTER_SECONDS) or None
    if body.choice("on_completion", ("delete", "keep")) == "delete":
        raise ApiError(422, "on_completion 'delete' is served for stateless runs only")

    row = api.records.get(thread_id, owner)
    if row is None:
        if if_not_exists == "reject":
            raise not_found("thread", thread_id)
        api.records.create(thread_id, {}, owner, temporary)
        row = thread_row(api, thread_id, owner)
    known = row.metadata.get("graph_id")
    if known is not None and known != served.graph_id:
        raise ApiError(
            409,
            f"thread {thread_id!r} holds the state of graph {known!r}, not {served.graph_id!r}: "
            "run that graph's assistant on it, or start a new thread",
        )
    if (fork := checkpoint_of(api, thread_id, body)) is not None:
        configurable["checkpoint_id"] = fork
    if (stops := breakpoints(api, served.graph_id, body)) is not None:
        configurable[CONFIG_KEY_BREAKPOINTS] = stops
    api.records.update(
        thread_id, {"graph_id": served.graph_id, "assistant_id": served.assistant_id}, owner
    )
    if modes:
        configurable[CONFIG_KEY_STREAM_MODES] = list(modes)
    run_config: dict[str, Any] = {
        "configurable": {**configurable, "thread_id": thread_id},
        "metadata": {**metadata, "graph_id": served.graph_id, "assistant_id": served.assistant_id},
    }
    if (tags := config.array("tags")) is not None:
        run_config["tags"] = tags
    if (limit := config.integer("recursion_limit", None, low=1, high=100_000)) is not None:
        run_config["recursion_limit"] = limit
    options: Options = (metadata, strategy)
    _options.keep(run_config, options)
    handle, record = queue(api, thread_id, served.graph_id, value, run_config, strategy, after)
    if api.records.get(thread_id, owner) is None:
        # the thread was deleted since it was read: its delete cancels the
        # runs it finds, this one it may not have (``_threads.delete``)
        with contextlib.suppress(ApiError):  # not stopped within its wait: it ends alone
            wait_stopped(handle)
            api.saver.run_queue(
                partial(forget_run, thread_id=thread_id, run_id=handle.run_id), "forget"
            )
        raise not_found("thread", thread_id)
    return handle, options, record


def _command(body: Body) -> Command:
    """The SDK's ``command`` (resume, update, goto) as a ``Command``."""
    fields: dict[str, Any] = {}
    if "resume" in body.data:
        fields["resume"] = body.data["resume"]
    if (update := body.any("update")) is not None:
        fields["update"] = update
    if (goto := body.any("goto")) is not None:
        if not isinstance(goto, (str, list)):
            raise ApiError(422, "command.goto must be a node name or a list of them")
        fields["goto"] = goto
    if not fields:
        raise ApiError(422, "command must give resume, update or goto")
    return Command(**fields)


async def create(request: Request) -> Response:
    api = api_of(request)
    tid = check_uuid(request.path_params["thread_id"], "thread_id")
    body = await api.body(request)
    owner = owner_of(request)

    # a resumable run writes its parts, for a join_stream later
    modes = stream_modes(body) if body.flag("stream_resumable", False) else ()

    def create() -> dict[str, Any]:
        _, options, record = submit(api, tid, owner, body, modes)
        return view(api, record, options)

    run = await call(create)
    return Json(run, headers=run_headers(tid, run["run_id"]))


def run_headers(thread_id: str, run_id: str) -> dict[str, str]:
    """Where the run is (the SDK's ``on_run_created`` reads it)."""
    return {"Content-Location": f"/threads/{thread_id}/runs/{run_id}"}


async def wait(request: Request) -> Response:
    """Queue a run and answer when it ends: its output (with ``__interrupt__``
    when it stopped at one), or ``{"__error__": ...}`` with status 200 when it
    failed, as LangGraph's server does (the SDK raises it)."""
    api = api_of(request)
    tid = check_uuid(request.path_params["thread_id"], "thread_id")
    body = await api.body(request)
    cancel = body.choice("on_disconnect", ("cancel", "continue"), "continue") == "cancel"
    handle, _, _ = await call(submit, api, tid, owner_of(request), body)
    return Json(await waited(request, handle, cancel), headers=run_headers(tid, handle.run_id))


async def outcome(handle: RunHandle) -> Any:
    """What ``runs.wait`` and ``runs.join`` answer once the run ends."""
    pause = POLL_SECONDS[0]
    while True:
        try:
            return jsonable(await call(handle.result, 0))
        except TimeoutError:
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS[1])
        except RunFailedError as exc:
            return {"__error__": _error(exc.error)}
        except RunCancelledError:
            return {"__error__": {"error": "RunCancelled", "message": "the run was cancelled"}}


async def waited(request: Request, handle: RunHandle, cancel_on_disconnect: bool) -> Any:
    """``outcome``, for a request whose client may go away meanwhile: with
    ``cancel_on_disconnect`` that cancels the run (LangGraph's
    ``on_disconnect="cancel"``), else the run goes on. Either way this
    waits on for the run's end, so what the caller does after it (a
    stateless run's thread deleted) still happens."""
    if not cancel_on_disconnect:
        return await outcome(handle)
    watch = asyncio.create_task(_cancel_when_gone(request, handle))
    try:
        return await outcome(handle)
    finally:
        watch.cancel()


async def _cancel_when_gone(request: Request, handle: RunHandle) -> None:
    # the body is read: what the server receives next is the client going away
    while (await request.receive())["type"] != "http.disconnect":
        pass
    await call(handle.cancel)


def _error(recorded: str) -> dict[str, str]:
    """``"ValueError: boom"`` (as the worker records it) as LangGraph's
    ``{"error": "ValueError", "message": "boom"}``."""
    found = re.match(r"^([A-Za-z_][\w.]*): (.*)$", recorded, re.DOTALL)
    if found is None:
        return {"error": "Error", "message": recorded}
    return {"error": found.group(1), "message": found.group(2)}


def handle_of(api: Api, thread_id: str, run_id: str, owner: str | None) -> RunHandle:
    """The run ``run_id`` of ``owner``'s thread ``thread_id``."""
    thread_row(api, thread_id, owner)
    check_uuid(run_id, "run_id")
    handle = RunHandle(api.saver, run_id, thread_id)
    try:
        record = handle.record()
    except LookupError:
        raise not_found("run", run_id) from None
    if record.thread_id != thread_id:
        raise not_found("run", run_id)
    return handle


async def get(request: Request) -> Response:
    api = api_of(request)
    tid, rid = request.path_params["thread_id"], request.path_params["run_id"]
    owner = owner_of(request)

    def got() -> dict[str, Any]:
        record = handle_of(api, tid, rid, owner).record()
        return view(api, record, _options.read(api.saver, [rid]).get(rid))

    return Json(await call(got))


async def list_(request: Request) -> Response:
    """A thread's runs, newest first (``status`` in LangGraph's names)."""
    api = api_of(request)
    tid = request.path_params["thread_id"]
    limit = query_int(request, "limit", 10, high=1000)
    offset = query_int(request, "offset", 0, high=1_000_000)
    status = request.query_params.get("status")
    if status is not None and status not in set(RUN_STATUS.values()):
        raise ApiError(422, f"status must be one of {', '.join(sorted(set(RUN_STATUS.values())))}")
    owner = owner_of(request)

    def listed() -> list[dict[str, Any]]:
        thread_row(api, tid, owner)
        # a thread has few runs: a status is picked out here, in LangGraph's names
        fetch = offset + limit if status is None else MAX_LISTED
        records = list_runs(api.saver, limit=fetch, thread_id=tid)
        options = _options.read(api.saver, [r.run_id for r in records])
        runs = [view(api, r, options.get(r.run_id)) for r in records]
        return [r for r in runs if status in (None, r["status"])][offset : offset + limit]

    return Json(await call(listed))


async def join(request: Request) -> Response:
    api = api_of(request)
    tid, rid = request.path_params["thread_id"], request.path_params["run_id"]
    handle = await call(handle_of, api, tid, rid, owner_of(request))
    return Json(await outcome(handle))


async def delete(request: Request) -> Response:
    """Delete a run's record (``runs.delete``); what it saved stays on its
    thread. A run still pending, queued or running is refused (409): cancel
    it first."""
    api = api_of(request)
    tid, rid = request.path_params["thread_id"], request.path_params["run_id"]
    owner = owner_of(request)

    def delete() -> None:
        handle_of(api, tid, rid, owner)
        status = delete_run(api.saver, rid)
        if status is None:
            raise not_found("run", rid)
        if status in RUNNING:
            raise ApiError(
                409,
                f"run {rid!r} is {RUN_STATUS[status]}: cancel it first "
                "(runs.cancel(thread_id, run_id, wait=True)), then delete it",
            )

    await call(delete)
    return Response(status_code=204)


async def cancel(request: Request) -> Response:
    """Cancel a run: a queued or pending one never starts, a running one
    stops at its next task boundary; ``action=rollback`` then deletes it and
    what it saved (answered once that is done). ``?wait=1`` answers once it
    has ended."""
    api = api_of(request)
    tid, rid = request.path_params["thread_id"], request.path_params["run_id"]
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise ApiError(422, "query parameter 'action' must be interrupt or rollback")
    handle = await call(handle_of, api, tid, rid, owner_of(request))
    if action == "rollback":
        await call(roll_back, api, handle)
        return Response(status_code=204)
    if not await call(api.saver.run_queue, partial(cancel_pending, run_ids=[rid]), "cancel"):
        await call(handle.cancel)
    if request.query_params.get("wait") in ("1", "true"):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (await call(handle.status)) in RUNNING:
            await asyncio.sleep(POLL_SECONDS[0])
    return Response(status_code=204)


RUNNING = ("pending", "queued", "running", "sleeping", "waiting")


routes = [
    Route("/threads/{thread_id}/runs", create, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_, methods=["GET"]),
    Route("/threads/{thread_id}/runs/wait", wait, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel, methods=["POST"]),
]
