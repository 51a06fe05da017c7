"""An expensive step cached for two minutes, keyed by its input."""

import time

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy


@task(cache_policy=CachePolicy(ttl=120))
def slow_add(x: int) -> int:
    time.sleep(1)
    return x * 2


@entrypoint(checkpointer=InMemorySaver())
def main(inputs: dict[str, int]) -> dict[str, int]:
    first = slow_add(inputs["x"]).result()
    second = slow_add(inputs["x"]).result()  # served from the cache
    return {"first": first, "second": second}
