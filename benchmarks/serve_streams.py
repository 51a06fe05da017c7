"""``pregelkit serve``'s streams (issue 30) beside LangGraph's own dev server,
both driven by the same async ``langgraph-sdk`` client code:

* one after another: a one-task run streamed with ``stream_mode="updates"``
  on a new thread, 40 times: the median time from the request to its first
  ``updates`` event, and to the stream's end;
* parts/s: one stateless run emitting 10,000 ``custom`` parts, streamed whole;
* 200 at once: 200 stateless one-task runs streamed from one async client
  (``runs.stream(None, ...)``, all started together): p50 and p99 of the
  first event (any), of the first ``updates`` event and of the end, and
  runs/s.

``pregelkit serve`` runs its workers in process on ``--db`` (a new SQLite
file by default, or a ``postgresql://`` URL), 10 runs at a time;
``langgraph dev`` runs in a virtual environment of its own
(``--langgraph-venv``, made with pip on first use; when that fails, the
section says why), twice: ``async def`` workflows 10 runs at a time (its
default), ``def`` ones ``SYNC_JOBS`` at a time (see there). Each round
measures every server, in turn; the figures are medians over rounds.

Writes its section of docs/benchmarks.md (between ``<!-- serve-streams -->``
markers).

    python benchmarks/serve_streams.py            # full: writes docs/benchmarks.md
    python benchmarks/serve_streams.py --quick    # small, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from serve_servers import langgraph_cli, langgraph_server, pregelkit_server

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- serve-streams:start -->", "<!-- serve-streams:end -->"
CONCURRENCY = 10
# LangGraph's dev server runs a ``def`` entrypoint in its event loop's default
# executor (min(32, CPUs + 4) threads) and the entrypoint's task in a thread
# of the same pool: with as many ``def`` runs at once as threads, each waits
# for a task no thread is left to run, for ever (10 at a time on 2 CPUs).
# Its ``def`` workflows run 4 at a time, which 2 CPUs' 6 threads allow.
SYNC_JOBS = 4
# one server's figures of a round take seconds; a hung server fails the run
MEASURE_TIMEOUT = 600.0


@dataclass(frozen=True)
class Sizes:
    one_by_one: int
    parts: int
    at_once: int
    rounds: int


FULL = Sizes(one_by_one=40, parts=10_000, at_once=200, rounds=3)
QUICK = Sizes(one_by_one=10, parts=1_000, at_once=50, rounds=1)


@dataclass
class Figures:
    """One server's figures of one round, in seconds."""

    first_updates_p50: float
    end_p50: float
    parts_per_second: float
    parts_took: float
    parts_first: float
    at_once_first_any: list[float]
    at_once_first_updates: list[float]
    at_once_end: list[float]
    runs_per_second: float


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _stream_one(client: LangGraphClient, thread_id: str | None) -> tuple[float, float, float]:
    """One ``quick`` run streamed: seconds to its first event, first ``updates``, end."""
    start, first, updates = time.perf_counter(), None, None
    async for part in client.runs.stream(thread_id, "quick", input={"x": 1}, stream_mode="updates"):
        now = time.perf_counter() - start
        first = now if first is None else first
        if part.event == "updates" and updates is None:
            updates = now
        if part.event == "error":
            raise RuntimeError(f"run failed: {part.data}")
    assert first is not None and updates is not None, "no updates event"
    return first, updates, time.perf_counter() - start


async def _parts(client: LangGraphClient, n: int) -> tuple[float, float]:
    start, got, first = time.perf_counter(), 0, 0.0
    async for part in client.runs.stream(None, "chatty", input={"n": n}, stream_mode="custom"):
        if part.event == "custom":
            got += 1
            first = first or time.perf_counter() - start
    assert got == n, f"{got} custom parts of {n}"
    return time.perf_counter() - start, first


async def _measure(url: str, sizes: Sizes) -> Figures:
    client = get_client(url=url, api_key=None)
    one_by_one = []
    for _ in range(sizes.one_by_one):
        thread = await client.threads.create()
        one_by_one.append(await _stream_one(client, thread["thread_id"]))
    took, first = await _parts(client, sizes.parts)
    start = time.perf_counter()
    done = await asyncio.gather(*(_stream_one(client, None) for _ in range(sizes.at_once)))
    at_once = time.perf_counter() - start
    return Figures(
        first_updates_p50=statistics.median(d[1] for d in one_by_one),
        end_p50=statistics.median(d[2] for d in one_by_one),
        parts_per_second=sizes.parts / took,
        parts_took=took,
        parts_first=first,
        at_once_first_any=[d[0] for d in done],
        at_once_first_updates=[d[1] for d in done],
        at_once_end=[d[2] for d in done],
        runs_per_second=sizes.at_once / at_once,
    )


async def _warm_up(url: str) -> None:
    """Untimed: the graphs' first import and first runs on each server."""
    client = get_client(url=url, api_key=None)
    for _ in range(3):
        await _stream_one(client, None)
    await _parts(client, 100)


def _med(rounds: list[Figures], value: Callable[[Figures], float]) -> float:
    return statistics.median(value(f) for f in rounds)


def _cells(rounds: list[Figures]) -> list[str]:
    """One server's column of the table: medians over rounds."""

    def p50_p99(pick: Callable[[Figures], list[float]]) -> str:
        p50 = _med(rounds, lambda f: _quantile(pick(f), 0.5))
        p99 = _med(rounds, lambda f: _quantile(pick(f), 0.99))
        return f"{p50:.2f} / {p99:.2f} s"

    rates = ", ".join(f"{f.runs_per_second:.0f}" for f in rounds)
    return [
        f"{_med(rounds, lambda f: f.first_updates_p50) * 1000:.0f} / "
        f"{_med(rounds, lambda f: f.end_p50) * 1000:.0f} ms",
        f"{_med(rounds, lambda f: f.parts_per_second):,.0f} parts/s "
        f"({_med(rounds, lambda f: f.parts_took):.2f} s), first after "
        f"{_med(rounds, lambda f: f.parts_first) * 1000:.0f} ms",
        p50_p99(lambda f: f.at_once_first_any),
        p50_p99(lambda f: f.at_once_first_updates),
        p50_p99(lambda f: f.at_once_end),
        f"{_med(rounds, lambda f: f.runs_per_second):.0f} ({rates})",
    ]


def _table(columns: dict[str, list[str]], sizes: Sizes) -> list[str]:
    n = sizes.at_once
    rows = [
        f"a one-task run on a new thread, {sizes.one_by_one} one after another: "
        "first `updates` / end, p50",
        f"one run emitting {sizes.parts:,} `custom` parts",
        f"{n} at once: first event (`metadata`), p50 / p99",
        f"{n} at once: first `updates` event, p50 / p99",
        f"{n} at once: end of stream, p50 / p99",
        f"{n} at once: runs/s (each round)",
    ]
    lines = [
        "| figure | " + " | ".join(columns) + " |",
        "| --- |" + " --- |" * len(columns),
    ]
    for i, row in enumerate(rows):
        lines.append(f"| {row} | " + " | ".join(c[i] for c in columns.values()) + " |")
    return lines


def _section(
    table: list[str], sizes: Sizes, db: str, langgraph: str, ran_langgraph: bool, load: str
) -> str:
    end_load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    where = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    if not ran_langgraph:
        notes = [f"LangGraph dev server: not installable here ({langgraph})."]
    else:
        notes = [
            f"- LangGraph's dev server is `langgraph dev` ({langgraph}), in a virtual "
            "environment of its own, serving the same workflows written with LangGraph.",
            "- It does less per run. Its runs, threads and checkpoints live in the "
            "server's memory (written to a file now and then for the next "
            "`langgraph dev`), its queue and streams are in-process queues: a crash "
            "loses what it holds. A stateless run (`runs.stream(None, ...)`, as "
            f"here for the {sizes.at_once} at once and the `custom` parts) runs with "
            "no checkpointer at all. `pregelkit serve` queues each run in the "
            "database, gives a stateless run a thread whose checkpoints it saves "
            "there (deleted when the run ends, before the stream's end), and sends "
            "the stream parts through the database (`pregelkit_stream_parts`), as "
            "for a fleet of `pregelkit worker` processes on other machines.",
            "- On LangGraph's dev server a lone run's stream starts when the run "
            "does, and its in-memory queue, when idle, looks for new runs every "
            "0.5 s: about a second from request to first event here, back to back "
            "(0.6-0.75 s with 0.3 s between runs). `pregelkit serve` sends the "
            "first event once the run is queued and wakes its worker then.",
            "- `def` and `async def`: `pregelkit serve`'s in-process workers run a "
            "workflow with `invoke`, so its column is the `def` workflows (an "
            '`async def` one is refused: see the guide\'s "Not served yet"). '
            "LangGraph's dev server runs a `def` entrypoint in its event loop's "
            "default executor (min(32, CPUs + 4) threads: 6 here) and the "
            "entrypoint's task in a thread of the same pool; with 10 `def` runs at "
            "once every thread waited for a task no thread was left to run, and "
            "the server stopped for good (seen with py-spy). So its `def` workflows "
            f"run {SYNC_JOBS} at a time, and its `async def` ones 10 at a time.",
        ]
    return "\n".join(
        [
            START,
            "## Streams of `pregelkit serve` beside LangGraph's dev server (issue 30)",
            "",
            f"`python benchmarks/serve_streams.py` on {where}, load average {load} "
            f"at the start and {end_load} at the end (1, 5, 15 min): client and "
            "servers share the cores with other jobs. One async `langgraph-sdk` "
            "client drives each server with the same calls; `pregelkit serve` on "
            f"{db}, its workers in process. Medians of {sizes.rounds} rounds, the "
            "servers measured in turn, each round starting with the next one. "
            "Each server logs as it does by default, to a file.",
            "",
            *table,
            "",
            *notes,
            END,
        ]
    )


def _write(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + section + tail
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.write_text(text)
    print(f"wrote {DOC}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run; writes nothing")
    parser.add_argument("--db", help="a SQLite file or postgresql:// URL (default: a new file)")
    parser.add_argument(
        "--langgraph-venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "pregelkit-bench-langgraph-dev",
        help="a venv with langgraph-cli[inmem] (made and installed there if missing)",
    )
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    # a SIGTERM unwinds the servers' context managers, which stop them
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = QUICK if args.quick else FULL
    binary, langgraph = langgraph_cli(args.langgraph_venv)
    print(f"LangGraph dev server: {langgraph}")
    db = "PostgreSQL" if (args.db or "").startswith("postgres") else "SQLite"
    results: dict[str, list[Figures]] = {}
    with tempfile.TemporaryDirectory(prefix="serve-streams-") as tmp, contextlib.ExitStack() as up:
        base = Path(tmp)
        urls = {
            f"`pregelkit serve` ({db}), `def`, {CONCURRENCY} at a time": up.enter_context(
                pregelkit_server(base / "pregelkit", args.db, CONCURRENCY)
            )
        }
        if binary is not None:
            for name, jobs, asynchronous in (
                (f"LangGraph dev server, `async def`, {CONCURRENCY} at a time", CONCURRENCY, True),
                (f"LangGraph dev server, `def`, {SYNC_JOBS} at a time", SYNC_JOBS, False),
            ):
                here = base / f"langgraph-{jobs}"
                urls[name] = up.enter_context(langgraph_server(here, binary, jobs, asynchronous))
        for url in urls.values():
            asyncio.run(_warm_up(url))
        names = list(urls)
        for r in range(sizes.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                measure = asyncio.wait_for(_measure(urls[name], sizes), MEASURE_TIMEOUT)
                results.setdefault(name, []).append(asyncio.run(measure))
                print(f"round {r + 1}, {name}: {results[name][-1].runs_per_second:.0f} runs/s")
    table = _table({name: _cells(results[name]) for name in names}, sizes)
    print("\n".join(table))
    if not args.quick:
        _write(_section(table, sizes, db, langgraph, binary is not None, load))


if __name__ == "__main__":
    sys.exit(main())
