"""Where a run starts: a new input, a ``Command``, or a resume of saved state.

``LoopInput`` is a base of ``PregelLoop``: it checks what the caller passed
against the thread's saved state (a Command needs state to act on, resume
values must answer pending interrupts) and records it before the first step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pregelkit._internal._constants import INPUT, INTERRUPT, NULL_TASK_ID, RESUME, TASKS
from pregelkit.errors import (
    AmbiguousResumeError,
    EmptyInputError,
    InterruptNotPendingError,
    InvalidUpdateError,
    NothingToResumeError,
)
from pregelkit.pregel._algo import PregelTaskWrites
from pregelkit.pregel._io import map_input, read_channels
from pregelkit.pregel._loop_events import LoopEvents
from pregelkit.pregel._scope import RunContext, TaskScope
from pregelkit.pregel._write import control_writes
from pregelkit.types import Command

__all__ = ["LoopInput"]


def _is_interrupt_id(key: Any) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


class LoopInput(LoopEvents):
    """The first step's input, from what the caller passed and what was saved."""

    input: Any
    input_keys: Any
    output_keys: Any
    is_nested: bool
    parent_scope: TaskScope | None
    run: RunContext
    checkpoint_pending_writes: list[tuple[str, str, Any]]
    _done_writes: dict[str, list[tuple[str, Any]]]
    _call_records: dict[str, Any]
    _null_writes: list[tuple[str, Any]]
    checkpoint_metadata: Any
    replays_past: bool
    addressed: bool

    def put_writes(self, task_id: str, writes: Sequence[tuple[str, Any]]) -> Any:
        raise NotImplementedError

    def _apply(self, tasks: Sequence[Any], changed: set[str]) -> set[str]:
        raise NotImplementedError

    def _put_checkpoint(self, metadata: Any, changed: set[str]) -> None:
        raise NotImplementedError

    def _first(self) -> set[str] | None:
        inp = self.input
        if self.is_nested and self._resuming_nested():
            inp = None
        if isinstance(inp, Command):
            if inp.graph == Command.PARENT:
                raise InvalidUpdateError("Command(graph=Command.PARENT) has no parent graph here")
            if inp.resume is not None:
                self._accept_resume(inp.resume)
            writes = control_writes(Command(update=inp.update, goto=inp.goto))
            if writes:
                for chan, _ in writes:
                    if chan not in self.channels and not chan.startswith("__"):
                        raise InvalidUpdateError(
                            f"Command(update=...) names unknown channel {chan!r}; "
                            f"channels: {sorted(c for c in self.channels if c != TASKS)}"
                        )
                self.put_writes(NULL_TASK_ID, writes)
                self._null_writes.extend(writes)
            if not self.checkpoint["channel_versions"]:
                raise EmptyInputError(
                    "Command resumes or updates a thread, but this thread has no saved state; "
                    "start it with an input first"
                )
            return self._resume()
        if inp is None:
            if not self.checkpoint["channel_versions"]:
                raise EmptyInputError(
                    "received no input, and the thread has no saved state to resume: "
                    "pass an input to start it"
                )
            # a checkpoint made by update_state (or a fork) already starts a
            # branch, unless the thread has moved past it
            forks = self.addressed and (
                self.replays_past
                or self.checkpoint_metadata.get("source") not in ("update", "fork")
            )
            return self._resume(forks=forks)
        writes = list(map_input(self.input_keys, inp))
        if not writes:
            raise EmptyInputError(
                f"the input {inp!r} writes to no input channel ({self.input_keys!r})"
            )
        self.checkpoint_pending_writes = []
        self._done_writes = {}
        self._call_records = {}
        self._null_writes = []
        self.run.resume_writes.clear()
        changed: set[str] = set()
        # no values chunk for the input itself: LangGraph shows values after
        # each step (and where a resumed run stands), not the input written
        updated = self._apply([PregelTaskWrites((), INPUT, writes, ())], changed)
        self._put_checkpoint({"source": "input"}, changed)
        return updated

    def _resuming_nested(self) -> bool:
        parent = self.parent_scope
        assert parent is not None
        return (
            parent.run.resuming
            and bool(self.checkpoint["channel_versions"])
            and bool(self.checkpoint_pending_writes)
        )

    def _accept_resume(self, resume: Any) -> None:
        """Check ``resume`` against the pending interrupts and record it; a
        resume that cannot be matched raises before anything is written."""
        # a task that interrupted and has finished since (it was resumed) waits no more
        waiting = {
            i.id: i
            for tid, chan, value in self.checkpoint_pending_writes
            if chan == INTERRUPT and tid != NULL_TASK_ID and tid not in self._done_writes
            for i in value
        }
        if not waiting and not self.is_nested and self.checkpoint["channel_versions"]:
            raise NothingToResumeError(
                "Command(resume=...) was given, but nothing in this thread is waiting for a "
                "resume value: its last run finished or failed without an interrupt. Start "
                "a new run with an input, or invoke(None, config) to retry a failed run"
            )
        if isinstance(resume, dict) and resume and all(_is_interrupt_id(k) for k in resume):
            unknown = [k for k in resume if k not in waiting]
            # a nested graph gets its parent's map, checked there
            if unknown and not self.is_nested:
                raise InterruptNotPendingError(unknown, list(waiting.values()))
            self.run.resume_map = dict(resume)
            # saved like a single value, so the answers survive a crash before use
            self.put_writes(NULL_TASK_ID, [(RESUME, resume)])
            return
        if len(waiting) > 1:
            raise AmbiguousResumeError(list(waiting.values()))
        self.run.resume_slot.value = resume
        self.put_writes(NULL_TASK_ID, [(RESUME, resume)])

    def _resume(self, *, forks: bool = False) -> set[str] | None:
        """Resuming: plan every node, as nothing says what changed last.

        ``forks``: the run goes on from a checkpoint the caller named (time
        travel), so it first saves a ``fork`` checkpoint, a copy of that one, as
        LangGraph does: the new branch starts there, and the named checkpoint's
        history stays as it was."""
        self.run.resuming = True
        versions = self.checkpoint["channel_versions"]
        self.checkpoint["versions_seen"][INTERRUPT] = dict(versions)
        if forks:
            self._put_checkpoint({"source": "fork"}, set())
        if "values" in self.stream_modes:
            # as LangGraph does: a resumed run first shows where it stands
            # (None, or an empty dict, when nothing is written yet)
            self._emit("values", read_channels(self.channels, self.output_keys))
        return None
