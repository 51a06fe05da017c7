"""One workflow calls another as a step."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def multiply(a: int, b: int) -> int:
    return a * b


@entrypoint()
def multiply_workflow(inputs: dict[str, int]) -> int:
    return multiply(inputs["a"], inputs["b"]).result()


@entrypoint(checkpointer=InMemorySaver())
def main(inputs: dict[str, int]) -> dict[str, int]:
    product = multiply_workflow.invoke({"a": inputs["x"], "b": inputs["y"]})
    return {"product": product}
