"""The workflow of the lifecycle tests (tests/test_lifecycle*.py), importable
by the command line in-process as ``lifecycle_flows:flow``.

``flow(n)`` calls ``step`` then ``tail``; for ``n >= 10`` it asks a question
between them. ``FAIL["step"]`` makes ``step`` raise; ``RAN`` lists the task
bodies that really ran, so a test tells a replay from a run.
"""

from __future__ import annotations

from typing import Any

from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt

FAIL = {"step": False}
RAN: list[str] = []


@task
def step(n: int) -> int:
    RAN.append("step")
    if FAIL["step"]:
        raise ValueError("step failed on purpose")
    return n + 1


@task
def tail(n: int) -> int:
    RAN.append("tail")
    return n * 2


@entrypoint()
def flow(n: int) -> Any:
    a = step(n).result()
    if n >= 10:
        answer = interrupt(f"go on with {a}?")
        a += len(str(answer))
    return tail(a).result()
