"""``async def`` workflows with async tasks, which `pregelkit serve` and
`pregelkit worker` run on an ``AsyncWorker`` (tests/test_serve_async.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
async def atriple(x: int) -> int:
    await asyncio.sleep(0)
    return 3 * x


@entrypoint()
async def atalk(inputs: dict[str, Any]) -> dict[str, Any]:
    """Says ``n`` custom parts, each from an async task's result."""
    say = get_stream_writer()
    n = int(inputs.get("n", 3))
    total = 0
    for i in range(n):
        got = await atriple(i)
        say({"i": i, "tripled": got})
        total += got
    return {"total": total}


@entrypoint()
async def aask(inputs: dict[str, Any]) -> dict[str, Any]:
    """Stops for an answer, then returns it with a task's result."""
    answer = interrupt({"question": f"publish {inputs.get('what')}?"})
    return {"answer": answer, "tripled": await atriple(len(str(answer)))}


@task
async def anap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@entrypoint()
async def aslow(inputs: dict[str, Any]) -> dict[str, Any]:
    """Takes ``seconds`` in async naps of a tenth (a cancel stops it between two)."""
    seconds = float(inputs.get("seconds", 1.0))
    for _ in range(round(seconds * 10)):
        await anap(0.1)
    return {"slept": seconds}
