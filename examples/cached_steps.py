"""Cached steps: a deterministic task's result is reused across processes.

``CachePolicy`` on a task plus a ``SqliteCache`` on the entrypoint: the first
process runs ``embed`` for each text and stores the results in a SQLite file;
a second process, on a new thread, gets them from the file without running
``embed`` at all. Clearing the task's cache makes the third process run it
again. ``key_func`` decides what counts as the same input (here: case does
not matter).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pregelkit.cache.sqlite import SqliteCache
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy


def normalized(text: str) -> str:
    return text.lower()


@task(cache_policy=CachePolicy(key_func=normalized, ttl=3600))
def embed(text: str) -> list[float]:
    print(f"  computing embed({text!r})")
    time.sleep(0.05)  # stands in for a slow, deterministic computation
    return [float(len(word)) for word in text.lower().split()]


@entrypoint()
def index(texts: list[str]) -> dict[str, list[float]]:
    return {t: embed(t).result() for t in texts}


def child(cache_path: str, texts: list[str], clear: bool) -> None:
    """One process: run the workflow with the shared cache file."""
    cache: SqliteCache[object] = SqliteCache(path=cache_path)
    if clear:
        embed.clear_cache(cache)
        print("  cleared embed's cache")
    result = index.copy(cache=cache).invoke(texts)
    print(f"  result: {result}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = str(Path(tmp) / "cache.sqlite")
        for label, texts, extra in [
            ("process 1: empty cache", ["Hello world", "Pregel in Python"], []),
            ("process 2: same texts in capitals, new process", ["HELLO WORLD"], []),
            ("process 3: after embed.clear_cache()", ["Hello world"], ["--clear"]),
        ]:
            print(label, flush=True)
            command = [sys.executable, __file__, "--child", cache_path, *extra, "--", *texts]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        texts = sys.argv[sys.argv.index("--") + 1 :]
        child(sys.argv[sys.argv.index("--child") + 1], texts, clear="--clear" in sys.argv)
    else:
        main()
