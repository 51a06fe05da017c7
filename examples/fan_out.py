"""Fan-out and fan-in: many tasks at once, then one step that combines them.

With the functional API, calling a task does not wait for it: it returns a
future. Call the task for every item first (fan-out: all of them run in
parallel), then read the results (fan-in). Here eight ``score`` tasks that
each take 0.2 s finish together in about 0.2 s, not 1.6 s.

The second half does the same on the low-level engine: ``split`` returns one
``Send`` per item, each becomes a PUSH task of the next superstep, and their
writes meet in a ``Topic`` channel that ``combine`` reads.
"""

from __future__ import annotations

import sys
import time

from pregelkit.channels import LastValue, Topic
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import Send

DELAY = 0.2


def say(line: str) -> None:
    # one write per line: tasks run in threads, and print() may interleave
    sys.stdout.write(line + "\n")


@task
def score(word: str) -> int:
    time.sleep(DELAY)  # stands in for I/O: a model call, an HTTP request
    return sum(ord(c) - ord("a") + 1 for c in word)


@task
def pick_best(scores: dict[str, int]) -> str:
    return max(scores, key=lambda w: scores[w])


@entrypoint()
def best_word(words: list[str]) -> dict[str, object]:
    futures = {w: score(w) for w in words}  # fan-out: all eight start now
    scores = {w: f.result() for w, f in futures.items()}  # fan-in
    return {"scores": scores, "best": pick_best(scores).result()}


# the same shape with nodes and channels
def split(words: list[str]) -> list[Send]:
    return [Send("measure", w) for w in words]


def measure(word: str) -> int:
    time.sleep(DELAY)
    return len(word)


def combine(lengths: list[int]) -> int:
    return sum(lengths)


app = Pregel(
    nodes={
        "split": NodeBuilder().subscribe_only("words").do(split),
        "measure": NodeBuilder().do(measure).write_to("lengths"),  # runs only when sent to
        "combine": NodeBuilder().subscribe_only("lengths").do(combine).write_to("total"),
    },
    channels={
        "words": LastValue(list),
        "lengths": Topic(int),
        "total": LastValue(int),
    },
    input_channels="words",
    output_channels="total",
)


def main() -> None:
    words = ["pregel", "superstep", "channel", "checkpoint", "task", "node", "send", "write"]

    started = time.perf_counter()
    result = best_word.invoke(words)
    elapsed = time.perf_counter() - started
    say(f"best word: {result['best']} (score {result['scores'][result['best']]})")
    serial = DELAY * len(words)
    say(f"{len(words)} tasks of {DELAY} s ran in parallel: {elapsed < serial / 2}")

    started = time.perf_counter()
    total = app.invoke(words)
    elapsed = time.perf_counter() - started
    say(f"total length via Send and Topic: {total}")
    say(f"{len(words)} sends ran in parallel: {elapsed < serial / 2}")


if __name__ == "__main__":
    main()
