"""A durable workflow for the crash tests (tests/test_crash.py), run as a script.

    python tests/crash_workflow.py --db <sqlite path | postgresql dsn> --thread <id>
        --log <file> [--durability sync|async] [--seq N] [--fan N] [--seed N]
        [--sleep S] [--hold-at I --hold-file PATH] [--wait] [--async]

The entrypoint chains ``--seq`` task calls (``x = step(x, i)``, each taking the
previous result), then fans out ``--fan`` calls (``leaf(i, x)``) at once and
gathers them. Every task execution appends ``<name> <index> <pid>`` to the log
with one ``os.write`` on an ``O_APPEND`` descriptor before it returns, so the
log holds every execution, also the ones killed before their result was saved.
The script also logs ``begin <pid> input|resume|done`` before the run and
``end <pid>`` after it (``busy <pid>`` when the thread is held elsewhere).

The first run of a thread passes the input; once the thread has a saved
checkpoint the script resumes it with ``None``. On success it prints the
result as JSON (one line) and exits 0. If another run holds the thread
(``ThreadBusyError``) it prints ``ThreadBusyError: <message>`` to stderr and
exits 3. ``--wait`` passes ``wait_for_thread: True``.

``--hold-at I --hold-file PATH``: step ``I`` waits (before doing anything)
while ``PATH`` exists, so a test can keep a run in the middle of its thread.

Task results name their task (``{"step": i, "x": ...}``, ``{"leaf": i, "v": ...}``),
so a test reading the saver's pending writes knows which calls were saved.
``expected()`` computes the final result in plain Python.

``--async`` builds the same workflow with ``async def`` tasks and entrypoint
(``make_async_workflow``) and runs it with ``asyncio.run(workflow.ainvoke(...))``
on ``AsyncSqliteSaver``/``AsyncPostgresSaver``: the fan-out's calls then run as
asyncio tasks on the one event loop (no worker threads), each saving its
result (with "sync" durability) before it finishes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

BUSY_EXIT = 3
MODULUS = 1_000_003


def step_value(x: int, i: int) -> int:
    return (x * 31 + i * i + 7) % MODULUS


def leaf_value(i: int, x: int) -> int:
    return (x * (i + 1) + i) % 9973


def chain(seed: int, seq: int) -> list[int]:
    """``xs[i]`` is what ``step(., i)`` returns; ``xs[-1]`` the input of the fan-out."""
    xs, x = [], seed
    for i in range(seq):
        x = step_value(x, i)
        xs.append(x)
    return xs


def expected(seed: int, seq: int, fan: int) -> dict[str, int]:
    """The workflow's result, computed without the engine."""
    xs = chain(seed, seq)
    x = xs[-1] if xs else seed
    return {"x": x, "total": sum(leaf_value(i, x) for i in range(fan))}


def is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://")) or "dbname=" in db


@contextmanager
def open_saver(db: str) -> Iterator[Any]:
    """A sync saver on ``db``: PostgreSQL when it is a DSN, else a SQLite file."""
    if is_postgres(db):
        from pregelkit.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as saver:
            saver.setup()
            yield saver
    else:
        from pregelkit.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def open_async_saver(db: str) -> AsyncIterator[Any]:
    """An async saver on ``db``: PostgreSQL when it is a DSN, else a SQLite file."""
    if is_postgres(db):
        from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(db) as saver:
            await saver.setup()
            yield saver
    else:
        from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            await saver.setup()
            yield saver


def make_workflow(
    saver: Any,
    log: Callable[[str], None],
    *,
    sleep: float = 0.0,
    hold_at: int = -1,
    hold_file: str | None = None,
) -> Any:
    """The entrypoint, saving to ``saver``; ``log`` gets one line per task execution."""
    from pregelkit.func import entrypoint, task

    pid = os.getpid()

    @task
    def step(x: int, i: int) -> dict[str, int]:
        if i == hold_at and hold_file is not None:
            while os.path.exists(hold_file):
                time.sleep(0.005)
        if sleep:
            time.sleep(sleep)
        log(f"step {i} {pid}")
        return {"step": i, "x": step_value(x, i)}

    @task
    def leaf(i: int, x: int) -> dict[str, int]:
        if sleep:
            time.sleep(sleep)
        log(f"leaf {i} {pid}")
        return {"leaf": i, "v": leaf_value(i, x)}

    @entrypoint(checkpointer=saver)
    def workflow(inp: dict[str, int]) -> dict[str, int]:
        x = inp["seed"]
        for i in range(inp["seq"]):
            x = step(x, i).result()["x"]
        futures = [leaf(i, x) for i in range(inp["fan"])]
        return {"x": x, "total": sum(f.result()["v"] for f in futures)}

    return workflow


def make_async_workflow(
    saver: Any,
    log: Callable[[str], None],
    *,
    sleep: float = 0.0,
    hold_at: int = -1,
    hold_file: str | None = None,
) -> Any:
    """``make_workflow`` with ``async def`` tasks and entrypoint (run it with
    ``ainvoke``). The tasks do not await anything unless ``sleep`` or
    ``hold_at`` asks them to: a fan-out's leaves then run (and log) in the
    order they were called, each up to its save."""
    from pregelkit.func import entrypoint, task

    pid = os.getpid()

    @task
    async def step(x: int, i: int) -> dict[str, int]:
        if i == hold_at and hold_file is not None:
            while os.path.exists(hold_file):
                await asyncio.sleep(0.005)
        if sleep:
            await asyncio.sleep(sleep)
        log(f"step {i} {pid}")
        return {"step": i, "x": step_value(x, i)}

    @task
    async def leaf(i: int, x: int) -> dict[str, int]:
        if sleep:
            await asyncio.sleep(sleep)
        log(f"leaf {i} {pid}")
        return {"leaf": i, "v": leaf_value(i, x)}

    @entrypoint(checkpointer=saver)
    async def workflow(inp: dict[str, int]) -> dict[str, int]:
        x = inp["seed"]
        for i in range(inp["seq"]):
            x = (await step(x, i))["x"]
        futures = [leaf(i, x) for i in range(inp["fan"])]
        results = await asyncio.gather(*futures)
        return {"x": x, "total": sum(r["v"] for r in results)}

    return workflow


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a durable workflow for the crash tests")
    parser.add_argument("--db", required=True, help="SQLite file or PostgreSQL DSN")
    parser.add_argument("--thread", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--durability", choices=["sync", "async"], default="async")
    parser.add_argument("--seq", type=int, default=1000)
    parser.add_argument("--fan", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds each task sleeps")
    parser.add_argument("--hold-at", type=int, default=-1)
    parser.add_argument("--hold-file", default=None)
    parser.add_argument("--wait", action="store_true", help="wait_for_thread: True")
    parser.add_argument(
        "--async", dest="use_async", action="store_true", help="async tasks, run with ainvoke"
    )
    args = parser.parse_args(argv)

    from pregelkit.errors import ThreadBusyError

    pid = os.getpid()
    log_fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(line: str) -> None:
        # one write(2) on an O_APPEND descriptor: in the file (page cache) once it
        # returns, so it survives SIGKILL; lines from processes never tear
        os.write(log_fd, f"{line}\n".encode())

    conf: dict[str, Any] = {"thread_id": args.thread}
    if args.wait:
        conf["wait_for_thread"] = True
    config = {"configurable": conf}
    if args.use_async:
        return asyncio.run(_amain(args, config, log))
    with open_saver(args.db) as saver:
        workflow = make_workflow(
            saver, log, sleep=args.sleep, hold_at=args.hold_at, hold_file=args.hold_file
        )
        state = workflow.get_state(config)
        if state.metadata is None:  # no checkpoint yet: start the thread
            how, inp = "input", {"seed": args.seed, "seq": args.seq, "fan": args.fan}
        else:
            how, inp = ("resume" if state.next else "done"), None
        log(f"begin {pid} {how}")
        try:
            result = workflow.invoke(inp, config, durability=args.durability)
        except ThreadBusyError as exc:
            log(f"busy {pid}")
            print(f"ThreadBusyError: {exc}", file=sys.stderr, flush=True)
            return BUSY_EXIT
        log(f"end {pid}")
    print(json.dumps(result), flush=True)
    return 0


async def _amain(args: argparse.Namespace, config: Any, log: Callable[[str], None]) -> int:
    """``main`` with the async saver, workflow and API."""
    from pregelkit.errors import ThreadBusyError

    pid = os.getpid()
    async with open_async_saver(args.db) as saver:
        workflow = make_async_workflow(
            saver, log, sleep=args.sleep, hold_at=args.hold_at, hold_file=args.hold_file
        )
        state = await workflow.aget_state(config)
        if state.metadata is None:  # no checkpoint yet: start the thread
            how, inp = "input", {"seed": args.seed, "seq": args.seq, "fan": args.fan}
        else:
            how, inp = ("resume" if state.next else "done"), None
        log(f"begin {pid} {how}")
        try:
            result = await workflow.ainvoke(inp, config, durability=args.durability)
        except ThreadBusyError as exc:
            log(f"busy {pid}")
            print(f"ThreadBusyError: {exc}", file=sys.stderr, flush=True)
            return BUSY_EXIT
        log(f"end {pid}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
