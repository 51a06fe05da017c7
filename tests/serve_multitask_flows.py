"""Workflows tests/test_serve_multitask.py serves: ``tally`` keeps, across
the runs of a thread, the list of what each run added, so the order the
runs ran in (and a fork's starting point) shows in the thread's state."""

from __future__ import annotations

import time
from typing import Any

from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@entrypoint()
def tally(inputs: dict[str, Any], previous: Any = None) -> dict[str, Any]:
    """Adds ``inputs["add"]`` to the list the thread's run before returned,
    after ``naps`` naps of ``pause`` seconds (a cancel stops it between two)."""
    for _ in range(int(inputs.get("naps", 0))):
        nap(float(inputs.get("pause", 0.1))).result()
    seen = list((previous or {}).get("log", []))
    return {"log": [*seen, inputs["add"]]}


@entrypoint()
def confirm(inputs: dict[str, Any]) -> dict[str, Any]:
    """Asks for an answer, then naps ``naps`` times before returning it."""
    answer = interrupt({"question": "go?"})
    for _ in range(int(inputs.get("naps", 0))):
        nap(0.1).result()
    return {"answer": answer}
