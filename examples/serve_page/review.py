"""The workflow behind the browser page in this directory: a draft is
written and checked by two tasks, then the run stops at an ``interrupt``
asking a person whether to publish it, and ends with their answer.

Served by ``pregelkit serve --config pregelkit.json --static static``
(see README.md here); ``static/index.html`` starts it, shows each update
as it streams, and answers the question from a button.
"""

from __future__ import annotations

from typing import Any

from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def draft(topic: str) -> str:
    return f"A short note about {topic}."


@task
def count_words(text: str) -> int:
    return len(text.split())


@entrypoint()
def review(inputs: dict[str, Any]) -> dict[str, Any]:
    """Drafts a note on ``inputs["topic"]``, asks whether to publish it."""
    text = draft(str(inputs.get("topic", "pregelkit"))).result()
    words = count_words(text).result()
    answer = interrupt({"question": f"Publish this {words}-word draft?", "draft": text})
    return {"draft": text, "words": words, "published": answer == "yes"}
