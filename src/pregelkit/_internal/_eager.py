"""Start a coroutine now, in the caller's stack, and make it a task only if
it has to wait (``asyncio.Task(..., eager_start=True)`` of Python 3.12).

A coroutine that never waits (an in-memory saver's calls) then costs no
task and no trip through the event loop: a trip is a ``select`` call and a
few handles, which for a short run of ``ainvoke`` was most of its time.

On Python 3.11 the first step runs with the caller's task as
``asyncio.current_task()``; from its first wait on, it runs in a task of
its own. Use it only for the engine's own coroutines (saver and cache
calls), which do not ask for their task.

What a run leaves for the loop's next turn (a task call nobody awaited, a
lane's saves) goes on one handle per loop (``NextTurn``), so that runs
which never let the loop turn leave nothing behind.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable, Coroutine, Generator
from contextvars import Context
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["NextTurn", "next_turn", "start_eagerly"]


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


class NextTurn:
    """Calls for an event loop's next turn (``delay`` seconds on), all on
    one handle. A handle per call would be dropped by the loop only when it
    turns, and a caller running short runs one after another, none of which
    waits, never lets it turn: each run would leave a handle (and what it
    holds) behind. Here a call taken back (``discard``) is gone at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        # weak: the registry's value must not keep its key, the loop, alive
        self.loop = weakref.ref(loop)
        self.delay = delay
        self.due: dict[int, Callable[[], None]] = {}
        self.armed = False

    def add(self, key: int, fn: Callable[[], None]) -> None:
        """Call ``fn()`` on the loop's next turn, unless ``key`` is discarded first."""
        self.due[key] = fn
        if not self.armed and (loop := self.loop()) is not None:
            self.armed = True
            # a context of its own: the caller's would be kept alive by the handle
            if self.delay:
                loop.call_later(self.delay, self._fire, context=Context())
            else:
                loop.call_soon(self._fire, context=Context())

    def discard(self, key: int) -> None:
        self.due.pop(key, None)

    def _fire(self) -> None:
        self.armed = False
        due, self.due = self.due, {}
        for fn in due.values():
            fn()


_NEXT_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, NextTurn]] = (
    weakref.WeakKeyDictionary()
)


_last: tuple[weakref.ref[asyncio.AbstractEventLoop], dict[float, NextTurn]] | None = None
"""The loop asked for last, and its turns: one loop runs a process's runs,
and a weak dictionary's lookup cost a short run a microsecond each time."""


def next_turn(loop: asyncio.AbstractEventLoop, delay: float = 0.0) -> NextTurn:
    """``loop``'s ``NextTurn`` for ``delay``."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        turns = last[1]
    else:
        found = _NEXT_TURNS.get(loop)
        turns = _NEXT_TURNS[loop] = {} if found is None else found
        _last = (weakref.ref(loop), turns)
    turn = turns.get(delay)
    if turn is None:
        turn = turns[delay] = NextTurn(loop, delay)
    return turn
