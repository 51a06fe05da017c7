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
from typing import TYPE_CHECKING, Any

from pregelkit._internal._constants import CALL, NULL_TASK_ID
from pregelkit.checkpoint.attempts import AttemptRow
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.pregel._faults import RunFaults, describe_call
from pregelkit.types import PregelExecutableTask

if TYPE_CHECKING:
    import asyncio

__all__ = ["Awaited", "SerialLane", "aput_writes", "on_loop", "put_writes", "writer_name"]


def put_writes(
    saver: BaseCheckpointSaver[Any],
    config: Any,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    path: str,
    who: str,
    attempts: Sequence[AttemptRow] = (),
) -> None:
    """Save a task's writes (and attempt records, in the same call); a value
    the serializer refuses names ``who`` wrote it."""
    try:
        if attempts:
            saver.put_writes(config, writes, task_id, path, attempts=attempts)
        else:
            saver.put_writes(config, writes, task_id, path)
    except SerdeError as exc:
        raise _explain(exc, writes, who) from exc


async def aput_writes(
    saver: BaseCheckpointSaver[Any],
    config: Any,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    path: str,
    who: str,
    attempts: Sequence[AttemptRow] = (),
) -> None:
    """The async twin of ``put_writes``."""
    try:
        if attempts:
            await saver.aput_writes(config, writes, task_id, path, attempts=attempts)
        else:
            await saver.aput_writes(config, writes, task_id, path)
    except SerdeError as exc:
        raise _explain(exc, writes, who) from exc


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


class SerialLane:
    """Runs submitted calls one after another on the shared pool, in order.

    Once a save of the run has failed (``faults``), the lane makes no more
    calls: those queued and those submitted later are only listed as not
    saved (a checkpoint must never be saved after writes it follows were
    lost)."""

    def __init__(self, submit: Callable[..., Any], faults: RunFaults) -> None:
        self.submit = submit
        self.faults = faults
        self.queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.lock = threading.Lock()
        self.idle = threading.Event()
        self.idle.set()

    def put(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.faults.failure is not None:
            self.faults.skip(describe_call(fn, args))
            return
        with self.lock:
            self.queue.append((fn, args))
            if not self.idle.is_set():
                return
            self.idle.clear()
        self.submit(self._drain, __reraise_on_exit__=False)

    def _drain(self) -> None:
        # No pause to gather calls: what queues while a call runs is taken by
        # the same hand-off, and a failed save is known as soon as it fails.
        faults = self.faults
        while True:
            with self.lock:
                if not self.queue:
                    self.idle.set()
                    return
                fn, args = self.queue.popleft()
            if faults.failure is not None:
                faults.skip(describe_call(fn, args))
                continue
            try:
                fn(*args)
            except BaseException as exc:
                faults.record(exc, describe_call(fn, args))

    def wait(self) -> None:
        """Wait until every call submitted so far has run or been dropped."""
        self.idle.wait()


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


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs on ``loop``'s thread, inside it."""
    import asyncio

    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
