"""Ctrl-C while ``pregelkit run`` or ``resume`` runs a workflow.

The first Ctrl-C stops the run the library's way (no task starts, running
sync tasks finish and are saved; a Python thread cannot be stopped), and
says so at once, with what it waits for: otherwise the status line would
go on saying "running" for as long as the slowest task takes, and the user
would think the key did nothing. A second Ctrl-C walks away from the tasks
still running (``RunStop.walk_away``): what they finish is not saved, and a
resume runs them again. Both are said on stderr, above the status line.

A sync run gets the ``KeyboardInterrupt`` Python would raise; an async run's
task is cancelled instead, as ``asyncio.run`` does on Ctrl-C, and the
command sees that cancellation as the ``KeyboardInterrupt`` it stands for.
An async run's running tasks are cancelled at once (as in LangGraph), a sync
one's result discarded while its thread runs on: the first Ctrl-C says so,
and the command does not wait for such a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Collection, Coroutine, Iterator
from types import FrameType
from typing import Any

from pregelkit.cli._progress import Progress
from pregelkit.cli._render import clean

__all__ = ["CtrlC", "ctrl_c", "leave_now", "run_async"]


class CtrlC:
    """Counts the Ctrl-Cs of one run and says what each one does."""

    def __init__(self, progress: Progress, callers: Collection[str]) -> None:
        self.progress = progress
        self.callers = frozenset(callers)
        """The graph's own nodes: with task calls running, a node is their
        caller, stopped with the run, not a task the stop waits for."""
        self.presses = 0
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def attach(self) -> None:
        """Called from the async run's task: Ctrl-C cancels it."""
        self.task = asyncio.current_task()
        self.loop = asyncio.get_running_loop()

    def waited_for(self) -> list[str]:
        """The names of the running tasks the stop waits for."""
        running = list(self.progress.running.values())
        calls = [name for name in running if name not in self.callers]
        return calls if calls else running

    @property
    def walked_away(self) -> bool:
        """Whether running tasks were left to themselves: after a second
        Ctrl-C, or any in an async run (its tasks are cancelled, and a sync
        one's thread, which cannot be, finishes for nothing)."""
        return self.presses >= 2 or (self.presses >= 1 and self.task is not None)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        names = self.waited_for()
        if self.presses == 1 and self.task is not None:
            self.progress.stopping([])
            self.progress.error_line(cancel_message(names))
        elif self.presses == 1:
            self.progress.stopping(names)
            self.progress.error_line(first_message(names))
        else:
            self.progress.error_line(second_message(names))
        if self.task is not None and self.loop is not None and not self.task.done():
            self.loop.call_soon_threadsafe(self.task.cancel)
            return
        raise KeyboardInterrupt  # a sync run, or an async one waiting for its threads


def _tasks(names: list[str]) -> tuple[int, str]:
    counts = Counter(clean(name) for name in names)
    listed = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in sorted(counts.items()))
    return len(names), listed


def first_message(names: list[str]) -> str:
    n, listed = _tasks(names)
    if not n:
        return "stopping: saving what finished; Ctrl-C again to stop now"
    tasks = "1 running task" if n == 1 else f"{n} running tasks"
    return f"stopping: waiting for {tasks} ({listed}) to finish; Ctrl-C again to stop now"


def cancel_message(names: list[str]) -> str:
    """An async run's Ctrl-C: its running tasks are cancelled at once."""
    n, listed = _tasks(names)
    if not n:
        return "stopping: saving what finished"
    tasks = "1 running task" if n == 1 else f"{n} running tasks"
    if n == 1:
        saved = "its result is not saved (resume runs it again)"
    else:
        saved = "their results are not saved (resume runs them again)"
    return f"stopping: cancelling {tasks} ({listed}): {saved}"


def second_message(names: list[str]) -> str:
    n, listed = _tasks(names)
    if not n:
        return "stopping now"
    if n == 1:
        saved = "its result is not saved (resume runs it again)"
    else:
        saved = "their results are not saved (resume runs them again)"
    return f"stopping now, without waiting for {listed}: {saved}"


@contextlib.contextmanager
def ctrl_c(progress: Progress, callers: Collection[str]) -> Iterator[CtrlC]:
    """Handle Ctrl-C for the run inside the block (the main thread only:
    elsewhere Python delivers no signal, and the block runs as it is)."""
    state = CtrlC(progress, callers)
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous: Callable[[int, FrameType | None], Any] | int | None = signal.signal(
        signal.SIGINT, state.handle
    )
    try:
        yield state
    except asyncio.CancelledError:
        if not state.presses:
            raise
        raise KeyboardInterrupt from None  # what our Ctrl-C cancelled
    finally:
        signal.signal(signal.SIGINT, previous)


def run_async(main: Coroutine[Any, Any, None], state: CtrlC) -> None:
    """``asyncio.run`` without its own Ctrl-C handling (``state`` has it), and
    without waiting on exit for the loop's default executor once Ctrl-C
    walked away from a sync task still running there."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
            if not state.walked_away:
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def leave_now(state: CtrlC, status: int) -> None:
    """After Ctrl-C walked away from running tasks, end the process even
    though a thread is still busy with one (Python would wait for it on exit).
    Everything the run saves is saved by then; output is flushed first."""
    if not state.walked_away:
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        os._exit(status)
