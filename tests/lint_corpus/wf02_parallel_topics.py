"""Paragraphs for several topics written in parallel, duplicates dropped first."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def write_paragraph(topic: str) -> str:
    return f"A paragraph about {topic}."


@entrypoint(checkpointer=InMemorySaver())
def parallel_workflow(topics: list[str]) -> str:
    unique = set(topics)  # drop duplicates
    # a set of strings is ordered by a per-process hash seed: a resumed process
    # calls the tasks in another order, and its replay fails (NondeterminismError)
    futures = [write_paragraph(t) for t in unique]  # expect: PK004
    return "\n\n".join(f.result() for f in futures)
