"""A helper builds the prompt each writing step receives."""

from datetime import date

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


def build_prompt(topic: str, section: str) -> str:
    # today's date in the prompt: resumed tomorrow, the recorded write() calls
    # have other arguments and the replay fails (NondeterminismError)
    return f"Today is {date.today():%A}. Write the {section} of a post on {topic}."  # expect: PK001


@task
def write(prompt: str) -> str:
    return prompt.upper()


@entrypoint(checkpointer=InMemorySaver())
def blog_post(topic: str) -> str:
    parts = [write(build_prompt(topic, s)) for s in ("intro", "body", "conclusion")]
    return "\n\n".join(p.result() for p in parts)
