"""A counter that remembers its last value across runs on the same thread."""

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint


@entrypoint(checkpointer=InMemorySaver())
def accumulate(n: int, *, previous: int | None = None) -> entrypoint.final[int, int]:
    previous = previous or 0
    total = previous + n
    # return the previous total to the caller, save the new one for the next run
    return entrypoint.final(value=previous, save=total)
