"""Summarize every document in a folder, then join the summaries."""

import os

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def summarize(path: str) -> str:
    with open(path) as f:
        return f.read()[:100]


@entrypoint(checkpointer=InMemorySaver())
def summarize_folder(folder: str) -> str:
    # the listing is read again on replay (a new file shifts every later task)
    # and its order is the file system's
    futures = []
    for name in os.listdir(folder):  # expect: PK003 PK004
        futures.append(summarize(os.path.join(folder, name)))
    return "\n".join(f.result() for f in futures)
