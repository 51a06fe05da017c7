"""``pregelkit serve``'s streams (issue 30), from LangGraph's own client:

* first event: a one-task run streamed with ``stream_mode="updates"``, 40
  times one after another: the median time from the request to its first
  ``updates`` event, and to ``end``;
* parts/s: one run emitting 10,000 ``custom`` parts, streamed whole;
* 200 at once: 200 one-task runs streamed from one async client: p50 and
  p99 of the first ``updates`` event and of ``end``, and runs/s.

The server runs its workers in process (8 runs at a time) on ``--db``
(a SQLite file by default, or a ``postgresql://`` URL). Prints the results
(docs/benchmarks.md, "Streams", quotes a run).

    python benchmarks/serve_streams.py [--db URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from langgraph_sdk import get_client, get_sync_client

FLOWS = """
from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task

@task
def one(x: int) -> int:
    return x + 1

@entrypoint()
def quick(inputs: dict) -> dict:
    return {"x": one(inputs["x"]).result()}

@entrypoint()
def chatty(inputs: dict) -> dict:
    say = get_stream_writer()
    for i in range(int(inputs["n"])):
        say({"i": i, "text": "token"})
    return {"n": inputs["n"]}
"""


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _first_event(url: str) -> str:
    client = get_sync_client(url=url, api_key=None)
    firsts, ends = [], []
    for _ in range(40):
        tid = client.threads.create()["thread_id"]
        start, first = time.perf_counter(), None
        for part in client.runs.stream(tid, "quick", input={"x": 1}, stream_mode="updates"):
            if part.event == "updates" and first is None:
                first = time.perf_counter() - start
        assert first is not None
        firsts.append(first)
        ends.append(time.perf_counter() - start)
    return (
        f"one-task run: first updates event p50 {statistics.median(firsts) * 1000:.0f} ms, "
        f"end p50 {statistics.median(ends) * 1000:.0f} ms"
    )


def _parts_per_second(url: str, n: int = 10_000) -> str:
    client = get_sync_client(url=url, api_key=None)
    start, got, first = time.perf_counter(), 0, 0.0
    for part in client.runs.stream(None, "chatty", input={"n": n}, stream_mode="custom"):
        if part.event == "custom":
            got += 1
            first = first or time.perf_counter() - start
    took = time.perf_counter() - start
    assert got == n
    rate = f"{n / took:,.0f} parts/s"
    return f"{n} custom parts in {took:.2f} s: {rate}, first after {first * 1000:.0f} ms"


async def _at_once(url: str, runs: int = 200) -> str:
    client = get_client(url=url, api_key=None)

    async def one() -> tuple[float, float]:
        start, first = time.perf_counter(), None
        async for part in client.runs.stream(None, "quick", input={"x": 1}, stream_mode="updates"):
            if part.event == "updates" and first is None:
                first = time.perf_counter() - start
        assert first is not None
        return first, time.perf_counter() - start

    start = time.perf_counter()
    done = await asyncio.gather(*(one() for _ in range(runs)))
    took = time.perf_counter() - start
    firsts, ends = [d[0] for d in done], [d[1] for d in done]
    return (
        f"{runs} streams at once: first updates event p50 {_quantile(firsts, 0.5):.2f} s "
        f"p99 {_quantile(firsts, 0.99):.2f} s; end p50 {_quantile(ends, 0.5):.2f} s "
        f"p99 {_quantile(ends, 0.99):.2f} s; {runs / took:.0f} runs/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a SQLite file or postgresql:// URL (default: a new file)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="serve-streams-"))
    (tmp / "flows.py").write_text(FLOWS)
    (tmp / "pregelkit.json").write_text(
        json.dumps({"graphs": {"quick": "flows.py:quick", "chatty": "flows.py:chatty"}})
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = args.db or str(tmp / "bench.sqlite")
    command = [sys.executable, "-m", "pregelkit", "serve", "--config", "pregelkit.json"]
    server = subprocess.Popen(
        [*command, "--db", db, "--port", str(port)],
        cwd=tmp,
        env=os.environ.copy(),
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/ok").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        print(_first_event(url))
        print(_parts_per_second(url))
        print(asyncio.run(_at_once(url)))
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
