"""The performers of a run core's effects: the only code of a run that
touches its saver, cache, thread lock, lanes, executor and event loop.

``SyncPregelLoop`` (``invoke``/``stream``) makes each effect a plain call,
``AsyncPregelLoop`` (``ainvoke``/``astream``) awaits it, hopping to the
run's event loop when a task thread asks; which call an effect is
(``_call_of``) and how long the run waits for it (the effect's ``wait``,
decided by the core) are the same for both. Each is the ``LoopPort`` its
runner sees: it forwards to the core and makes what the core returns.

An attempt still running ``START_SAVE_DELAY`` after it started has its
start saved on the run's lane, put there by one process-wide thread
(``_StartSaver``) that asks the running runs every ``START_SAVE_DELAY``.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Sequence
from contextlib import nullcontext
from functools import partial
from types import TracebackType
from typing import Any

from pregelkit._internal._threads import on_loop, running_loop
from pregelkit.cache.base import BaseCache
from pregelkit.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, OpenedThread
from pregelkit.pregel._core.calls import Writes
from pregelkit.pregel._core.effects import (
    Effect,
    LoadCheckpoint,
    OpenThread,
    ReadCache,
    Save,
    SaveAttempts,
    SaveCheckpoint,
    SaveStarts,
    SaveWrites,
    SetMark,
    WriteCache,
)
from pregelkit.pregel._core.failed_saves import asave_now, save_now
from pregelkit.pregel._core.lanes import (
    AsyncSerialLane,
    Awaited,
    SerialLane,
    aput_writes,
    put_writes,
)
from pregelkit.pregel._core.loop import PregelLoop
from pregelkit.pregel._core.records import AttemptRecords
from pregelkit.pregel._exec.recorder import START_SAVE_DELAY, AttemptRecorder
from pregelkit.pregel._exec.run_executor import AsyncBackgroundExecutor, BackgroundExecutor
from pregelkit.pregel._exec.stop import WATCHER, RunStop, awatch
from pregelkit.pregel._graph.call import Call
from pregelkit.types import PregelExecutableTask

__all__ = ["AsyncPregelLoop", "SyncPregelLoop"]

_Call = tuple[Callable[..., Any], tuple[Any, ...]]


def _put_starts(saver: BaseCheckpointSaver[Any], records: AttemptRecords) -> None:
    thread_id, rows = records.take_starts()
    if rows:
        saver.put_attempts(thread_id, rows)


async def _aput_starts(saver: BaseCheckpointSaver[Any], records: AttemptRecords) -> None:
    thread_id, rows = records.take_starts()
    if rows:
        await saver.aput_attempts(thread_id, rows)


def _cache_set(cache: BaseCache[Any], effect: WriteCache) -> None:
    cache.set(effect.pairs)
    for key in effect.pairs:
        effect.fresh.pop(key, None)


async def _acache_set(cache: BaseCache[Any], effect: WriteCache) -> None:
    await cache.aset(effect.pairs)
    for key in effect.pairs:
        effect.fresh.pop(key, None)


async def _through_a_cancel(wait: Callable[[], Awaitable[None]]) -> None:
    """Await ``wait()``; cancelled meanwhile, wait on and raise the cancel
    once it is done (a second cancel walks away). The saves a run's lane
    still makes must land before the run gives its thread back: a run
    cancelled during its exit's saves (a timeout) was seen ended, its
    resume found nothing saved, and its checkpoint landed a moment later."""
    try:
        await wait()
    except BaseException as exc:
        import asyncio  # here, not each run: an import statement costs ~1.5k instructions

        if isinstance(exc, asyncio.CancelledError):
            await wait()
        raise


def _sent(start: Generator[Effect, Any, None], answer: Any) -> Effect | None:
    """The run start's next effect, ``answer`` (to the one before) sent in;
    None once the start is over. Both performers drive the start with it."""
    try:
        return start.send(answer)
    except StopIteration:
        return None


def _call_of(
    effect: Save, saver: BaseCheckpointSaver[Any] | None, cache: BaseCache[Any] | None, aio: bool
) -> _Call:
    """The saver or cache call that makes a saving ``effect`` (awaitable with ``aio``)."""
    if type(effect) is SaveWrites:  # the per-task one first
        return (aput_writes if aio else put_writes), (saver, effect)
    if type(effect) is SaveCheckpoint:  # the per-step one
        assert saver is not None
        c = effect
        return (saver.aput if aio else saver.put), (c.config, c.checkpoint, c.metadata, c.versions)
    if isinstance(effect, WriteCache):
        assert cache is not None
        return (_acache_set if aio else _cache_set), (cache, effect)
    assert saver is not None
    if isinstance(effect, SaveAttempts):
        fn = saver.aput_attempts if aio else saver.put_attempts
        return fn, (effect.thread_id, effect.rows)
    if isinstance(effect, SetMark):
        put = saver.aput_thread_control if aio else saver.put_thread_control
        return put, (effect.thread_id, effect.mark)
    assert isinstance(effect, SaveStarts)
    return (_aput_starts if aio else _put_starts), (saver, effect.records)


class _StartSaver:
    """One daemon thread per process, awake while runs record attempts and
    for ``PARK_AFTER`` looks after the last one ended (so runs one after
    another do not wake it each time: a run's ``watch`` is a dictionary
    store and a flag test)."""

    PARK_AFTER = 100

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loops: dict[int, _Performer] = {}
        self.awake = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def watch(self, loop: _Performer) -> None:
        self.loops[id(loop)] = loop
        if not self.awake.is_set():
            with self.lock:
                if self.thread is None:
                    self.thread = threading.Thread(
                        target=self._run, name="pregelkit-attempt-starts", daemon=True
                    )
                    self.thread.start()
            self.awake.set()

    def forget(self, loop: _Performer) -> None:
        self.loops.pop(id(loop), None)

    def _run(self) -> None:
        idle = 0
        while True:
            if not self.loops:
                idle += 1
                if idle >= self.PARK_AFTER:
                    idle = 0
                    self.awake.clear()
                    if not self.loops:  # a watch between the test and the clear sets it again
                        self.awake.wait()
                    continue
            else:
                idle = 0
            time.sleep(START_SAVE_DELAY)
            before = time.time() - START_SAVE_DELAY
            for loop in list(self.loops.values()):
                loop.core.attempts.stale(before, loop.perform)


_START_SAVER = _StartSaver()
# a forked child has no such thread: its first run starts its own
os.register_at_fork(after_in_child=_START_SAVER.reset)


class _Performer(ABC):
    """What both performers share: the core, and the port's forwarding."""

    def __init__(self, core: PregelLoop) -> None:
        self.core = core
        self.checkpointer = core.checkpointer
        self.cache = core.cached.cache
        self.calls = core.calls
        self.run_stop: RunStop = core.run_stop
        # the port's calls that make no effect are the core's own (once per task: no hop)
        self.check_saved = core.check_saved
        self.remember_call = core.calls.records.remember
        self.recorded_call = core.calls.recorded
        self.ended_calls = core.calls.ended
        self._thread_lock: Any = None
        self._first_read: tuple[dict[str, Any], Callable[[], CheckpointTuple | None]] | None = None

    def _opened(self, effect: OpenThread, opened: OpenedThread) -> None:
        """Keep the thread's lock, and the checkpoint ``open_thread`` read with
        it for the first ``LoadCheckpoint`` of the same config."""
        self._thread_lock = opened.lock
        if opened.checkpoint is not None:
            self._first_read = (effect.config, opened.checkpoint)

    def _read_with(self, effect: LoadCheckpoint) -> Callable[[], CheckpointTuple | None] | None:
        """The checkpoint read at the thread's opening, if ``effect`` asks for it."""
        first, self._first_read = self._first_read, None
        if first is not None and first[0] is effect.config:
            return first[1]
        return None

    @abstractmethod
    def perform(self, effect: Save) -> Any:
        """Make a saving effect, waiting for it as its ``wait`` says."""

    def perform_all(self, effects: Sequence[Save]) -> Any:
        """Make ``effects`` in order; what the last one gave (something to await, or None)."""
        result = None
        for effect in effects:
            result = self.perform(effect)
        return result

    # the port (``LoopPort``)
    def put_writes(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> Any:
        result = None  # perform_all, written out: once per task
        for effect in self.core.put_writes(task_id, writes):
            result = self.perform(effect)
        return result

    def attempt_recorder(self) -> AttemptRecorder | None:
        attempts = self.core.attempts
        events = attempts.events(self.core)
        if attempts.watch():
            _START_SAVER.watch(self)  # have the start saver look at this run
        return events

    def after_tick(self) -> None:
        core = self.core
        for effect in core.after_tick():  # perform_all, written out: once per step
            self.perform(effect)
        core.go_on()

    def _finish(self, exc: BaseException | None) -> bool:
        if self.core.attempts.close():
            _START_SAVER.forget(self)
        suppress, effects = self.core.finish(exc)
        for effect in effects:
            self.perform(effect)
        return suppress


class SyncPregelLoop(_Performer):
    """The performer of ``invoke``/``stream``: effects are plain calls."""

    def __init__(self, core: PregelLoop) -> None:
        super().__init__(core)
        saver = core.checkpointer
        self._executor = BackgroundExecutor(core.config)
        self._lane = SerialLane(core.faults, nullcontext if saver is None else saver.grouped)
        core.run.wait_saves = self._lane.wait
        self._unwatch: Callable[[], None] | None = None

    @property
    def submit(self) -> Callable[..., Any]:
        return self._executor.submit

    def __enter__(self) -> SyncPregelLoop:
        try:
            start, answer = self.core.start(), None
            while (effect := _sent(start, answer)) is not None:
                answer = self._answer(effect)
        except BaseException:
            self._release()
            raise
        return self

    def _answer(self, effect: Effect) -> Any:
        """Make a start-up effect; its answer."""
        saver = self.checkpointer
        if type(effect) is LoadCheckpoint:
            assert saver is not None
            read = self._read_with(effect)
            return saver.get_tuple(effect.config) if read is None else read()
        if type(effect) is OpenThread:
            assert saver is not None
            e = effect
            opened = saver.open_thread(e.thread_id, e.config, lock=e.lock, wait=e.wait, gate=e.gate)
            self._opened(effect, opened)
            if self.core.mark.polled and e.gate is not None:
                self._unwatch = WATCHER.add(self._poll)
            return opened.gate
        assert not isinstance(effect, (ReadCache, LoadCheckpoint, OpenThread))
        self.perform(effect)
        return None

    def _poll(self) -> None:
        """Read the mark (``WATCHER``'s thread calls this while the run runs)."""
        assert self.checkpointer is not None
        mark = self.core.mark
        mark.seen(self.checkpointer.get_thread_control(mark.thread_id))

    def _release(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._thread_lock is not None:
            self._thread_lock.__exit__(None, None, None)
            self._thread_lock = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        core = self.core
        try:
            # tasks still running (a run stopped or failed midway) finish first,
            # so that exiting saves their writes too
            try:
                ctrl_c = self.run_stop.settle(
                    partial(self._exit_executor, exc_type, exc_value, traceback), exc_value
                )
            finally:
                suppress = self._finish(exc_value)
            self._lane.wait()
            core.faults.raise_if_failed(core.step)
        finally:
            self._release()
        if ctrl_c is not None and not isinstance(exc_value, KeyboardInterrupt):
            raise ctrl_c
        return suppress

    def _exit_executor(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """The executor's exit, which waits for the jobs still running; after
        a second Ctrl-C, for none of them. The step's futures, which the stop
        walks away from, may lack one: a Ctrl-C that lands between a job's
        start and its recording there (a worker thread's start waits for the
        thread, which may run the task meanwhile) leaves it to the executor."""
        if self.run_stop.abandoned:
            self._executor.walk_away()
        self._executor.__exit__(exc_type, exc_value, traceback)

    def perform(self, effect: Save) -> Any:
        # _call_of's first cases, inline: once per task and once per step
        fn: Callable[..., Any]
        args: tuple[Any, ...]
        if type(effect) is SaveWrites:
            fn, args = put_writes, (self.checkpointer, effect)
        elif type(effect) is SaveCheckpoint:
            assert self.checkpointer is not None
            c = effect
            fn, args = self.checkpointer.put, (c.config, c.checkpoint, c.metadata, c.versions)
        else:
            fn, args = _call_of(effect, self.checkpointer, self.cache, False)
        wait = effect.wait
        if wait == "async":
            self._lane.put(fn, args, type(effect) is WriteCache)
        elif wait == "sync":
            save_now(self.core.faults, self.core.step, fn, *args)
        else:
            fn(*args)
        return None

    def accept_push(
        self, parent: PregelExecutableTask, idx: int, call: Call
    ) -> PregelExecutableTask | Writes | None:
        calls = self.calls
        pushed, effects = calls.accept(parent, idx, call)
        for effect in effects:
            if isinstance(effect, ReadCache):
                assert self.cache is not None and not isinstance(pushed, list)
                keys = effect.keys
                self.perform_all(calls.take(pushed, self.cache.get(keys).get(keys[0]))[1])
            else:
                self.perform(effect)
        return pushed

    def match_cached_writes(self) -> None:
        core = self.core
        wanted = core.cached.wanted(core.tasks.values())
        if wanted:
            assert self.cache is not None
            found = self.cache.get(core.cached.read(wanted).keys)
            self.perform_all(core.calls.cache_hits(wanted, found))

    async def alookup_call(self, pushed: PregelExecutableTask) -> bool:
        """A call's cache read (a sync run makes it in ``accept_push``)."""
        key, hit = self.calls.key(pushed)
        if hit is None:
            assert self.cache is not None
            hit = self.cache.get([key]).get(key)
        taken, effects = self.calls.take(pushed, hit)
        self.perform_all(effects)
        return taken


class AsyncPregelLoop(_Performer):
    """The performer of ``ainvoke``/``astream``: effects are awaited, on the
    run's event loop (a task thread's save hops there)."""

    def __init__(self, core: PregelLoop) -> None:
        super().__init__(core)
        saver = core.checkpointer
        aloop = running_loop()
        assert aloop is not None, "an async run's performer is made on its event loop"
        self._aloop = aloop
        self._executor = AsyncBackgroundExecutor(core.config)
        self.io_wait: list[Awaitable[Any]] = []
        """The saves the run waits for before it goes on (``settle``)."""
        self._lane = AsyncSerialLane(
            core.faults, self._aloop, nullcontext if saver is None else saver.agrouped
        )
        core.run.wait_saves = self._lane.wait
        self._aunwatch: Callable[[], Awaitable[None]] | None = None
        self._saved_all = False
        """The run's exit has waited for its lane: a start record the start
        saver's thread handed over just before (``call_soon_threadsafe``
        lands after) is dropped, not left to start a save after the run."""

    @property
    def submit(self) -> Callable[..., Any]:
        return self._executor.submit

    async def __aenter__(self) -> AsyncPregelLoop:
        core = self.core
        await self._executor.__aenter__()
        try:
            start, answer = core.start(), None
            while (effect := _sent(start, answer)) is not None:
                answer = await self._answer(effect)
            if self.io_wait:
                await self.settle()
        except BaseException:
            await self._release()
            raise
        return self

    async def _answer(self, effect: Effect) -> Any:
        """Make a start-up effect; its answer (saves of the input wait for ``settle``)."""
        saver = self.checkpointer
        if type(effect) is LoadCheckpoint:
            assert saver is not None
            read = self._read_with(effect)
            return await saver.aget_tuple(effect.config) if read is None else read()
        if type(effect) is OpenThread:
            assert saver is not None
            e = effect
            opened = await saver.aopen_thread(
                e.thread_id, e.config, lock=e.lock, wait=e.wait, gate=e.gate
            )
            self._opened(effect, opened)
            if self.core.mark.polled and e.gate is not None:
                self._aunwatch = awatch(self._aloop, self._apoll, self.run_stop)
            return opened.gate
        assert not isinstance(effect, (ReadCache, LoadCheckpoint, OpenThread))
        if effect.wait == "now":
            afn, args = _call_of(effect, saver, self.cache, True)
            await afn(*args)
        else:
            self.perform(effect)  # a sync save waits in settle, with the others
        return None

    async def _apoll(self) -> None:
        assert self.checkpointer is not None
        mark = self.core.mark
        mark.seen(await self.checkpointer.aget_thread_control(mark.thread_id))

    async def _release(self) -> None:
        """Stop polling (a read in flight is cancelled and waited for, so the
        run leaves nothing running on its event loop) and free the thread."""
        try:
            if self._aunwatch is not None:
                unwatch, self._aunwatch = self._aunwatch, None
                await unwatch()
        finally:
            if self._thread_lock is not None:
                await self._thread_lock.__aexit__(None, None, None)
                self._thread_lock = None

    async def settle(self) -> None:
        """Wait for the saves that must finish before the run goes on."""
        while self.io_wait:
            pending, self.io_wait = self.io_wait, []
            for aw in pending:
                await aw

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        core = self.core
        try:
            if exc_value is not None:
                self.run_stop.aborted(exc_value)  # as RunStop.settle does for sync runs
            try:
                await self._executor.__aexit__(exc_type, exc_value, traceback)
            except BaseException as exc:
                import asyncio  # here, not each run: an import statement costs ~1.5k instructions

                if isinstance(exc, asyncio.CancelledError):
                    # cancelled (again) while waiting for tasks still running:
                    # walk away from them, as a second Ctrl-C does
                    self.run_stop.walk_away()
                raise
            finally:
                suppress = self._finish(exc_value)
            try:
                await self.settle()
            finally:
                await _through_a_cancel(self._lane.wait)
                self._saved_all = True
            core.faults.raise_if_failed(core.step)
        finally:
            await self._release()
        return suppress

    def perform(self, effect: Save) -> Any:
        if effect.wait == "sync":
            import asyncio

            afn, args = _call_of(effect, self.checkpointer, self.cache, True)
            core = self.core
            if on_loop(self._aloop):
                return Awaited(asave_now(core.faults, core.step, afn, *args), self.io_wait)
            asyncio.run_coroutine_threadsafe(
                asave_now(core.faults, core.step, afn, *args), self._aloop
            ).result()
            return None
        if on_loop(self._aloop):
            if self._saved_all and type(effect) is SaveStarts:
                return None  # the run has ended: its attempts' records are saved
            afn, args = _call_of(effect, self.checkpointer, self.cache, True)
            self._lane.put(afn, args, type(effect) is WriteCache)
        else:
            self._aloop.call_soon_threadsafe(self.perform, effect)
        return None

    def accept_push(
        self, parent: PregelExecutableTask, idx: int, call: Call
    ) -> PregelExecutableTask | Writes | None:
        pushed, effects = self.calls.accept(parent, idx, call)
        for effect in effects:
            assert not isinstance(effect, ReadCache)  # read later, by alookup_call
            self.perform(effect)
        return pushed

    async def aafter_tick(self) -> None:
        core = self.core
        for effect in core.after_tick():  # perform_all, written out: once per step
            self.perform(effect)
        if self.io_wait:
            await self.settle()
        core.go_on()

    async def amatch_cached_writes(self) -> None:
        core = self.core
        wanted = core.cached.wanted(core.tasks.values())
        if wanted:
            assert self.cache is not None
            found = await self.cache.aget(core.cached.read(wanted).keys)
            self.perform_all(core.calls.cache_hits(wanted, found))

    async def alookup_call(self, pushed: PregelExecutableTask) -> bool:
        """The async runs' cache read of a call ``accept_push`` left unread:
        whether it was a hit (its writes are then the task's)."""
        key, hit = self.calls.key(pushed)
        if hit is None:
            assert self.cache is not None
            hit = (await self.cache.aget([key])).get(key)
        taken, effects = self.calls.take(pushed, hit)
        self.perform_all(effects)
        return taken
