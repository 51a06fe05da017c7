"""Workflows `pregelkit serve` serves in tests/test_serve.py and test_serve_streams.py."""

from __future__ import annotations

import time
from typing import Any

from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def double(x: int) -> int:
    return 2 * x


@entrypoint()
def echo(inputs: dict[str, Any]) -> dict[str, Any]:
    """Its input back, with ``n`` doubled by a task when given."""
    out = dict(inputs)
    if isinstance(inputs.get("n"), int):
        out["doubled"] = double(inputs["n"]).result()
    return out


@entrypoint()
def ask(inputs: dict[str, Any]) -> dict[str, Any]:
    """Stops for an answer, then returns it."""
    answer = interrupt({"question": f"publish {inputs.get('what')}?"})
    return {"what": inputs.get("what"), "answer": answer}


@entrypoint()
def boom(inputs: dict[str, Any]) -> dict[str, Any]:
    raise ValueError(f"boom: {inputs.get('why', 'no reason')}")


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@entrypoint()
def slow(inputs: dict[str, Any]) -> dict[str, Any]:
    """Takes ``seconds`` in naps of a tenth (a cancel stops it between two)."""
    seconds = float(inputs.get("seconds", 1.0))
    for _ in range(round(seconds * 10)):
        nap(0.1).result()
    return {"slept": seconds}


@entrypoint()
def talk(inputs: dict[str, Any]) -> dict[str, Any]:
    """Says ``n`` custom parts, each after a nap of ``pause`` seconds."""
    say = get_stream_writer()
    n = int(inputs.get("n", 10))
    for i in range(n):
        nap(float(inputs.get("pause", 0.02))).result()
        say({"i": i})
    return {"said": n}
