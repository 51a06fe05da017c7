"""A thread's history as runs of attempts, for code, tests and the CLI."""

from __future__ import annotations

from dataclasses import dataclass

from pregelkit.checkpoint.attempts import AttemptRecord


@dataclass(frozen=True, slots=True)
class RunTimeline:
    """One invoke, stream or resume of a thread: its attempts in start order."""

    run_id: str
    started_at: float
    ended_at: float | None
    attempts: tuple[AttemptRecord, ...]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Every run of one thread, oldest first."""

    thread_id: str
    runs: tuple[RunTimeline, ...]
