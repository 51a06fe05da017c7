"""Where a run starts: a new input, a ``Command``, or a resume of saved state.

``RunInput`` checks what the caller passed against the thread's saved state
(a Command needs state to act on, resume values must answer pending
interrupts) and says how the run starts (``Start``); the core writes and
saves what that says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    INTERRUPT,
    NULL_TASK_ID,
    RESUME,
    TASKS,
)
from pregelkit.checkpoint.base import CheckpointTuple
from pregelkit.errors import (
    AmbiguousResumeError,
    EmptyInputError,
    InterruptNotPendingError,
    InvalidUpdateError,
    NothingToResumeError,
)
from pregelkit.pregel._graph.scope import RunContext
from pregelkit.pregel._graph.writes import control_writes
from pregelkit.pregel._plan.io import map_input
from pregelkit.types import Command

__all__ = ["RunInput", "Start"]


def _is_interrupt_id(key: Any) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


class Start(NamedTuple):
    """How a run starts: ``resume`` (a resume value) and ``update`` (a
    Command's update and goto) are saved as the input's, each in its own
    save; ``input`` is a new input's writes (None: the run resumes);
    ``forks``: a resume from a checkpoint the caller named first saves a
    copy of it (time travel)."""

    resume: list[tuple[str, Any]]
    update: list[tuple[str, Any]]
    input: list[tuple[str, Any]] | None
    forks: bool


class RunInput:
    """What the caller passed, and the facts about saved state it is checked against."""

    __slots__ = (
        "addressed",
        "input",
        "input_keys",
        "interrupts",
        "nested",
        "replays_past",
        "resuming_parent",
    )

    def __init__(
        self,
        input: Any,
        input_keys: str | Sequence[str],
        interrupts: tuple[Sequence[str] | str, Sequence[str] | str],
        nested: bool,
        resuming_parent: bool,
    ) -> None:
        self.input, self.input_keys = input, input_keys
        self.interrupts = interrupts
        """The nodes to interrupt before and after (``interrupt_before``/``_after``)."""
        # ``resuming_parent``: the run this nested one is part of resumes
        self.nested, self.resuming_parent = nested, resuming_parent
        self.addressed = False
        """The caller named the checkpoint this run starts from."""
        self.replays_past = False
        """The run starts from a checkpoint the thread has moved past."""

    def latest_config(self, checkpoint_config: dict[str, Any]) -> dict[str, Any] | None:
        """When the run names a checkpoint, the config of its thread's latest one:
        naming a past checkpoint replays from it instead of resuming it."""
        conf = checkpoint_config[CONF]
        if self.nested or not conf.get(CONFIG_KEY_CHECKPOINT_ID):
            return None
        return {
            CONF: {
                CONFIG_KEY_THREAD_ID: conf[CONFIG_KEY_THREAD_ID],
                CONFIG_KEY_CHECKPOINT_NS: conf[CONFIG_KEY_CHECKPOINT_NS],
            }
        }

    @staticmethod
    def replay(saved: CheckpointTuple, latest: CheckpointTuple | None) -> CheckpointTuple:
        """A past checkpoint is replayed: the tasks planned from it run again (a
        fork), so the writes they saved the first time are not reused."""
        if latest is None or latest.checkpoint["id"] == saved.checkpoint["id"]:
            return saved
        return saved._replace(pending_writes=[])

    def start(
        self,
        run: RunContext,
        versions: Mapping[str, Any],
        pending: Sequence[tuple[str, str, Any]],
        done: Mapping[str, Any],
        channels: Mapping[str, Any],
        source: Any,
    ) -> Start:
        """How the run starts, from the saved channel ``versions``, the
        ``pending`` writes and the tasks ``done`` since, and the ``source`` of
        the checkpoint; a resume value is handed to ``run`` on the way."""
        inp = self.input
        if self.nested and self.resuming_parent and versions and pending:
            inp = None
        if isinstance(inp, Command):
            if inp.graph == Command.PARENT:
                raise InvalidUpdateError("Command(graph=Command.PARENT) has no parent graph here")
            resume: list[tuple[str, Any]] = []
            if inp.resume is not None:
                answer = self._accept_resume(run, inp.resume, versions, pending, done)
                resume.append((RESUME, answer))
            writes = control_writes(Command(update=inp.update, goto=inp.goto)) or []
            if writes:
                for chan, _ in writes:
                    if chan not in channels and not chan.startswith("__"):
                        raise InvalidUpdateError(
                            f"Command(update=...) names unknown channel {chan!r}; "
                            f"channels: {sorted(c for c in channels if c != TASKS)}"
                        )
            if not versions:
                raise EmptyInputError(
                    "Command resumes or updates a thread, but this thread has no saved state; "
                    "start it with an input first"
                )
            return Start(resume, writes, None, False)
        if inp is None:
            if not versions:
                raise EmptyInputError(
                    "received no input, and the thread has no saved state to resume: "
                    "pass an input to start it"
                )
            # a checkpoint made by update_state (or a fork) already starts a
            # branch, unless the thread has moved past it
            forks = self.addressed and (self.replays_past or source not in ("update", "fork"))
            return Start([], [], None, forks)
        writes = list(map_input(self.input_keys, inp))
        if not writes:
            raise EmptyInputError(
                f"the input {inp!r} writes to no input channel ({self.input_keys!r})"
            )
        return Start([], [], writes, False)

    def _accept_resume(
        self,
        run: RunContext,
        resume: Any,
        versions: Mapping[str, Any],
        pending: Sequence[tuple[str, str, Any]],
        done: Mapping[str, Any],
    ) -> Any:
        """Check ``resume`` against the pending interrupts and hand it to
        ``run``; a resume that cannot be matched raises before anything is
        written. Returns what is saved: like a single value, a map of
        answers is saved so that they survive a crash before use."""
        # a task that interrupted and has finished since (it was resumed) waits no more
        waiting = {
            i.id: i
            for tid, chan, value in pending
            if chan == INTERRUPT and tid != NULL_TASK_ID and tid not in done
            for i in value
        }
        if not waiting and not self.nested and versions:
            raise NothingToResumeError(
                "Command(resume=...) was given, but nothing in this thread is waiting for a "
                "resume value: its last run finished or failed without an interrupt. Start "
                "a new run with an input, or invoke(None, config) to retry a failed run"
            )
        if isinstance(resume, dict) and resume and all(_is_interrupt_id(k) for k in resume):
            unknown = [k for k in resume if k not in waiting]
            # a nested graph gets its parent's map, checked there
            if unknown and not self.nested:
                raise InterruptNotPendingError(unknown, list(waiting.values()))
            run.resume_map = dict(resume)
            return resume
        if len(waiting) > 1:
            raise AmbiguousResumeError(list(waiting.values()))
        run.resume_slot.value = resume
        return resume
