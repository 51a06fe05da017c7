"""An async task call that has not started yet: whoever awaits it first
runs it, the event loop only if nobody does.

The async twin of the sync executor's deferred ``Job``. ``await one(x)``
inside an entrypoint is the common call: its caller would only wait for it,
so running the call in the caller's own stack changes nothing it can see,
and saves the asyncio task and the two trips through the event loop (start,
then wake the caller) that were most of a short ``ainvoke``. A call nobody
awaits before the loop's next turn starts then as its own task (a fan-out
runs in parallel as before).

The call runs in the context copied when it was made, as its task would; it
runs inside its awaiter's task, which a call that is awaited whole cannot
tell apart from a task of its own. With ``max_concurrency`` its task waits
for a free slot, but a caller that awaits it runs it at once: a caller that
holds a slot and waits for its own call would otherwise wait forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from contextvars import Context
from typing import Any

from pregelkit._internal._eager import NextTurn, next_turn

__all__ = ["DeferredCall"]


class DeferredCall(asyncio.Future[Any]):
    """The future of one call; ``when_done`` callbacks (the engine's
    bookkeeping) run as soon as it ends, not on the loop's next turn. ``turn``
    is ``loop``'s next turn (``next_turn``), if the maker keeps it."""

    __slots__ = (
        "_context",
        "_coro",
        "_gate",
        "_inline",
        "_must_cancel",
        "_now",
        "_task",
        "_turn",
        "_waits_for",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: Context,
        gate: asyncio.Semaphore | None,
        turn: NextTurn | None = None,
    ) -> None:
        super().__init__(loop=loop)
        self._coro: Coroutine[Any, Any, Any] | None = coro
        self._context = context
        self._gate = gate
        self._task: asyncio.Task[None] | None = None
        self._inline = False
        """Whether an awaiter runs the call in its stack."""
        self._waits_for: Any = None
        """What the call waits for there (its awaiter's task waits for it)."""
        self._must_cancel = False
        self._now: list[Callable[[DeferredCall], None]] = []
        self._turn = turn = next_turn(loop) if turn is None else turn
        turn.add(id(self), self._start)

    def when_done(self, fn: Callable[[DeferredCall], None]) -> None:
        """Call ``fn(self)`` when the call ends (now, if it has)."""
        if self.done():
            fn(self)
        else:
            self._now.append(fn)

    def failure(self) -> BaseException | None:
        """How the finished call ended: its exception, or None if it ended
        well or was cancelled."""
        return None if self.cancelled() else self.exception()

    def _claim(self) -> Coroutine[Any, Any, Any] | None:
        coro, self._coro = self._coro, None
        if coro is not None:
            self._turn.discard(id(self))
        return coro

    def _start(self) -> None:
        """The loop's turn came and nobody awaited the call: a task runs it."""
        if self._coro is None:
            return
        loop = self.get_loop()
        if self._gate is None:
            coro = self._claim()
            assert coro is not None
            self._task = loop.create_task(self._run(coro), context=self._context)
        else:
            self._task = loop.create_task(self._gated(self._gate), context=self._context)

    async def _gated(self, gate: asyncio.Semaphore) -> None:
        async with gate:
            coro = self._claim()  # None: an awaiter took it meanwhile
            if coro is not None:
                await self._run(coro)

    async def _run(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            value = await coro
        except BaseException as exc:
            self._ended(None, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            self._ended(value, None)

    def _ended(self, value: Any, exc: BaseException | None) -> None:
        if isinstance(exc, asyncio.CancelledError):
            super().cancel()
        elif exc is not None:
            self.set_exception(exc)
        else:
            self.set_result(value)
        now, self._now = self._now, []
        for fn in now:
            fn(self)

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        coro = self._claim()
        if coro is not None:  # not started: it never will be
            coro.close()
            if self._task is not None:
                self._task.cancel()  # waiting for a slot
            self._ended(None, asyncio.CancelledError())
            return True
        if self._inline:  # as ``Task.cancel``: what it waits for is cancelled, or the next step
            waits_for = self._waits_for
            if waits_for is None or not waits_for.cancel(msg):
                self._must_cancel = True
            return True
        task = self._task
        assert task is not None
        if task.cancelling():
            # cancelled already (its caller's gather, then the run's stop): a
            # second cancel would cut short what it does about the first, such
            # as a PostgreSQL save cancelling its statement, which then closes
            # the connection, and the thread's lock with it
            return True
        return task.cancel(msg)

    def __await__(self) -> Generator[Any, None, Any]:
        coro = self._claim()
        if coro is None:
            return (yield from super().__await__())
        if self._task is not None:
            self._task.cancel()  # it waits for a slot: the awaiter runs the call instead
        self._inline = True
        run = self._context.run
        send, throw = coro.send, coro.throw
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                waits_for = run(send, sent) if thrown is None else run(throw, thrown)
            except StopIteration as done:
                self._ended(done.value, None)
                break
            except BaseException as exc:
                self._ended(None, exc)
                break
            self._waits_for = waits_for
            try:
                sent, thrown = (yield waits_for), None
            except BaseException as exc:
                sent, thrown = None, exc
            self._waits_for = None
            if self._must_cancel and thrown is None:
                self._must_cancel = False
                sent, thrown = None, asyncio.CancelledError()
        self._inline = False
        return self.result()

    __iter__ = __await__
