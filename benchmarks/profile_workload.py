"""Profile one benchmark workload with cProfile (the timed run only).

    python benchmarks/profile_workload.py --lib pregelkit --workload fanout --n 10000
    python benchmarks/profile_workload.py --workload chain --n 10000 --sort cumulative --top 40

Builds and warms up the workload exactly as ``workloads.py`` does, then
profiles the timed run and prints the top functions (by ``tottime`` unless
``--sort`` says otherwise). cProfile only sees the thread it runs in plus
what ``threading.setprofile`` reaches, so with ``--all-threads`` worker
threads started after profiling begins are profiled too (their stats merged).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import threading
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads import LIBS, WORKLOADS, Lib


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cProfile one workload's timed run")
    parser.add_argument("--lib", default=os.environ.get("BENCH_LIB", "pregelkit"), choices=LIBS)
    parser.add_argument("--workload", required=True, choices=list(WORKLOADS))
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument(
        "--all-threads", action="store_true", help="also profile threads started during the run"
    )
    parser.add_argument("--output", help="also dump the raw stats here (pstats format)")
    args = parser.parse_args(argv)

    fn, _ = WORKLOADS[args.workload]
    prepared = fn(Lib(args.lib), args.n)
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def thread_profiler(frame: Any, event: str, arg: Any) -> None:
        # Installed by threading.setprofile: runs once at the start of each new
        # thread; swap in a cProfile for the rest of that thread's life.
        prof = cProfile.Profile()
        with lock:
            profiles.append(prof)
        sys.setprofile(None)
        prof.enable()

    try:
        prepared.warmup()
        main_prof = cProfile.Profile()
        if args.all_threads:
            threading.setprofile(thread_profiler)
        main_prof.enable()
        out = prepared.run()
        main_prof.disable()
        threading.setprofile(None)
        prepared.check(out)
    finally:
        prepared.close()
    for prof in profiles:
        prof.disable()
    stats = pstats.Stats(main_prof)
    for prof in profiles:
        try:
            stats.add(prof)
        except TypeError:  # a thread whose profiler never collected anything
            pass
    if args.output:
        stats.dump_stats(args.output)
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
