"""Streams as server-sent events: ``runs.stream`` (on a thread, or
stateless), ``runs.join_stream`` and ``threads.join_stream``.

A streamed run is queued with its stream modes; its worker writes the
parts to the database (``checkpoint/_parts.py``) and the stream tails
them there, polling with a backoff that starts over at each part. So any
server process sharing the database serves any run's stream, and a
stream cut off resumes from the last event id it got (``Last-Event-ID``,
which the client sends on its own when it reconnects to the ``Location``
the stream answered with): event ids are the parts' ids.

Events as LangGraph's server sends them: ``metadata`` first (the run id),
then one event per part named by its mode, a failed run's ``error``
(``{"error", "message"}``), and ``end``. A server that stops ends its
streams without ``end``: the client reconnects, to another process or
to this one once it is back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from pregelkit.checkpoint import _parts
from pregelkit.checkpoint.runs import RunHandle, handle_of_thread
from pregelkit.server._api import Api, api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import check_uuid
from pregelkit.server._errors import ApiError, StreamCut
from pregelkit.server._json import jsonable
from pregelkit.server._runs import (
    STREAMED,
    handle_of,
    outcome,
    run_headers,
    stream_modes,
    submit,
)
from pregelkit.server._stateless import done_reading, forget, reading, stateless
from pregelkit.server._threads import thread_row

TAIL_SECONDS = (0.02, 0.25)
"""A stream's pauses between reads of its run's parts: the first after a
part came, doubling while none comes, up to the second."""
LAST_ID = 2**63 - 1
"""The largest event id: the parts' ids are the database's 64-bit integers."""
ENDED = ("done", "failed", "cancelled", "interrupted")


def _sse(event: str, data: Any, event_id: int | None = None) -> bytes:
    text = json.dumps(jsonable(data), ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\ndata: {text}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return (head + "\n").encode("utf-8")


async def _tail(
    api: Api, handle: RunHandle, after: int, modes: tuple[str, ...] | None
) -> AsyncIterator[bytes]:
    """The run's parts after ``after`` (of ``modes``; None: all), until it ends."""
    yield _sse("metadata", {"run_id": handle.run_id, "attempt": 1})
    serde = api.saver.serde
    pause = TAIL_SECONDS[0]
    while not api.stopping.is_set():
        plan = partial(_parts.tail, run_id=handle.run_id, after=after)
        status, parts = await call(api.saver.run_queue, plan, "read stream parts")
        for part_id, mode, ns, kind, data in parts:
            after = part_id
            if modes is None or mode in modes:
                name = mode if not ns else f"{mode}|{ns}"
                yield _sse(name, serde.loads_typed((kind, data)), part_id)
        if parts:
            pause = TAIL_SECONDS[0]
        if status is None or (status in ENDED and len(parts) < _parts.READ_LIMIT):
            if status == "failed":
                ended = await outcome(handle)
                yield _sse("error", ended.get("__error__", ended))
            yield _sse("end", None)
            return
        if not parts:
            await asyncio.sleep(pause)
            pause = min(pause * 2, TAIL_SECONDS[1])


def _streaming(
    api: Api,
    handle: RunHandle,
    after: int,
    modes: tuple[str, ...] | None,
    cancel_on_disconnect: bool,
    temporary: bool = False,
) -> StreamingResponse:
    """The run's stream as a response; a client that goes away cancels the
    run if it asked to; a ``temporary`` thread is deleted once its run ends
    (here when the stream saw it end, else by ``_stateless``'s sweep)."""

    async def events() -> AsyncIterator[bytes]:
        ended = False
        try:
            async for event in _tail(api, handle, after, modes):
                yield event
            ended = not api.stopping.is_set()
            if not ended:
                raise StreamCut(handle.run_id)
        finally:
            # shielded: a client gone away cancels this generator
            with anyio.CancelScope(shield=True):
                try:
                    if not ended and cancel_on_disconnect and not api.stopping.is_set():
                        await call(handle.cancel)
                    if ended and temporary:
                        await call(forget, api, handle.thread_id)
                finally:
                    if temporary:
                        done_reading(api, handle.thread_id)

    headers = {
        **run_headers(handle.thread_id, handle.run_id),
        "Location": f"/threads/{handle.thread_id}/runs/{handle.run_id}/stream",
        "Cache-Control": "no-store",
    }
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _last_event_id(request: Request) -> int | None:
    """Where a joined stream resumes: after the part whose id the client
    got last; ``-1`` from the run's first part; none: from now on."""
    value = request.headers.get("last-event-id")
    if value is None or value == "":
        return None
    after: int | None
    try:
        after = max(int(value), 0)
    except ValueError:
        after = None
    if after is None or after > LAST_ID:  # past the database's integers (SQLite overflowed)
        raise ApiError(422, f"Last-Event-ID must be an event id of this stream, got {value!r}")
    return after


def _join_modes(request: Request) -> tuple[str, ...] | None:
    """A join's ``stream_mode`` query parameters (none: every mode the run streams)."""
    asked = [
        m for m in request.query_params.getlist("stream_mode") if m
    ]  # the client sends one empty
    for mode in asked:
        if mode not in STREAMED:
            raise ApiError(422, f"stream mode {mode!r} is not served: one of {', '.join(STREAMED)}")
    return tuple(asked) or None


def _cancel_on_disconnect(request: Request) -> bool:
    value = request.query_params.get("cancel_on_disconnect", "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise ApiError(422, "query parameter 'cancel_on_disconnect' must be true or false")
    return value in ("true", "1")


def _now(api: Api, run_id: str) -> int:
    """The id of the run's latest part yet (0: none): a join without
    ``Last-Event-ID`` streams what comes after it."""
    return api.saver.run_queue(partial(_parts.latest, run_id=run_id), "read stream parts")


async def stream(request: Request) -> Response:
    """``runs.stream`` on a thread: queue the run with its modes and stream it."""
    api = api_of(request)
    tid = check_uuid(request.path_params["thread_id"], "thread_id")
    body = await api.body(request)
    modes = stream_modes(body)
    cancel = body.choice("on_disconnect", ("cancel", "continue"), "continue") == "cancel"
    handle, _, _ = await call(submit, api, tid, owner_of(request), body, modes)
    return _streaming(api, handle, 0, None, cancel)


async def stream_stateless(request: Request) -> Response:
    """``runs.stream(None, ...)``: on a thread of its own, deleted once the
    run ends unless ``on_completion="keep"``; cancelled if the client goes
    away first, unless ``on_disconnect="continue"`` (as ``runs.wait``)."""
    api = api_of(request)
    tid, body, temporary = stateless(api, await api.body(request))
    modes = stream_modes(body)
    cancel = body.choice("on_disconnect", ("cancel", "continue"), "cancel") == "cancel"
    reading(api, tid, temporary)
    try:
        handle, _, _ = await call(submit, api, tid, owner_of(request), body, modes, temporary)
    except BaseException:
        done_reading(api, tid)
        raise
    return _streaming(api, handle, 0, None, cancel, temporary)


async def join_stream(request: Request) -> Response:
    """``runs.join_stream``: a run's parts after ``Last-Event-ID``."""
    api = api_of(request)
    tid, rid = request.path_params["thread_id"], request.path_params["run_id"]
    modes = _join_modes(request)
    cancel = _cancel_on_disconnect(request)
    last = _last_event_id(request)
    handle = await call(handle_of, api, tid, rid, owner_of(request))
    after = await call(_now, api, rid) if last is None else last
    return _streaming(api, handle, after, modes, cancel)


async def join_thread_stream(request: Request) -> Response:
    """``threads.join_stream``: the stream of the thread's latest run (its
    ``run_modes``: the events of its stream; ``lifecycle`` and
    ``state_update`` are not served yet)."""
    api = api_of(request)
    tid = check_uuid(request.path_params["thread_id"], "thread_id")
    for mode in request.query_params.getlist("stream_mode"):
        if mode not in ("", "run_modes"):
            raise ApiError(422, f"thread stream mode {mode!r} is not served yet: 'run_modes'")
    last = _last_event_id(request)
    owner = owner_of(request)

    def latest() -> tuple[RunHandle, int]:
        thread_row(api, tid, owner)
        handle = handle_of_thread(api.saver, tid)
        if handle is None:
            raise ApiError(404, f"thread {tid!r} has no run to stream")
        return handle, _now(api, handle.run_id) if last is None else last

    handle, after = await call(latest)
    return _streaming(api, handle, after, None, False)


routes = [
    Route("/runs/stream", stream_stateless, methods=["POST"]),
    Route("/threads/{thread_id}/runs/stream", stream, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/stream", join_thread_stream, methods=["GET"]),
]
