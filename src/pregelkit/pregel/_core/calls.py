"""Call records and replay: what the run this one resumes saved of its tasks.

A resumed run finds, among the saved pending writes, the writes of tasks
that finished (replayed instead of run again), the records of the task
calls they made (the functional API: a call at the same position with the
same identity is replayed, another one is a ``NondeterminismError``) and
the input's own writes. ``CallRecords`` keeps them for one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pregelkit._internal._constants import CALL, ERROR, INTERRUPT, NULL_TASK_ID, RESUME, SCHEDULED
from pregelkit.pregel._graph.call import Call
from pregelkit.pregel._plan.algo import Planner, is_done_write, legacy_push_call_id, push_call_id
from pregelkit.pregel._plan.replay import identity_of, replays
from pregelkit.types import PregelExecutableTask

__all__ = ["CallRecords"]


class CallRecords:
    """The saved writes and call records of the step a run resumes."""

    __slots__ = ("done", "null", "records")

    def __init__(self) -> None:
        self.done: dict[str, list[tuple[str, Any]]] = {}
        """The writes of tasks that finished, by task id."""
        self.records: dict[str, Any] = {}
        """The call records, by the id of the call."""
        self.null: list[tuple[str, Any]] = []
        """The writes of the input (a Command's update), applied with the step."""

    def index(self, pending: Sequence[tuple[str, str, Any]], resumes: dict[str, Any]) -> None:
        """Sort the saved ``pending`` writes; resume values go to ``resumes``."""
        done: dict[str, list[tuple[str, Any]]] = {}
        for tid, chan, value in pending:
            if chan == RESUME:
                if tid != NULL_TASK_ID:
                    resumes[tid] = value
            elif chan == CALL:
                self.records[tid] = value
            elif tid == NULL_TASK_ID:
                if chan not in (ERROR, INTERRUPT, SCHEDULED):
                    self.null.append((chan, value))
            elif is_done_write(chan):
                bucket = done.get(tid)
                if bucket is None:
                    done[tid] = [(chan, value)]
                else:
                    bucket.append((chan, value))
        self.done = done

    def clear(self) -> None:
        """The step is over (or a new input starts afresh)."""
        self.done = {}
        self.records = {}
        self.null = []

    def replayed(
        self,
        planner: Planner,
        parent: PregelExecutableTask,
        idx: int,
        call: Call,
        call_id: str,
    ) -> list[tuple[str, Any]] | None:
        """The saved writes of call ``idx`` of ``parent`` (id ``call_id``) if
        this is a replay of it; a call of another identity at a recorded
        position raises ``NondeterminismError``."""
        done = self.done.get(call_id)
        record = self.records.get(call_id)
        if done is not None and record == call.call_id:
            return done  # the common replay: the same call, finished (what ``replays`` says)
        if done is None and record is None and self.done:
            done = self.done.get(legacy_push_call_id(planner, parent, idx, call.name))
        if (done is not None or record is not None) and replays(
            done, record, call.call_id, idx, parent.name
        ):
            return done if done is not None else [(CALL, record)]
        return None

    def recorded(
        self, planner: Planner, parent: PregelExecutableTask, idx: int
    ) -> tuple[str, str | None]:
        """The id of the call ``parent`` makes at ``idx``, and the identity
        recorded there by the run this one resumes (None if nothing is)."""
        tid = push_call_id(planner, parent, idx)
        return tid, identity_of(self.records.get(tid))

    def remember(self, task_id: str, writes: list[tuple[str, Any]]) -> None:
        """A finished call, replayed if its caller runs again in this step (a
        retried attempt) instead of running twice."""
        done = [w for w in writes if w[0] != CALL]
        if done:
            self.done[task_id] = done
        self.records[task_id] = next((v for c, v in writes if c == CALL), None)
