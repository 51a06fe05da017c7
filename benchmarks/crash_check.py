"""What ``check_crash_safety`` costs on a 20-step workflow (issue 31): save
points, crash points, processes and seconds for each durability mode, for a
sync and an async workflow, on SQLite (and PostgreSQL with ``--dsn URL``).
Prints the table docs/guides/testing.md quotes ("Cost").

    python benchmarks/crash_check.py [--steps 20] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse

from pregelkit.func import entrypoint, task
from pregelkit.testing import check_crash_safety


@task
def step(i: int) -> int:
    return i * 10


@entrypoint()
def steps(n: int) -> list[int]:
    return [step(i).result() for i in range(n)]


@task
async def astep(i: int) -> int:
    return i * 10


@entrypoint()
async def asteps(n: int) -> list[int]:
    return [await astep(i) for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dsn", default="sqlite", help="a postgresql:// URL (default: SQLite)")
    args = parser.parse_args()
    print("| workflow | durability | save points | crash points | processes | time |")
    print("|---|---|---|---|---|---|")
    for wf, kind in ((steps, "sync def"), (asteps, "async def")):
        for durability in ("sync", "async", "exit", None):
            report = check_crash_safety(wf, args.steps, saver=args.dsn, durability=durability)
            print(
                f"| {kind} | {durability or 'all three'} | {sum(report.save_points.values())} "
                f"| {report.crash_points} | {report.processes} | {report.seconds:.1f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
