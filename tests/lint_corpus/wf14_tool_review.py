"""A person reviews each shell command the model proposes before it runs."""

import subprocess
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def propose_commands(goal: str) -> list[str]:
    return [f"echo {goal}"]


@entrypoint(checkpointer=InMemorySaver())
def operator(goal: str) -> list[dict[str, Any]]:
    results = []
    for command in propose_commands(goal).result():
        review = interrupt({"command": command, "question": "run it? (yes/no)"})
        if review != "yes":
            results.append({"command": command, "skipped": True})
            continue
        # runs again on every replay of this run, e.g. after each later interrupt
        done = subprocess.run(command, shell=True, capture_output=True, text=True)  # expect: PK003
        results.append({"command": command, "output": done.stdout})
    return results
