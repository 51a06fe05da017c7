"""Two agents hand a conversation to each other; one of them is picked to start."""

import random

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def travel_advisor(messages: list[str]) -> tuple[str, str | None]:
    return "Go to Aruba.", "hotel_advisor" if len(messages) < 3 else None


@task
def hotel_advisor(messages: list[str]) -> tuple[str, str | None]:
    return "Stay at the beach.", None


AGENTS = {"travel_advisor": travel_advisor, "hotel_advisor": hotel_advisor}


@entrypoint(checkpointer=InMemorySaver())
def multi_agent(messages: list[str]) -> list[str]:
    # a replay may start with the other agent: its first call no longer matches the record
    name: str | None = random.choice(list(AGENTS))  # expect: PK002
    history = list(messages)
    while name is not None:
        reply, name = AGENTS[name](history).result()
        history.append(reply)
    return history
