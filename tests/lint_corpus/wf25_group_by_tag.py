"""Posts are grouped by tag and each group is classified."""

from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def classify(tag: str, posts: list[str]) -> str:
    return f"{tag}: {len(posts)} posts"


@entrypoint(checkpointer=InMemorySaver())
def classify_tags(posts: list[dict[str, Any]]) -> list[str]:
    tags = {tag for post in posts for tag in post["tags"]}
    groups: dict[str, list[str]] = {tag: [] for tag in tags}
    for post in posts:
        for tag in post["tags"]:
            groups[tag].append(post["title"])
    # the dict's order is the set's: by string hash, new in each process
    futures = [classify(tag, titles) for tag, titles in groups.items()]  # expect: PK004
    return [f.result() for f in futures]
