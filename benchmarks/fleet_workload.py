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


@task
def call_service(x: int) -> int:
    time.sleep(0.2)  # waiting on a service, as most workflow steps do
    return x + 1


@entrypoint()
def waits(x: int) -> int:
    """Two steps that wait on I/O (0.2 s each): a worker's threads overlap them."""
    return call_service(call_service(x).result()).result()
