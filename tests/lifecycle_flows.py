"""The workflow of the lifecycle tests (tests/test_lifecycle*.py), importable
by the command line in-process as ``lifecycle_flows:flow``.

``flow(n)`` calls ``step`` then ``tail``; for ``n >= 10`` it asks a question
between them; ``flow(-1)`` sleeps an hour between them and ``flow(-2)`` waits
for a message on topic ``go`` (on a worker: ``sleeping``, ``waiting``).
``FAIL["step"]`` makes ``step`` raise; ``RAN`` lists the task bodies that
really ran, so a test tells a replay from a run.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pregelkit import durable
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
    if n == -1:
        durable.sleep(3600)
    elif n == -2:
        a += len(str(durable.recv(topic="go")))
    elif n >= 10:
        answer = interrupt(f"go on with {a}?")
        a += len(str(answer))
    return tail(a).result()


@task
def cancel_own_thread() -> None:
    """``pregelkit cancel`` from another terminal, as a run sees it: the
    thread is marked in the database named by ``LIFECYCLE_DB`` meanwhile."""
    from pregelkit.checkpoint.sqlite import SqliteSaver
    from pregelkit.config import get_config

    thread_id = get_config()["configurable"]["thread_id"]
    with SqliteSaver.from_conn_string(os.environ["LIFECYCLE_DB"]) as saver:
        saver.put_thread_control(thread_id, "cancelled")
    time.sleep(0.5)  # the run notices within POLL_SECONDS


@entrypoint()
def cancelled_meanwhile(n: int) -> int:
    cancel_own_thread().result()
    return tail(n).result()


FAILED_ONCE: set[tuple[str, int]] = set()
"""(thread, step) of the ``varied`` steps that failed already: each fails once."""


@task
def part(i: int, total: int, fail: bool) -> int:
    from pregelkit.config import get_config

    RAN.append("step")
    thread_id = get_config()["configurable"]["thread_id"]
    if fail and (thread_id, i) not in FAILED_ONCE:
        FAILED_ONCE.add((thread_id, i))
        raise ValueError(f"step {i} fails once, on purpose")
    return total + i + 1


@entrypoint()
def varied(spec: dict[str, Any]) -> int:
    """A small workflow of ``spec["steps"]`` steps, asking a question after
    step ``spec["ask"]`` and failing once in step ``spec["fail"]`` (each
    optional): the random workflows of tests/test_lifecycle_properties.py."""
    total = 0
    for i in range(spec["steps"]):
        total = part(i, total, spec.get("fail") == i).result()
        if spec.get("ask") == i:
            answer = interrupt(f"go on after step {i}?")
            total += len(str(answer))
    return total
