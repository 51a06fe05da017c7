"""What recording attempts adds to each task, measured on the code it adds.

Whole-workload A/B runs cannot see a few microseconds on a loaded machine
(two runs of the same code differ by more), so this times the added path
itself, in CPU time, best of several rounds:

- the run's side: an attempt's start and end as the runner reports them
  (``AttemptRecorder``), its end from the task's writes, and the rows taken
  by the save (``AttemptLog``);
- the saver's side: ``put_writes`` of a functional-API task's two writes
  (its return value and its call record) with and without its attempt row,
  on ``InMemorySaver`` and on ``SqliteSaver`` (a file in a temporary
  directory).

Divide by the per-task times of ``docs/benchmarks.md`` for the overhead.

    python benchmarks/attempts_overhead.py
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pregelkit.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.pregel._exec.recorder import AttemptLog, AttemptRecorder

ROUNDS = 7
N = 3000


class _Task:
    """What ``AttemptLog`` reads of a task."""

    def __init__(self, i: int) -> None:
        self.id = f"00000000-0000-0000-0000-{i:012d}"
        self.name = "inc"


def best_us(fn: Callable[[int], Any]) -> float:
    """Best per-call CPU time over ``ROUNDS`` rounds of ``N`` calls, in µs."""
    best = float("inf")
    for r in range(ROUNDS):
        start = time.process_time()
        for i in range(N):
            fn(r * N + i)
        best = min(best, time.process_time() - start)
    return best / N * 1e6


class _Run:
    """What ``AttemptRecorder`` reads of the loop."""

    step = 0


def _events(log: AttemptLog) -> AttemptRecorder:
    return AttemptRecorder(log, _Run(), None, lambda task, outcome: None)


def run_side() -> float:
    log = AttemptLog("thread", "", "run")
    events = _events(log)

    def attempt(i: int) -> None:
        task = _Task(i)
        events.started(task, 1)  # type: ignore[arg-type]
        log.end_ok(task.id)

    return best_us(attempt)


def saver_side(saver: BaseCheckpointSaver[Any]) -> tuple[float, float]:
    config = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    log = AttemptLog("t", "", "run")
    events = _events(log)
    writes = [("__return__", 1), ("__call__", "inc:digest")]

    def plain(i: int) -> None:
        saver.put_writes(config, writes, f"plain-{i}")

    def recorded(i: int) -> None:
        task = _Task(i)
        events.started(task, 1)  # type: ignore[arg-type]
        saver.put_writes(config, writes, task.id, attempts=log.end_ok(task.id))

    return best_us(plain), best_us(recorded)


def main() -> int:
    print(f"run side (start, end, take): {run_side():.2f} µs per attempt")
    memory = saver_side(InMemorySaver())
    print(f"InMemorySaver.put_writes: {memory[0]:.2f} -> {memory[1]:.2f} µs with the attempt")
    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteSaver.from_conn_string(os.path.join(tmp, "state.db")) as sqlite,
    ):
        disk = saver_side(sqlite)
    print(f"SqliteSaver.put_writes: {disk[0]:.2f} -> {disk[1]:.2f} µs with the attempt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
