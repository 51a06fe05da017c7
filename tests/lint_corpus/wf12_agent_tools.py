"""A tool-calling agent: the model asks for tools until it can answer."""

from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def call_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if len(messages) > 2:
        return {"role": "assistant", "content": "done", "tool_calls": []}
    return {"role": "assistant", "content": "", "tool_calls": [{"name": "search", "args": {}}]}


@task
def call_tool(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "content": f"ran {tool_call['name']}"}


@entrypoint(checkpointer=InMemorySaver())
def agent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    history = list(messages)
    response = call_model(history).result()
    while response["tool_calls"]:
        futures = [call_tool(call) for call in response["tool_calls"]]
        history = [*history, response, *(f.result() for f in futures)]
        response = call_model(history).result()
    return [*history, response]
