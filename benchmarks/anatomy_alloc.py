"""What a short run, a fan-out's task and a Pregel chain's step allocate.

    python benchmarks/anatomy.py --alloc      # or: python benchmarks/anatomy_alloc.py

Three measures, each of a workload repeated after a warm-up:

- allocated (DHAT): every block asked of the allocator and its bytes, under
  ``valgrind --tool=dhat`` with ``PYTHONMALLOC=malloc`` (so each Python
  object's block goes through ``malloc``; blocks from free lists, as
  small tuples and frames, are not allocations). Two processes repeat the
  workload a different number of times; the difference divided by the
  extra repetitions is what one costs, without start-up and imports.
- peak (tracemalloc): the most a run held above where it started.
- leaks (``sys.getallocatedblocks()``): blocks still alive after 1,000 more
  runs and a collection; the in-memory saver's threads are deleted after
  each run so what it keeps by design is not counted.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# name: (what one repetition is, units per repetition)
WORKLOADS = {
    "short-memory": ("short run, InMemorySaver", 1),
    "short-sqlite": ("short run, SqliteSaver", 1),
    "fanout": ("task of a 1,000-task fan-out", 1000),
    "pregel_chain": ("step of a 1,000-node Pregel chain", 1000),
}
DHAT_REPEATS = (10, 40)
TOTAL = re.compile(r"Total:\s+([\d,]+) bytes in ([\d,]+) blocks")


def repeater(name: str, stack: ExitStack) -> Callable[[], None]:
    """One repetition of workload ``name``, warmed up."""
    if name.startswith("short-"):
        from anatomy import saver_of, short_run

        saver = stack.enter_context(saver_of(name.removeprefix("short-")))
        main, _ = short_run(saver)
        memory = name == "short-memory"

        def run() -> None:
            tid = uuid.uuid4().hex
            main.invoke(1, {"configurable": {"thread_id": tid}})
            if memory:
                saver.delete_thread(tid)

    else:
        from workloads import WORKLOADS as ALL
        from workloads import Lib

        prepared = ALL[name][0](Lib("pregelkit"), 1000)
        prepared.warmup()

        def run() -> None:
            prepared.check(prepared.run())

    for _ in range(20):
        run()
    return run


def repeat(name: str, times: int) -> None:
    """What DHAT runs: the workload ``times`` times."""
    with ExitStack() as stack:
        run = repeater(name, stack)
        for _ in range(times):
            run()


def start_dhat(name: str, logs: Path) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """DHAT processes repeating ``name``, each with its log in ``logs``
    (``dhat_result`` reads them); they run while the rest is measured
    (start-up under valgrind takes minutes)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("DHAT needs valgrind (apt-get install valgrind)")
    env = {**os.environ, "PYTHONMALLOC": "malloc"}
    started = []
    for times in _repeats(name):
        log = logs / f"{name}-{times}.log"
        # niced: the rest is measured meanwhile
        tool = ["nice", valgrind, "--tool=dhat", "--dhat-out-file=/dev/null", f"--log-file={log}"]
        cmd = [*tool, sys.executable, __file__, "--repeat", name, str(times)]
        started.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL), log))
    return started


def _repeats(name: str) -> tuple[int, int]:
    return DHAT_REPEATS if WORKLOADS[name][1] == 1 else (1, 3)


def dhat_result(
    name: str, started: list[tuple[subprocess.Popen[bytes], Path]]
) -> tuple[float, float] | None:
    """(blocks, bytes) allocated per repetition of ``name``; None if a
    process failed (its log says why)."""
    totals = []
    for proc, log in started:
        proc.wait()
        found = TOTAL.search(log.read_text(errors="replace"))
        if proc.returncode or found is None:
            print(f"DHAT of {name} failed: see {log}", file=sys.stderr)
            return None
        totals.append([int(x.replace(",", "")) for x in found.groups()])
    low, high = _repeats(name)
    return (totals[1][1] - totals[0][1]) / (high - low), (totals[1][0] - totals[0][0]) / (
        high - low
    )


def peak_and_leak(name: str, leak_runs: int = 1000) -> tuple[float, float]:
    """(peak bytes held above the start of a run, median of 50; blocks left
    per run after ``leak_runs`` more runs)."""
    with ExitStack() as stack:
        run = repeater(name, stack)
        peaks = []
        tracemalloc.start()
        try:
            for _ in range(50):
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                run()
                peaks.append(tracemalloc.get_traced_memory()[1] - before)
        finally:
            tracemalloc.stop()
        gc.collect()
        blocks = sys.getallocatedblocks()
        for _ in range(leak_runs if name.startswith("short-") else leak_runs // 20):
            run()
        gc.collect()
        left = sys.getallocatedblocks() - blocks
        runs = leak_runs if name.startswith("short-") else leak_runs // 20
    return sorted(peaks)[len(peaks) // 2], left / runs


def report() -> None:
    print("| per | blocks allocated | bytes allocated | peak held | blocks left per run |")
    print("|---|---:|---:|---:|---:|")
    logs = Path(tempfile.mkdtemp(prefix="anatomy-dhat-"))
    running = {name: start_dhat(name, logs) for name in WORKLOADS}
    for name, (what, units) in WORKLOADS.items():
        peak, left = peak_and_leak(name)
        allocated = dhat_result(name, running[name])
        blocks, size = (
            ("failed", "failed")
            if allocated is None
            else (f"{allocated[0] / units:,.0f}", f"{allocated[1] / units:,.0f}")
        )
        print(f"| {what} | {blocks} | {size} | {peak / units:,.0f} | {left:+.2f} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--repeat"]:
        repeat(sys.argv[2], int(sys.argv[3]))
    else:
        report()
