"""Ask for an age until the answer is a valid number."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint
from pregelkit.types import interrupt


@entrypoint(checkpointer=InMemorySaver())
def ask_age(name: str) -> str:
    question = f"How old is {name}?"
    while True:
        answer = interrupt(question)
        if isinstance(answer, int) and 0 < answer < 150:
            return f"{name} is {answer}"
        question = f"'{answer}' is not an age. How old is {name}?"
