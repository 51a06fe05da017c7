"""Streaming: watch a workflow as it runs.

``stream_mode="updates"`` yields ``{task name: result}`` as each task
finishes, and ``{entrypoint name: return value}`` at the end.
``stream_mode="custom"`` yields whatever code inside a task or entrypoint
passes to the writer from ``get_stream_writer()`` (or to a parameter named
``writer``): progress, partial output, log lines. Ask for several modes at
once and each chunk comes as a ``(mode, chunk)`` pair.
"""

from __future__ import annotations

from typing import Any

from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.types import StreamWriter


@task
def tokenize(text: str) -> list[str]:
    return text.split()


@task
def translate(words: list[str]) -> str:
    emit = get_stream_writer()
    out = []
    for i, word in enumerate(words, 1):
        out.append(word.upper())
        emit({"progress": f"{i}/{len(words)}", "partial": " ".join(out)})
    return " ".join(out)


@entrypoint()
def pipeline(text: str, writer: StreamWriter) -> dict[str, Any]:
    writer("starting")  # a parameter named ``writer`` gets the same function
    words = tokenize(text).result()
    return {"words": len(words), "translation": translate(words).result()}


def main() -> None:
    text = "durable workflows from plain functions"

    print('stream_mode="updates":')
    for update in pipeline.stream(text, stream_mode="updates"):
        print(f"  {update}")

    print('stream_mode="custom":')
    for chunk in pipeline.stream(text, stream_mode="custom"):
        print(f"  {chunk}")

    print('stream_mode=["updates", "custom"]:')
    for mode, chunk in pipeline.stream(text, stream_mode=["updates", "custom"]):
        print(f"  {mode}: {chunk}")


if __name__ == "__main__":
    main()
