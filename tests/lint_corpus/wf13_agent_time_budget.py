"""An agent that stops asking the model when its time budget runs out."""

import time
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def call_model(messages: list[str]) -> dict[str, Any]:
    return {"content": f"thought {len(messages)}", "done": len(messages) > 5}


@entrypoint(checkpointer=InMemorySaver())
def agent(question: str) -> list[str]:
    # a replay after a crash has a new budget: it may stop before the calls
    # the recorded run made, or go on past where the recorded run stopped
    deadline = time.monotonic() + 30  # expect: PK001
    thoughts = [question]
    while time.monotonic() < deadline:  # expect: PK001
        reply = call_model(thoughts).result()
        thoughts.append(reply["content"])
        if reply["done"]:
            break
    return thoughts
