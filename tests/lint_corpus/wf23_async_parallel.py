"""An async workflow awaits several tasks at once."""

import asyncio

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
async def score(text: str) -> float:
    await asyncio.sleep(0.01)
    return len(text) / 100


@entrypoint(checkpointer=InMemorySaver())
async def rank(texts: list[str]) -> list[tuple[str, float]]:
    scores = await asyncio.gather(*(score(text) for text in texts))
    return sorted(zip(texts, scores, strict=True), key=lambda pair: -pair[1])
