"""What recording attempts costs per task, counted in instructions.

Wall-clock A/B runs are useless on a loaded machine, so this counts with
``valgrind --tool=callgrind``: each workload of ``benchmarks/workloads.py`` runs
at two sizes on two source trees (``--base`` revision, and the working tree),
and the per-task cost is the difference between the sizes divided by the
difference in tasks (imports, build and warm-up cancel out). Instructions
count the CPU work of Python and SQLite, not the time a commit waits for the
disk.

    python benchmarks/attempts_overhead.py --base main chain_memory chain_sqlite
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = """
import sys
sys.path.insert(0, {bench!r})
import workloads as W
prep = getattr(W, sys.argv[1])(W.Lib("pregelkit"), int(sys.argv[2]))
prep.warmup()
prep.run()
prep.close()
"""


def instructions(src: Path, workload: str, n: int, script: Path) -> int:
    """Instructions callgrind counts for one process running ``workload`` at ``n``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            str(script),
            workload,
            str(n),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--base", default="main", help="git revision to compare with")
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--large", type=int, default=350)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.base, "src"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        script = Path(tmp) / "run_one.py"
        script.write_text(RUNNER.format(bench=str(HERE)))
        trees = {"base": base / "src", "new": ROOT / "src"}
        for workload in args.workloads:
            per_task = {}
            for side, src in trees.items():
                small = instructions(src, workload, args.small, script)
                large = instructions(src, workload, args.large, script)
                per_task[side] = (large - small) / (args.large - args.small)
            ratio = per_task["new"] / per_task["base"]
            print(
                f"{workload}: {per_task['base']:,.0f} -> {per_task['new']:,.0f} "
                f"instructions per task ({(ratio - 1) * 100:+.1f}%)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
