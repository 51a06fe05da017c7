"""A workflow streams its progress to the caller while it works."""

from datetime import datetime

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task


@task
def add_one(x: int) -> int:
    return x + 1


@entrypoint(checkpointer=InMemorySaver())
def main(inputs: dict[str, int]) -> int:
    writer = get_stream_writer()
    writer({"status": "started"})
    result = add_one(inputs["x"]).result()
    # reviewed: a false positive, the time is only streamed and never saved or branched on
    writer(f"add_one finished at {datetime.now():%H:%M:%S}")
    return result
