"""Start a coroutine now, in the caller's stack, and make it a task only if
it has to wait (``asyncio.Task(..., eager_start=True)`` of Python 3.12).

A coroutine that never waits (an in-memory saver's calls) then costs no
task and no trip through the event loop: a trip is a ``select`` call and a
few handles, which for a short run of ``ainvoke`` was most of its time.

On Python 3.11 the first step runs with the caller's task as
``asyncio.current_task()``; from its first wait on, it runs in a task of
its own. Use it only for the engine's own coroutines (saver and cache
calls), which do not ask for their task.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Coroutine, Generator
from contextvars import Context
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["start_eagerly"]


def start_eagerly(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], context: Context
) -> asyncio.Task[Any] | None:
    """Run ``coro`` in ``context`` until it first waits; None if it finished
    without waiting (its result is dropped: the engine's coroutines keep
    their own; its error is raised), else the task that goes on with it."""
    if sys.version_info >= (3, 12):
        import asyncio

        task = asyncio.Task(coro, loop=loop, context=context, eager_start=True)
        if not task.done():
            return task
        task.result()
        return None
    try:
        waits_for = context.run(coro.send, None)
    except StopIteration:
        return None
    return loop.create_task(_go_on(coro, waits_for), context=context)


async def _go_on(coro: Coroutine[Any, Any, Any], waits_for: Any) -> Any:
    return await _driven(coro, waits_for)


@types.coroutine
def _driven(coro: Coroutine[Any, Any, Any], waits_for: Any) -> Generator[Any, Any, Any]:
    """Drive ``coro`` from where its first step left it, waiting for what it
    waits for (``waits_for``) as its own task would."""
    while True:
        try:
            sent = yield waits_for
        except BaseException as exc:  # the task was cancelled: tell the coroutine
            try:
                waits_for = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waits_for = coro.send(sent)
            except StopIteration as done:
                return done.value
