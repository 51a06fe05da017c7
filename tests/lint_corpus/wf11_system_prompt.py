"""A chatbot that puts a system prompt before the user's messages."""

from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


@task
def call_model(messages: list[dict[str, str]]) -> dict[str, str]:
    return {"role": "assistant", "content": "hello"}


@entrypoint(checkpointer=InMemorySaver())
def assistant(inputs: dict[str, Any]) -> dict[str, str]:
    messages = inputs["messages"]
    for message in messages:
        # changes the input in place, as the insert below does: the caller's
        # object changes, and a checkpoint written after these lines saves the
        # changed input, which a replay changes again
        message["content"] = message["content"].strip()  # expect: PK005
    messages.insert(0, SYSTEM)  # expect: PK005
    return call_model(messages).result()
