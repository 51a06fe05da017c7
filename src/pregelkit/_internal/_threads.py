"""Where a call runs with respect to an event loop: whether the caller is on
a given loop, and running a sync function on a worker thread.

The engine, the savers, the stores and the embedders each needed these and
had written them again; they are here once, below every layer that uses
them. ``asyncio`` is imported when a function is called, not with this
module: ``import pregelkit.func`` and a sync run never load it. (The error
refused on a loop's thread, which must subclass an ``asyncio`` class, is in
``_loop_thread``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Executor

__all__ = ["on_executor", "on_loop", "running_loop", "to_thread"]

T = TypeVar("T")


_running: Callable[[], asyncio.AbstractEventLoop | None] | None = None
"""``asyncio._get_running_loop``, kept at the first look: asked per task
call and per save of an async run, where an import statement and a caught
``RuntimeError`` each cost more than the answer."""


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, if any."""
    global _running
    if _running is None:
        import asyncio

        _running = asyncio._get_running_loop
    return _running()


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs on ``loop``'s thread, inside it."""
    return running_loop() is loop


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a thread of the running loop's default
    pool, in a copy of the caller's context (``asyncio.to_thread``): the loop
    goes on meanwhile."""
    import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


async def on_executor(executor: Executor, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on ``executor`` (a saver's or a store's own
    worker thread, which serializes its calls), awaited from the running
    loop. The caller's context is not copied there: the thread's calls see
    none of the caller's context variables."""
    import asyncio
    import functools

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))
