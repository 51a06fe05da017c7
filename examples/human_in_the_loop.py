"""Human review with interrupts: several questions at once, answered by id.

Three sections are drafted, then reviewed in parallel: each review task calls
``interrupt()``, so the run stops with three questions pending. A reviewer
answers two of them by interrupt id, the run continues and stops again for
the third; after that one answer, the workflow asks for a final sign-off.
Every stop is a checkpoint in a SQLite file, so each answer could come from a
different process, days later.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt


@task
def draft(topic: str) -> str:
    print(f"drafting {topic!r}")
    return f"All about {topic}."


@task
def review(section: str) -> str:
    verdict = interrupt({"section": section, "question": "approve, or give an edit"})
    return section if verdict == "approve" else verdict


@entrypoint()
def write_document(topics: list[str]) -> dict[str, object]:
    sections = [draft(t).result() for t in topics]
    reviewed = [review(s) for s in sections]  # three reviews at once
    document = "\n".join(r.result() for r in reviewed)
    signed_off = interrupt({"document": document, "question": "publish?"})
    return {"document": document, "published": signed_off == "yes"}


def show(result: dict[str, Any]) -> None:
    # parallel tasks interrupt in whatever order they run: sort for a stable printout
    for pending in sorted(result.get("__interrupt__", []), key=lambda i: str(i.value)):
        print(f"  waiting: {pending.value}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "review.sqlite")
        config = {"configurable": {"thread_id": "doc-1"}}
        with SqliteSaver.from_conn_string(db) as saver:
            app = write_document.copy(checkpointer=saver)

            print("run 1: draft and ask for three reviews")
            result = app.invoke(["pregel", "supersteps", "checkpoints"], config)
            show(result)
            ids = {i.value["section"]: i.id for i in result["__interrupt__"]}
            print(f"{len(ids)} questions pending")

            print("run 2: answer two of them, by interrupt id")
            answers = {
                ids["All about pregel."]: "approve",
                ids["All about supersteps."]: "Supersteps run in parallel, then apply writes.",
            }
            result = app.invoke(Command(resume=answers), config)
            show(result)

            print("run 3: answer the last review (one pending, so no id needed)")
            result = app.invoke(Command(resume="approve"), config)
            show(result)

            print("run 4: sign off")
            result = app.invoke(Command(resume="yes"), config)
            print(result["document"])
            print(f"published: {result['published']}")

            state = app.get_state(config)
            print(f"pending after the last answer: {len(state.interrupts)}")


if __name__ == "__main__":
    main()
