"""A run that fails in its second step and is resumed: the first step's result is kept."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task

attempts = 0


@task
def get_info() -> str:
    global attempts
    attempts += 1
    if attempts < 2:
        raise ValueError("failure")
    return "OK"


@task
def slow_task() -> str:
    return "Ran slow task."


@entrypoint(checkpointer=InMemorySaver())
def main(inputs: dict[str, str]) -> str:
    slow = slow_task().result()
    info = get_info().result()
    return f"{slow} {info}"
