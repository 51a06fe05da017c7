"""How the loop's saver calls are made: in order, off the caller's path.

With ``durability="async"`` a task's writes must not wait for the saver, yet
they must reach it in the order they were made (a checkpoint before the
writes that belong to it). ``SerialLane`` is that order for the sync loop;
the async loop chains asyncio tasks the same way. Errors the serializer
raises are explained here, naming the task that wrote.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CALL, NULL_TASK_ID
from pregelkit._internal._eager import NextTurn, next_turn, start_eagerly
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.pregel._core.failed_saves import RunFaults, describe_call
from pregelkit.pregel._exec.run_executor import pool_module
from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Future

    from pregelkit.pregel._core.effects import SaveWrites

__all__ = [
    "AsyncSerialLane",
    "Awaited",
    "SerialLane",
    "aput_writes",
    "put_writes",
    "writer_name",
]


def put_writes(saver: BaseCheckpointSaver[Any], effect: SaveWrites) -> None:
    """Save a task's writes (with its attempt records, in the same call); a
    value the serializer refuses names who wrote it (``effect.who``)."""
    writes, attempts = effect.writes, effect.attempts
    try:
        if attempts:
            saver.put_writes(effect.config, writes, effect.task_id, effect.path, attempts=attempts)
        else:
            saver.put_writes(effect.config, writes, effect.task_id, effect.path)
    except SerdeError as exc:
        raise _explain(exc, writes, effect.who) from exc


async def aput_writes(saver: BaseCheckpointSaver[Any], effect: SaveWrites) -> None:
    """The async twin of ``put_writes``."""
    writes, attempts = effect.writes, effect.attempts
    try:
        if attempts:
            await saver.aput_writes(
                effect.config, writes, effect.task_id, effect.path, attempts=attempts
            )
        else:
            await saver.aput_writes(effect.config, writes, effect.task_id, effect.path)
    except SerdeError as exc:
        raise _explain(exc, writes, effect.who) from exc


def _explain(exc: SerdeError, writes: Sequence[tuple[str, Any]], who: str) -> SerdeError:
    """A serialization error that names the task that wrote and the types of its
    values (the serializer knows neither); the engine's own call record is
    left out, it is never the culprit."""
    kinds = ", ".join(f"{chan!r}: {_type_name(value)}" for chan, value in writes if chan != CALL)
    return SerdeError(f"{who} wrote a value the checkpointer cannot save ({kinds}): {exc}")


def writer_name(task: PregelExecutableTask | None, task_id: str) -> str:
    if task is not None:
        return f"task {task.name!r} (id {task_id})"
    return "the input or Command" if task_id == NULL_TASK_ID else f"task id {task_id}"


def _type_name(value: Any) -> str:
    cls = type(value)
    name = cls.__qualname__
    return name if cls.__module__ == "builtins" else f"{cls.__module__}.{name}"


_Call = tuple[Callable[..., Any], tuple[Any, ...]]


def _split(
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], bool]],
) -> tuple[list[_Call], list[_Call]]:
    """The queued calls made together in the saver's group, then those put
    ``apart``, made after it one by one: a cache save goes to another store,
    and made inside the group it would run while the group holds the
    saver's transaction (a cache in the same SQLite file then waits out its
    busy timeout for it; an async cache's hop to a thread pauses the group,
    and the event loop's other tasks meet a saver they wait for forever)."""
    together: list[_Call] = []
    apart: list[_Call] = []
    for fn, args, away in calls:  # a loop: a comprehension costs a function a drain
        (apart if away else together).append((fn, args))
    return together, apart


def _one_by_one(
    calls: list[_Call], apart: list[_Call]
) -> list[tuple[Callable[..., Any], tuple[Any, ...], bool]]:
    """The calls to make one at a time, each saying whether it is the
    saver's: a failed cache save (put ``apart``) stops the run but not the
    saver's saves (``RunFaults.record``)."""
    if not calls and not apart:
        return []  # the group made them all (most drains)
    return [(fn, args, True) for fn, args in calls] + [(fn, args, False) for fn, args in apart]


class SerialLane:
    """Runs submitted calls one after another in the background, in order.

    The calls reach a pool thread within a fraction of a millisecond (see
    ``in_background``), unless the run waits for them first (``wait``, at
    its end), which then makes them itself: a short run saves without a
    thread hand-off, a long one still saves as it goes.

    The saver calls found queued together are made inside ``group`` (the
    saver's ``grouped``): one transaction where the saver has them. If it
    fails, it saved none of them, and they are made again one by one, so
    every save that fits is kept, exactly as without groups. Calls put
    ``apart`` (cache saves) are made after the group (see ``_split``).

    Once a saver save of the run has failed (``faults``), the lane makes no
    more calls: those queued and those submitted later are only listed as
    not saved (a checkpoint must never be saved after writes it follows were
    lost). A failed cache save stops nothing here."""

    def __init__(
        self, faults: RunFaults, group: Callable[[], AbstractContextManager[None]]
    ) -> None:
        self.faults = faults
        self.group = group
        self.queue: deque[tuple[Callable[..., Any], tuple[Any, ...], bool]] = deque()
        self.lock = threading.Lock()
        self.job: Future[None] | None = None
        """The hand-off draining the queue; None while the lane is idle."""

    def put(self, fn: Callable[..., Any], args: tuple[Any, ...], apart: bool = False) -> None:
        """Queue ``fn(*args)``; ``apart``: a cache save (see ``_split``)."""
        if self.faults.saver_failure is not None:
            self.faults.skip(describe_call(fn, args))
            return
        with self.lock:
            self.queue.append((fn, args, apart))
            if self.job is not None:
                return
            self.job = pool_module().in_background(self._drain)

    def _drain(self) -> None:
        # No pause to gather calls: what queues while a call runs is taken by
        # the same hand-off, and a failed save is known as soon as it fails.
        faults = self.faults
        ctrl_c: BaseException | None = None
        while True:
            with self.lock:
                if not self.queue:
                    self.job = None
                    if ctrl_c is not None:
                        raise ctrl_c
                    return
                queued = list(self.queue)
                self.queue.clear()
            calls, apart = _split(queued)
            if len(calls) > 1 and faults.saver_failure is None:
                try:
                    with self.group():
                        for fn, args in calls:
                            fn(*args)
                    calls = []
                except BaseException as exc:
                    # rolled back whole: made again one by one, so what fits is
                    # saved; a Ctrl-C (the run waiting makes the calls in its
                    # own thread) is raised once they are, not swallowed
                    if not isinstance(exc, Exception):
                        ctrl_c = exc
            for fn, args, saver in _one_by_one(calls, apart):
                if faults.saver_failure is not None:
                    faults.skip(describe_call(fn, args))
                    continue
                try:
                    fn(*args)
                except BaseException as exc:
                    faults.record(exc, describe_call(fn, args), saver=saver)

    def wait(self) -> None:
        """Wait until every call submitted so far has run or been dropped,
        making them in this thread if no pool thread has started on them."""
        while True:
            with self.lock:
                job = self.job
            if job is None:
                return
            job.result()


class AsyncSerialLane:
    """The async loop's ``SerialLane``: one asyncio task on the run's event
    loop makes the queued saver calls in order, the calls found queued
    together inside ``group`` (the saver's ``agrouped``). As in the sync
    lane, the calls wait up to ``DEFER_SECONDS`` to be taken, unless the run
    waits for them first (at its end), which then starts making them in its
    own stack (``start_eagerly``): a short run saves in one group, and on an
    in-memory saver without a trip through the event loop.
    Called on the event loop's thread only."""

    def __init__(
        self,
        faults: RunFaults,
        loop: asyncio.AbstractEventLoop,
        group: Callable[[], AbstractAsyncContextManager[None]],
    ) -> None:
        self.faults = faults
        self.loop = loop
        self.group = group
        self.queue: list[tuple[Callable[..., Any], tuple[Any, ...], bool]] = []
        self.task: asyncio.Task[None] | None = None
        self.timer: NextTurn | None = None
        """The turn that starts the queued saves, while they wait for it."""

    def put(self, afn: Callable[..., Any], args: tuple[Any, ...], apart: bool = False) -> None:
        """Queue ``afn(*args)``; ``apart``: a cache save (see ``_split``)."""
        if self.faults.saver_failure is not None:
            self.faults.skip(describe_call(afn, args))
            return
        self.queue.append((afn, args, apart))
        if self.task is None and self.timer is None:
            self.timer = next_turn(self.loop, pool_module().DEFER_SECONDS)
            self.timer.add(id(self), self._start)

    def _start(self) -> None:
        self.timer = None
        if self.task is None and self.queue:
            self.task = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        faults = self.faults
        try:
            while self.queue:
                queued, self.queue = self.queue, []
                calls, apart = _split(queued)
                if len(calls) > 1 and faults.saver_failure is None:
                    try:
                        async with self.group():
                            for afn, args in calls:
                                await afn(*args)
                        calls = []
                    except BaseException:
                        pass  # rolled back whole: made again one by one, as in SerialLane
                for afn, args, saver in _one_by_one(calls, apart):
                    if faults.saver_failure is not None:
                        faults.skip(describe_call(afn, args))
                        continue
                    try:
                        await afn(*args)
                    except BaseException as exc:
                        faults.record(exc, describe_call(afn, args), saver=saver)
        finally:
            self.task = None

    async def wait(self) -> None:
        """Wait until every call put so far has been made or dropped (a
        cancelled waiter leaves the calls to go on)."""
        if self.timer is not None:
            self.timer.discard(id(self))
            self.timer = None
            if self.task is None and self.queue:
                # made here, as SerialLane.wait makes them: a task only from
                # the first call that has to wait (an in-memory saver's none)
                self.task = start_eagerly(self.loop, self._drain(), copy_context())
        while self.task is not None:
            import asyncio  # only for a task: an import statement costs ~1.5k instructions

            await asyncio.shield(self.task)


class Awaited:
    """A saver call the caller may await now; if it does not, ``settle`` will."""

    __slots__ = ("coro", "done")

    def __init__(self, coro: Coroutine[Any, Any, Any], sink: list[Awaitable[Any]]) -> None:
        self.coro = coro
        self.done = False
        sink.append(self)

    def __await__(self) -> Any:
        if self.done:
            return None
        self.done = True
        return (yield from self.coro.__await__())
