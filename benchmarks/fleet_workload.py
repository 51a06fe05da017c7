"""Workflows the fleet benchmark's worker processes serve (benchmarks/fleet.py)."""

from __future__ import annotations

import time

from pregelkit.func import entrypoint, task


@task
def add(x: int, y: int) -> int:
    return x + y


@entrypoint()
def short(x: int) -> int:
    """A short workflow: two tasks, as many a service runs per request."""
    return add(add(x, 1).result(), 1).result()


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@entrypoint()
def sleepy(steps: int) -> int:
    """Long enough to kill its worker midway."""
    for _ in range(steps):
        nap(0.1).result()
    return steps
