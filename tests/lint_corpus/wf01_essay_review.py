"""An essay is written by a task, a person approves or rejects it."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def write_essay(topic: str) -> str:
    return f"An essay about {topic}"


@entrypoint(checkpointer=InMemorySaver())
def review_workflow(topic: str) -> dict[str, object]:
    essay = write_essay(topic).result()
    is_approved = interrupt({"essay": essay, "action": "Please approve or reject the essay"})
    return {"essay": essay, "is_approved": is_approved}
