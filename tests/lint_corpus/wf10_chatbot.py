"""A chatbot that keeps the conversation with `previous`."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task

Message = dict[str, str]


@task
def call_model(messages: list[Message]) -> Message:
    return {"role": "assistant", "content": f"you said {messages[-1]['content']}"}


@entrypoint(checkpointer=InMemorySaver())
def chatbot(
    inputs: list[Message], *, previous: list[Message] | None = None
) -> entrypoint.final[Message, list[Message]]:
    messages = [*(previous or []), *inputs]
    response = call_model(messages).result()
    return entrypoint.final(value=response, save=[*messages, response])
