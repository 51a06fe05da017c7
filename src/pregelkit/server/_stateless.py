"""Stateless runs (``runs.create``, ``runs.wait`` and ``runs.stream`` with
no thread): each runs on a temporary thread of its own, which is deleted
once its run ends (``on_completion="delete"``, the default, as on
LangGraph's server) or kept as an ordinary thread (``"keep"``).

"Ends" is any end: done, failed, cancelled, or stopped at an interrupt
(an interrupt on a deleted thread cannot be answered: a client that means
to answer asks for ``"keep"``). The thread id is in the run the SDK gets
(``on_run_created``), so the thread and its run can be read until then.

A temporary thread is marked so in the server's thread rows when it is
created. The request that waits for its run (``runs.wait``, a stream read
to its end) deletes it as it answers; every other end (a background run,
a client gone away, a server stopped meanwhile) is caught by the sweep
that each server process runs every ``SWEEP_SECONDS``: it deletes the
marked threads whose runs have ended, whichever process created them,
but those a request of its own process still answers (``Api.reading``):
a stream read slowly still sends parts after its run ended. A server
cannot see another process's requests, so of a thread another process
created (``Api.made``) it deletes at once the thread (its checkpoints and
row) but not its runs' stream parts, which that process may still be
sending to a slow client: those go, with the thread's mark, once its
runs ended ``SETTLE_SECONDS`` ago.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.checkpoint import _parts
from pregelkit.checkpoint.runs import list_runs
from pregelkit.server._api import Api, api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import Body
from pregelkit.server._json import Json
from pregelkit.server._runs import run_headers, stream_modes, submit, view, waited

log = logging.getLogger("pregelkit.server")

SWEEP_SECONDS = 1.0
"""How often a server looks for temporary threads whose run has ended."""
SWEEP_BATCH = 100
ORPHAN_SECONDS = 60.0
"""A temporary thread no run was queued for after this long (its request
failed in between) is deleted too."""
JOIN_SECONDS = 5.0
"""How long after its run ended a temporary thread is left in place, so
that a ``runs.join`` made right after ``runs.create`` finds a run that
ended at once."""
SETTLE_SECONDS = 300.0
"""How long after its runs ended the stream parts of a temporary thread
another server process created are left to that process's requests."""
READ_SECONDS = 3600.0
"""How long the sweep leaves a temporary thread to the request of this
process that answers its run (``Api.reading``): a stream read slowly
still has parts in the database after its run ended. Past this, a mark
that a request left behind (its response never started) lapses."""
MAX_RUNS = 1000
"""The most runs of one temporary thread whose stream parts are deleted with it."""


def stateless(api: Api, body: Body) -> tuple[str, Body, bool]:
    """A stateless run's new thread, the body that creates it, and whether
    the thread is temporary (``on_completion`` is ``"delete"``: this process
    made it, ``Api.made``)."""
    temporary = body.choice("on_completion", ("delete", "keep"), "delete") == "delete"
    data = {k: v for k, v in body.data.items() if k not in ("on_completion", "if_not_exists")}
    thread_id = str(uuid.uuid4())
    if temporary:
        api.made.add(thread_id)
    return thread_id, Body({**data, "if_not_exists": "create"}), temporary


def forget(api: Api, thread_id: str, parts: bool = True) -> None:
    """Delete a temporary thread: its checkpoints, its row and (``parts``)
    its runs' stream parts with its mark; its runs' queue rows stay, as
    any ended run's, until the queue's retention prunes them."""
    api.saver.delete_thread(thread_id)
    api.records.delete(thread_id, keep_mark=not parts)
    if not parts:
        return
    runs = [r.run_id for r in list_runs(api.saver, limit=MAX_RUNS, thread_id=thread_id)]
    if runs:
        api.saver.run_queue(partial(_parts.delete, run_ids=runs), "delete stream parts")
    api.made.discard(thread_id)


def sweep(api: Api) -> int:
    """Delete the temporary threads whose runs ended ``JOIN_SECONDS`` ago,
    but those a request of this process still answers, and the stream parts of other
    processes' until they settled; how many it deleted (wholly or but for
    their parts)."""
    now = time.time()
    ended = api.records.ended_temporary(
        now - ORPHAN_SECONDS, now - JOIN_SECONDS, now - SETTLE_SECONDS, SWEEP_BATCH
    )
    lapsed = time.monotonic() - READ_SECONDS
    left = [
        (thread_id, settled)
        for thread_id, joined, settled in ended
        if joined and api.reading.get(thread_id, lapsed) <= lapsed
    ]
    for thread_id, settled in left:
        forget(api, thread_id, parts=settled or thread_id in api.made)
    return len(left)


def reading(api: Api, thread_id: str, temporary: bool) -> None:
    """Mark a temporary thread as answered by this request, before its run
    is queued: the sweep leaves it to the request, which ``done_reading``."""
    if temporary:
        api.reading[thread_id] = time.monotonic()


def done_reading(api: Api, thread_id: str) -> None:
    """The request has answered (or given up): the sweep may take the thread."""
    api.reading.pop(thread_id, None)


async def sweep_forever(api: Api) -> None:
    """``sweep`` every ``SWEEP_SECONDS`` (at once again while it finds a
    full batch) until the server stops; a failed sweep is logged and the
    next one tries again."""
    while not api.stopping.is_set():
        try:
            if await call(sweep, api) == SWEEP_BATCH:
                continue
        except Exception:
            log.exception("deleting the temporary threads of ended stateless runs failed")
        await asyncio.sleep(SWEEP_SECONDS)


async def create(request: Request) -> Response:
    """``runs.create(None, ...)``: a background run on a temporary thread."""
    api = api_of(request)
    tid, body, temporary = stateless(api, await api.body(request))
    owner = owner_of(request)
    modes = stream_modes(body) if body.flag("stream_resumable", False) else ()

    def create() -> dict[str, Any]:
        _, options, record = submit(api, tid, owner, body, modes, temporary)
        return view(api, record, options)

    run = await call(create)
    return Json(run, headers=run_headers(tid, run["run_id"]))


async def wait(request: Request) -> Response:
    """``runs.wait(None, ...)``: the run's outcome, as ``runs.wait`` on a
    thread answers it. A client that goes away first cancels the run with
    ``on_disconnect="cancel"`` (the default here, as on LangGraph's server);
    with ``"continue"`` the run goes on. Either way this request still
    deletes the temporary thread once the run ends."""
    api = api_of(request)
    tid, body, temporary = stateless(api, await api.body(request))
    cancel = body.choice("on_disconnect", ("cancel", "continue"), "cancel") == "cancel"
    reading(api, tid, temporary)
    try:
        handle, _, _ = await call(submit, api, tid, owner_of(request), body, (), temporary)
        result = await waited(request, handle, cancel)
        if temporary:
            await call(forget, api, tid)
    finally:
        done_reading(api, tid)
    return Json(result, headers=run_headers(tid, handle.run_id))


routes = [
    Route("/runs", create, methods=["POST"]),
    Route("/runs/wait", wait, methods=["POST"]),
]
