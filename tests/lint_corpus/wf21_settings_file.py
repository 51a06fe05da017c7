"""A report whose settings and template are read from files."""

import json
from pathlib import Path
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def render(template: str, rows: list[dict[str, Any]]) -> str:
    return template.format(count=len(rows))


@task
def query(limit: int) -> list[dict[str, Any]]:
    return [{"n": i} for i in range(limit)]


@entrypoint(checkpointer=InMemorySaver())
def report(settings_path: str) -> str:
    # an edited file changes a run that is already half done
    with open(settings_path) as f:  # expect: PK003
        settings = json.load(f)
    template = Path(settings["template"]).read_text()  # expect: PK003
    rows = query(settings["limit"]).result()
    return render(template, rows).result()
