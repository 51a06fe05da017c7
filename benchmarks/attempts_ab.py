"""What recording attempts costs whole workloads, counted in instructions.

Issue 16's budget: at most 5% on the in-memory fan-out and chain, at most
15% on the durable SQLite chain. Wall-clock A/B runs of a few percent drown
in the noise of a shared 2-core machine, so this counts the instructions
(valgrind's callgrind) of each workload with recording on and off (a saver
subclass whose ``records_attempts`` is False), for N tasks and for none:
the difference, divided by N, is the cost per task, start-up excluded.

The start saver's delay is raised to 1 s in the measured process: under
valgrind every task runs tens of times slower, so with the real 2 ms most
tasks would look long-running and have their start saved on its own, which
real quick tasks never do.

    python benchmarks/attempts_ab.py            # needs valgrind
    python benchmarks/attempts_ab.py --n 400 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

KINDS = ("chain", "fanout", "sqlite")
BUDGET = {"chain": 5.0, "fanout": 5.0, "sqlite": 15.0}


def child(kind: str, records: bool, n: int, check: bool) -> None:
    """One measured process: warm up, then one run of ``n`` tasks; with
    ``check`` (an unmeasured run), make sure it recorded what it should."""
    from pregelkit.checkpoint.memory import InMemorySaver
    from pregelkit.checkpoint.sqlite import SqliteSaver
    from pregelkit.func import entrypoint, task
    from pregelkit.pregel import _loop_attempts

    _loop_attempts.START_SAVE_DELAY = 1.0  # type: ignore[misc]

    class Memory(InMemorySaver):
        records_attempts = records  # type: ignore[assignment]

    class Sqlite(SqliteSaver):
        records_attempts = records  # type: ignore[assignment]

    @task
    def inc(x: int) -> int:
        return x + 1

    saver: Any
    if kind == "sqlite":
        opened = Sqlite.from_conn_string(os.path.join(tempfile.mkdtemp(), "ab.db"))
        saver = opened.__enter__()
    else:
        saver = Memory()

    if kind == "fanout":

        @entrypoint(checkpointer=saver)
        def workflow(n: int) -> int:
            return sum(f.result() for f in [inc(i) for i in range(n)])

    else:

        @entrypoint(checkpointer=saver)
        def workflow(n: int) -> int:
            x = 0
            for _ in range(n):
                x = inc(x).result()
            return x

    durability = "sync" if kind == "sqlite" else "async"
    workflow.invoke(5, {"configurable": {"thread_id": "warm-up"}}, durability=durability)
    workflow.invoke(n, {"configurable": {"thread_id": "measured"}}, durability=durability)
    if check:
        recorded = len(saver.list_attempts("measured"))
        assert recorded == (n + 1 if records else 0), recorded  # the tasks and the entrypoint


def _child_args(kind: str, records: bool, n: int, check: bool) -> list[str]:
    flags = ["on" if records else "off", str(n), "check" if check else "measure"]
    return [sys.executable, __file__, "--child", kind, *flags]


def instructions(kind: str, records: bool, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                *_child_args(kind, records, n, check=False),
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        with open(out) as f:
            totals = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.MULTILINE)
        assert totals is not None
        return int(totals.group(1))


def per_task(kind: str, n: int) -> tuple[float, float]:
    """Instructions per task without and with recording."""
    for records in (False, True):
        subprocess.run(_child_args(kind, records, n, check=True), check=True)
    jobs = [(records, size) for records in (False, True) for size in (0, n)]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: instructions(kind, *job), jobs)))
    off, on = ((counts[(r, n)] - counts[(r, 0)]) / n for r in (False, True))
    return off, on


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="tasks per measured run")
    parser.add_argument("--repeat", type=int, default=5, help="A/B pairs per workload")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, records, n, mode = args.child
        child(kind, records == "on", int(n), mode == "check")
        return 0
    print("| workload | without (instr/task) | with | overhead, median | each pair | budget |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        n = args.n * 3 // 4 if kind == "sqlite" else args.n
        runs = sorted((per_task(kind, n) for _ in range(args.repeat)), key=lambda r: r[1] / r[0])
        shares = ", ".join(f"{100 * (on / off - 1):.1f}%" for off, on in runs)
        off, on = runs[len(runs) // 2]
        median = 100 * (on / off - 1)
        budget = f"≤ {BUDGET[kind]:.0f}%"
        cells = [kind, f"{off:,.0f}", f"{on:,.0f}", f"{median:.1f}%", shares, budget]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
