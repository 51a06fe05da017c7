"""A slow durable workflow for the run-control tests (tests/test_run_control.py).

    python tests/run_control_workflow.py --db <sqlite path | postgresql dsn>
        --thread ID --log FILE [--n N] [--sleep S] [--async]

``--n`` chained task calls ``step(i)``, each sleeping ``--sleep`` seconds.
Each body appends ``start I`` when it begins and ``end I`` when it is done to
the log (one ``os.write`` on an ``O_APPEND`` descriptor each), so the log
shows every body that ran, also one cut short. The first run of a thread
passes the input, a later one resumes with ``None``. The script prints the
result as JSON and exits 0; on ``RunCancelledError`` it prints
``cancelled`` and exits 4; a ``KeyboardInterrupt`` propagates (exit 1 with
its traceback, the default for an uncaught Ctrl-C in Python).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from crash_workflow import open_async_saver, open_saver
from pregelkit.errors import RunCancelledError
from pregelkit.func import entrypoint, task


def expected(n: int) -> list[int]:
    return [i * 10 for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--async", dest="use_async", action="store_true")
    args = parser.parse_args(argv)
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(line: str) -> None:
        os.write(fd, f"{line}\n".encode())

    config: Any = {"configurable": {"thread_id": args.thread}}
    try:
        if args.use_async:
            result = asyncio.run(_arun(args, config, log))
        else:
            result = _run(args, config, log)
    except RunCancelledError:
        print("cancelled", flush=True)
        return 4
    print(json.dumps(result), flush=True)
    return 0


def _run(args: argparse.Namespace, config: Any, log: Any) -> Any:
    @task
    def step(i: int) -> int:
        log(f"start {i}")
        time.sleep(args.sleep)
        log(f"end {i}")
        return i * 10

    with open_saver(args.db) as saver:

        @entrypoint(checkpointer=saver)
        def workflow(n: int) -> list[int]:
            return [step(i).result() for i in range(n)]

        fresh = saver.get_tuple(config) is None
        return workflow.invoke(args.n if fresh else None, config)


async def _arun(args: argparse.Namespace, config: Any, log: Any) -> Any:
    @task
    async def step(i: int) -> int:
        log(f"start {i}")
        await asyncio.sleep(args.sleep)
        log(f"end {i}")
        return i * 10

    async with open_async_saver(args.db) as saver:

        @entrypoint(checkpointer=saver)
        async def workflow(n: int) -> list[int]:
            return [await step(i) for i in range(n)]

        fresh = await saver.aget_tuple(config) is None
        return await workflow.ainvoke(args.n if fresh else None, config)


if __name__ == "__main__":
    sys.exit(main())
