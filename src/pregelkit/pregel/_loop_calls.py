"""The loop's side of the functional API's task calls: each call a running
task makes becomes a task of the step, unless the run it resumes saved its
result (a replay) or the cache holds it.

``LoopCalls`` is a base of ``PregelLoop``.
"""

from __future__ import annotations

from typing import Any

from pregelkit._internal._constants import CALL
from pregelkit.pregel._algo import (
    Planner,
    legacy_push_call_id,
    prepare_push_call,
    push_call_id,
)
from pregelkit.pregel._call import Call
from pregelkit.pregel._control import RunStop
from pregelkit.pregel._faults import RunFaults
from pregelkit.pregel._loop_cache import LoopCache
from pregelkit.pregel._replay import identity_of, replays
from pregelkit.types import PregelExecutableTask

__all__ = ["LoopCalls"]


class LoopCalls(LoopCache):
    """Task calls made by the running tasks of one run."""

    faults: RunFaults
    run_stop: RunStop
    planner: Planner
    step: int
    stream_modes: frozenset[str]
    _done_writes: dict[str, list[tuple[str, Any]]]
    _call_records: dict[str, Any]
    is_async: bool

    def accept_push(
        self, parent: PregelExecutableTask, idx: int, call: Call
    ) -> PregelExecutableTask | None:
        """Create the task for a call made by a running task (functional API).

        A call whose writes were saved before (this is a replay) gets them
        back and will not run; a cache hit likewise (an async run reads the
        cache later, with ``alookup_call``). Once the run is asked to stop,
        no call starts.
        """
        self.faults.raise_if_failed(self.step)
        if self.run_stop.reason is not None:
            raise self.run_stop.refuse(parent)
        pushed = prepare_push_call(self.planner, parent, idx, call)
        done = self._done_writes.get(pushed.id)
        record = self._call_records.get(pushed.id)
        if done is None and record is None and self._done_writes:
            done = self._done_writes.get(legacy_push_call_id(self.planner, parent, idx, call.name))
        if (done is not None or record is not None) and replays(
            done, record, call.call_id, idx, parent.name
        ):
            pushed.writes.extend(done if done is not None else [(CALL, record)])
            if self.attempt_log is not None or self.hooks is not None:
                self._attempt_instant(pushed, "replayed")
            if "tasks" in self.stream_modes or "debug" in self.stream_modes:
                # as LangGraph streams it: the call starts again, its result
                # comes from the record (no task_result event)
                self._task_started(pushed)
            return pushed
        if pushed.cache_key is not None and self.cache is not None:
            key = (pushed.cache_key.ns, pushed.cache_key.key)
            hit = self._fresh.get(key)
            if not hit and self.is_async:
                # the runner reads the cache with ``aget`` (``alookup_call``):
                # a sync read here would hold up the event loop
                return pushed
            if not hit:
                hit = self.cache.get([key]).get(key)
            if hit:
                self._take_cached(pushed, hit)
                return pushed
        return self._push_new(pushed)

    async def alookup_call(self, pushed: PregelExecutableTask) -> bool:
        """The async runs' cache read of a call ``accept_push`` left unread:
        whether it was a hit (its writes are then the task's); a miss makes
        it a task of the step like any other."""
        assert pushed.cache_key is not None and self.cache is not None
        key = (pushed.cache_key.ns, pushed.cache_key.key)
        hit = self._fresh.get(key) or (await self.cache.aget([key])).get(key)
        if hit:
            self._take_cached(pushed, hit)
            return True
        self._push_new(pushed)
        return False

    def _take_cached(self, pushed: PregelExecutableTask, hit: list[tuple[str, Any]]) -> None:
        """A call answered by the cache. The cached writes carry the identity
        of the call that filled the cache; this position records this call."""
        writes = [w for w in hit if w[0] != CALL]
        call = pushed.proc
        assert type(call) is Call
        writes.append((CALL, call.call_id))
        pushed.writes.extend(writes)
        self._output_writes(pushed, writes, True)
        self._record_cached(pushed)

    def _push_new(self, pushed: PregelExecutableTask) -> PregelExecutableTask:
        self.tasks[pushed.id] = pushed
        if "tasks" in self.stream_modes or "debug" in self.stream_modes:
            self._task_started(pushed)
        return pushed

    def recorded_call(self, parent: PregelExecutableTask, idx: int) -> tuple[str, str | None]:
        """The id of the call ``parent`` makes at ``idx``, and the identity
        recorded there by the run this one resumes (None if nothing is)."""
        tid = push_call_id(self.planner, parent, idx)
        return tid, identity_of(self._call_records.get(tid))

    def remember_call(self, task_id: str, writes: list[tuple[str, Any]]) -> None:
        """A finished call, replayed if its caller runs again in this step (a
        retried attempt) instead of running twice."""
        done = [w for w in writes if w[0] != CALL]
        if done:
            self._done_writes[task_id] = done
        self._call_records[task_id] = next((v for c, v in writes if c == CALL), None)
