"""What a saver keeps of each task or node attempt, for timelines.

Savers store these beside checkpoints (same thread, deleted and pruned with
it), so a run's history is read from the database the run already writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["ok", "error", "interrupted", "cached", "replayed", "timeout", "cancelled"]


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of one task or node. ``ended_at`` and ``outcome`` are None
    while it runs, and stay None when its process was killed."""

    thread_id: str
    checkpoint_ns: str
    run_id: str
    step: int
    task_id: str
    name: str
    attempt: int
    started_at: float
    ended_at: float | None
    outcome: Outcome | None
    error_type: str | None = None
    error_message: str | None = None
    pid: int | None = None
    host: str | None = None
    worker: str | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, None while unfinished."""
        return None if self.ended_at is None else self.ended_at - self.started_at
