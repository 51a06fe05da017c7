"""Async workflows: ``async def`` entrypoints and tasks, run with ``ainvoke``.

An async task call returns an awaitable future, so ``asyncio.gather`` fans
out. The checkpoint saver is ``AsyncSqliteSaver``; the run stops at an
``interrupt()`` and ``ainvoke(Command(resume=...))`` finishes it, with the
finished downloads replayed from the checkpoint rather than run again.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt

runs: list[str] = []
in_flight = [0, 0]  # downloads running now, most at once


@task
async def download(url: str) -> int:
    runs.append(url)
    in_flight[0] += 1
    in_flight[1] = max(in_flight)
    await asyncio.sleep(0.2)  # stands in for network I/O
    in_flight[0] -= 1
    return len(url)


@entrypoint()
async def mirror(urls: list[str]) -> dict[str, object]:
    sizes = await asyncio.gather(*(download(u) for u in urls))
    go = interrupt(f"{len(urls)} downloads, {sum(sizes)} bytes: store them? (yes/no)")
    return {"sizes": dict(zip(urls, sizes)), "stored": go == "yes"}


async def main() -> None:
    urls = [f"https://example.com/file{i}" for i in range(5)]
    config = {"configurable": {"thread_id": "mirror-1"}}
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "a.sqlite")) as saver:
            app = mirror.copy(checkpointer=saver)

            result = await app.ainvoke(urls, config)
            print(f"paused: {result['__interrupt__'][0].value}")
            print(f"downloads run: {len(runs)}, concurrently: {in_flight[1] == len(urls)}")

            result = await app.ainvoke(Command(resume="yes"), config)
            print(f"result: stored={result['stored']}, {len(result['sizes'])} files")
            print(f"downloads run in total: {len(runs)} (none again on resume)")


if __name__ == "__main__":
    asyncio.run(main())
