"""A driver for tests/test_dask_executor.py, run as a script so it can die.

    python tests/dask_driver_workflow.py --scheduler ADDR --db PATH --thread ID
        --log FILE [--crash]

The entrypoint fans out three ``leaf`` calls on the Dask cluster at ADDR, then
(``--crash``) kills its own process with ``os._exit(9)`` once their results
are saved, as a driver that dies mid-run would; else it makes a last ``total``
call and prints the result as JSON. Every body appends ``<name> <i>`` to the log
when it runs, so a test can count which bodies ran again after the crash.
"""

from __future__ import annotations

import argparse
import json
import os

from distributed import Client

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.executors.dask import DaskExecutor
from pregelkit.func import entrypoint, task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()
    log = args.log

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

    with Client(args.scheduler) as client, SqliteSaver.from_conn_string(args.db) as saver:

        @entrypoint(checkpointer=saver, executor=DaskExecutor(client))
        def flow(n: int) -> int:
            values = [f.result() for f in [leaf(i) for i in range(n)]]
            if args.crash:
                os._exit(9)
            return total(values).result()

        config = {"configurable": {"thread_id": args.thread}}
        saved = saver.get_tuple(config) is not None
        result = flow.invoke(None if saved else 3, config, durability="sync")
        print(json.dumps(result))


if __name__ == "__main__":
    main()
