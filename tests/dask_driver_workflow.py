"""A driver for tests/test_dask_executor.py, run as a script so it can die.

    python tests/dask_driver_workflow.py --scheduler ADDR --db PATH --thread ID --log FILE

The entrypoint fans out three ``leaf`` calls on the Dask cluster at ADDR, then
kills its own process with ``os._exit(9)`` once their results are saved, as a
driver that dies mid-run would. The test resumes the thread in its own
process with ``build(..., crash=False)``, whose entrypoint makes a last
``total`` call instead. Every body appends ``<name> <i>`` to the log when it
runs, so the test can count which bodies ran again after the crash.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pregelkit.executors.dask import DaskExecutor
from pregelkit.func import entrypoint, task


def build(client: Any, saver: Any, log: str, *, crash: bool) -> Any:
    def note(line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)

    @task
    def leaf(i: int) -> int:
        note(f"leaf {i}")
        return i * 10

    @task
    def total(values: list[int]) -> int:
        note("total")
        return sum(values)

    @entrypoint(checkpointer=saver, executor=DaskExecutor(client))
    def flow(n: int) -> int:
        values = [f.result() for f in [leaf(i) for i in range(n)]]
        if crash:
            os._exit(9)
        return total(values).result()

    return flow


def main() -> None:
    from distributed import Client

    from pregelkit.checkpoint.sqlite import SqliteSaver

    parser = argparse.ArgumentParser()
    for option in ("--scheduler", "--db", "--thread", "--log"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    with Client(args.scheduler) as client, SqliteSaver.from_conn_string(args.db) as saver:
        flow = build(client, saver, args.log, crash=True)
        flow.invoke(3, {"configurable": {"thread_id": args.thread}}, durability="sync")


if __name__ == "__main__":
    main()
