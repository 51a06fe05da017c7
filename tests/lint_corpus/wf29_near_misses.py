"""A workflow that does everything the lint watches for, the recorded way."""

import random
import time
import uuid
from pathlib import Path
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt

LOADED_AT = time.time()  # module level: read once at import, never replayed


@task
def now() -> float:
    return time.time()


@task
def read_notes(path: str) -> str:
    return Path(path).read_text()


@task
def handle(item: str) -> str:
    return item.upper()


@entrypoint(checkpointer=InMemorySaver())
def careful(inputs: dict[str, Any]) -> dict[str, Any]:
    started = now().result()
    notes = read_notes(str(Path(inputs["folder"]) / "notes.txt")).result()
    shuffled = list(inputs["items"])
    random.Random(inputs["seed"]).shuffle(shuffled)
    run_key = uuid.uuid5(uuid.NAMESPACE_URL, inputs["url"])
    handled = [handle(item) for item in sorted(set(shuffled))]
    answers = [interrupt(f"keep {item}?") for item in inputs["items"]]
    result = dict(inputs)
    result["done"] = True
    return {
        **result,
        "started": started,
        "notes": notes,
        "key": str(run_key),
        "handled": [h.result() for h in handled],
        "answers": answers,
    }
