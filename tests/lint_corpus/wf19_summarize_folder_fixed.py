"""Summarize every document in a folder: the listing is a recorded step."""

import os

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def list_documents(folder: str) -> list[str]:
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))


@task
def summarize(path: str) -> str:
    with open(path) as f:
        return f.read()[:100]


@entrypoint(checkpointer=InMemorySaver())
def summarize_folder(folder: str) -> str:
    paths = list_documents(folder).result()
    futures = [summarize(path) for path in paths]
    return "\n".join(f.result() for f in futures)
