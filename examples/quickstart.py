"""A durable workflow on a SQLite file: run it, stop for a human, resume later.

    python examples/quickstart.py              # runs the tasks, stops for approval
    python examples/quickstart.py --answer yes # a new process resumes where it stopped

Each task prints a line when it really runs. In the second process the
finished ``fetch`` tasks do not run again: their results are loaded from the
checkpoint in ``quickstart.sqlite``. ``fetch`` is also cached (``CachePolicy``
in ``quickstart-cache.sqlite``), so a later run with the same input skips it
too, even on a new thread.
"""

from __future__ import annotations

import argparse
import sys

from pregelkit.cache.sqlite import SqliteCache
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy, Command, interrupt

ran: list[str] = []  # the tasks this process really ran


@task(cache_policy=CachePolicy())
def fetch(item: int) -> int:
    """A slow, deterministic step: worth caching."""
    print(f"running fetch({item})")
    ran.append("fetch")
    return item * item


@task
def publish(report: dict[str, int]) -> str:
    print(f"running publish({report['total']})")
    ran.append("publish")
    return f"published a report with total {report['total']}"


@entrypoint()
def report(items: list[int]) -> dict[str, object]:
    # each task call returns a future; .result() waits for it
    report = {"total": sum(fetch(i).result() for i in items)}
    answer = interrupt(f"publish a report with total {report['total']}? (yes/no)")
    if answer != "yes":
        return {"report": report, "published": False}
    return {"report": report, "published": True, "message": publish(report).result()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", help="resume the paused run with this answer")
    parser.add_argument("--thread", default="quickstart", help="thread id (default: quickstart)")
    parser.add_argument("--db", default="quickstart.sqlite", help="checkpoint database")
    args = parser.parse_args()
    config = {"configurable": {"thread_id": args.thread}}

    with SqliteSaver.from_conn_string(args.db) as saver:
        cache: SqliteCache[object] = SqliteCache(
            path=args.db.removesuffix(".sqlite") + "-cache.sqlite"
        )
        workflow = report.copy(checkpointer=saver, cache=cache)
        waiting = workflow.get_state(config).interrupts

        if args.answer is None:
            if waiting:
                print(f"thread {args.thread!r} is waiting for an answer: {waiting[0].value}")
                print(f"resume it with: python {sys.argv[0]} --answer yes")
                return 0
            print(f"starting thread {args.thread!r}")
            run_input: object = [1, 2, 3]
        else:
            if not waiting:
                print(f"thread {args.thread!r} is not waiting for an answer; run without --answer")
                return 1
            print(f"resuming thread {args.thread!r} with answer {args.answer!r}")
            run_input = Command(resume=args.answer)

        # "updates" yields {task name: result} as each task finishes
        for update in workflow.stream(run_input, config, stream_mode="updates"):
            if "__interrupt__" in update:
                print(f"paused: {update['__interrupt__'][0].value}")
                print(f"resume with: python {sys.argv[0]} --answer yes")
            elif "report" in update:
                print(f"done: {update['report']}")
            elif update.get("__metadata__", {}).get("cached"):
                name, value = next(iter(update.items()))
                print(f"{name} -> {value} (from the cache, not run)")
        if args.answer is not None and "fetch" not in ran:
            print(f"fetch did not run again: its results were read from {args.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
