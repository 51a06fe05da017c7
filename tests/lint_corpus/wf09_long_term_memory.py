"""A chat turn that recalls and stores facts about the user in a store."""

import uuid
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.store.memory import InMemoryStore


@task
def call_model(messages: list[dict[str, str]], memories: list[str]) -> dict[str, str]:
    return {"role": "assistant", "content": f"I know {len(memories)} things about you"}


@entrypoint(checkpointer=InMemorySaver(), store=InMemoryStore())
def chat(inputs: dict[str, Any], *, store: Any) -> dict[str, str]:
    namespace = ("memories", inputs["user_id"])
    memories = [item.value["data"] for item in store.search(namespace)]
    last = inputs["messages"][-1]["content"]
    if last.lower().startswith("remember"):
        # a new key on each replay: the memory is stored again under another id
        store.put(namespace, str(uuid.uuid4()), {"data": last})  # expect: PK002
    return call_model(inputs["messages"], memories).result()
