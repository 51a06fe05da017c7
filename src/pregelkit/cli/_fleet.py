"""``pregelkit worker``, ``submit`` and ``runs``: the run queue from a shell.

``worker`` serves the queued runs of the workflows it is given until SIGTERM
or Ctrl-C (then it lets the runs it holds finish their started tasks and
hands them back). ``submit`` queues a run and prints its id at once;
``runs`` lists the queue, saying why a queued run waits when no live worker
serves its workflow.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from typing import Any, TextIO

from pregelkit.cli._answer import pending_interrupts, resume_map
from pregelkit.cli._commands import _cli, _db_args, _parse_json, _state
from pregelkit.cli._db import Database, open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._lifecycle import ACTIVE, INTERRUPTED, ThreadState, refuse
from pregelkit.cli._options import add_command, add_filters, duration
from pregelkit.cli._render import _print_json, clean, shell_join
from pregelkit.cli._secrets import Redactor
from pregelkit.cli._target import load_target, recorded
from pregelkit.errors import UnknownQueueError

__all__ = ["register"]

STATUSES = (
    "queued",
    "running",
    "sleeping",
    "waiting",
    "interrupted",
    "done",
    "failed",
    "cancelled",
)
"""The run statuses (``checkpoint._runqueue.STATUSES``, not imported to
build the parser)."""


def register(sub: Any, common: argparse.ArgumentParser, tables: argparse.ArgumentParser) -> None:
    """Add ``worker``, ``submit`` and ``runs`` to the ``pregelkit`` subcommands."""
    p = add_command(
        sub,
        "worker",
        cmd_worker,
        [common],
        help="serve queued runs of workflows until SIGTERM or Ctrl-C",
        description="Claim and run the queued runs (`pregelkit submit`, wf.submit) of the "
        "workflows MODULE:NAME, up to --concurrency at a time. The async def workflows run "
        "on an AsyncWorker of their own (up to --concurrency at a time too) beside the "
        "Worker of the sync ones. On SIGTERM or Ctrl-C it claims nothing more, lets its "
        "runs finish their started tasks and hands them back.",
    )
    p.add_argument("entrypoints", nargs="+", metavar="MODULE:NAME", help="workflows to serve")
    p.add_argument(
        "--concurrency", type=int, default=8, help="runs at a time (default 8), for the sync "
        "and the async workflows each",
    )  # fmt: skip
    p.add_argument(
        "--lease", type=float, default=30.0, help="lease seconds (default 30): how long "
        "a dead worker's runs wait before another worker takes them",
    )  # fmt: skip
    p.add_argument(
        "--queue", action="append", default=[], metavar="NAME", help="also serve this "
        "declared queue (repeat for more); the default queue is always served",
    )  # fmt: skip

    p = add_command(
        sub,
        "submit",
        cmd_submit,
        [common],
        help="queue a run of a workflow for a worker",
        description="Queue a run of MODULE:NAME on --input (or a resume of an interrupted "
        "thread with --resume) for `pregelkit worker` to run, and print its run id. "
        "Submitting for a thread that has a queued or running run prints that run instead.",
    )
    p.add_argument("entrypoint", metavar="MODULE:NAME")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--input", metavar="JSON", help="the input, as JSON: a run from the start")
    what.add_argument(
        "--resume",
        metavar="JSON",
        help="the answer to the thread's interrupt, as JSON: the worker resumes it with "
        "Command(resume=...)",
    )
    p.add_argument("--thread", required=True, metavar="ID", help="the thread (the run's id)")
    p.add_argument(
        "--to",
        metavar="ID",
        help="with --resume: the id of the interrupt it answers (needed when several wait)",
    )
    p.add_argument("--priority", type=int, default=0, help="higher is taken first (default 0)")
    p.add_argument("--queue", metavar="NAME", help="a declared queue (default: the default one)")
    p.add_argument("--key", metavar="KEY", help="with --queue: what key_concurrency counts")
    p.add_argument(
        "--dedup-id", metavar="ID", help="while a run of the queue with this id is active, "
        "print that run instead",
    )  # fmt: skip
    p.add_argument(
        "--debounce", type=duration, metavar="DURATION", help="with --key: start once the "
        "key was quiet this long (30s, 5m), replacing its debounced run not started yet",
    )  # fmt: skip

    p = add_command(
        sub, "runs", cmd_runs, [common, tables], help="list queued, running and ended runs"
    )
    add_filters(p, "runs", STATUSES, 100)


def cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.cli._workers import Workers

    if args.concurrency < 1:
        raise CliError(f"--concurrency must be at least 1, got {args.concurrency}")
    if not 0.1 <= args.lease <= 86400:
        raise CliError(f"--lease must be between 0.1 and 86400 seconds, got {args.lease}")
    # each run records its workflow in the thread's checkpoints, as `run`
    # does: `threads` shows it and `resume` finds it
    graphs = [
        target.graph.with_config(metadata=recorded(target))
        for target in map(load_target, args.entrypoints)
    ]
    names = [str(g.name) for g in graphs]
    if len(set(names)) != len(names):
        raise CliError(f"two of the workflows have the same name ({names}): names must differ")
    _log_to_stderr()
    with contextlib.ExitStack() as stack:
        try:
            # the sync workflows on a Worker, the async ones on an AsyncWorker
            workers = Workers(
                graphs,
                args.db,
                stack,
                concurrency=args.concurrency,
                lease_seconds=args.lease,
                queues=args.queue,
            )
            for worker_id, serves in workers.serving:
                if args.json:
                    _print_json({"event": "worker", "worker_id": worker_id, "serves": serves}, out)
                else:
                    shown = Redactor().mask(args.db)
                    out.write(clean(f"worker {worker_id} serving {', '.join(serves)} on {shown}"))
                    out.write("\n")
            out.flush()
            workers.run()
        except UnknownQueueError as exc:
            raise CliError(str(exc)) from None
    for worker_id, _ in workers.serving:
        if args.json:
            _print_json({"event": "stopped", "worker_id": worker_id}, out)
        else:
            out.write(f"worker {worker_id} stopped\n")
    return 0


def _log_to_stderr(name: str = "pregelkit.worker") -> None:
    """Log ``name``'s records to stderr, with their time and level."""
    log = logging.getLogger(name)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def cmd_submit(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint.runs import MAX_PRIORITY, Routing, submit_run
    from pregelkit.types import Command

    if not -MAX_PRIORITY - 1 <= args.priority <= MAX_PRIORITY:
        raise CliError(f"--priority is between {-MAX_PRIORITY - 1} and {MAX_PRIORITY}")
    if args.to is not None and args.resume is None:
        raise CliError("--to ID names the interrupt a --resume answer is for: give --resume JSON")
    # parsed before anything is opened: a typo in the JSON is the first thing said
    answer = _parse_json(args.resume, "--resume")
    value: Any = _parse_json(args.input, "--input")
    target = load_target(args.entrypoint)
    graph = target.graph
    if not graph.name:
        raise CliError(f"{args.entrypoint} has no name, so no worker can find it: name it")
    with open_database(args.db, create=True) as db:
        state = _state(db, args.thread)
        if args.resume is not None:
            value = Command(resume=_answers(args, db, state, answer))
        # the workflow is recorded in the thread's checkpoints, as `run` does,
        # so `resume` finds it without --target
        config = {"configurable": {"thread_id": args.thread}, "metadata": recorded(target)}
        try:
            route = Routing.of(args.queue, args.key, args.dedup_id, args.debounce)
        except ValueError as exc:
            raise CliError(f"{exc} (here: --queue, --key, --dedup-id, --debounce)") from None
        try:
            handle = submit_run(db.saver, graph.name, value, config, args.priority, route=route)
        except UnknownQueueError as exc:
            raise CliError(str(exc)) from None
        status = handle.status()
    if args.json:
        _print_json(
            {"event": "submitted", "run_id": handle.run_id, "thread_id": handle.thread_id,
             "workflow": graph.name, "status": status},
            out,
        )  # fmt: skip
    else:
        out.write(f"run {handle.run_id} of thread {clean(handle.thread_id)}: {status}\n")
    return 0


def _answers(args: argparse.Namespace, db: Database, state: ThreadState | None, answer: Any) -> Any:
    """What the queued ``Command(resume=...)`` carries: ``{id: answer}`` for
    the interrupt ``--to`` names or the only one pending, never a guess
    (``cli/_answer.py``)."""
    _check_answerable(args, state)
    assert state is not None
    if state.saved != INTERRUPTED:
        return answer  # a queued or running run: submit prints it, the answer is not used
    pending = pending_interrupts(db, args.thread)

    def hint(iid: str) -> str:
        words = ["submit", args.entrypoint, "--resume", '"..."', "--thread", args.thread]
        return _cli(args, *words, "--to", iid)

    return resume_map(args.thread, answer, args.to, pending, hint)


def _check_answerable(args: argparse.Namespace, state: ThreadState | None) -> None:
    """A queued resume must have an interrupt to answer when a worker runs
    it: refused now, in a line, rather than failing there later."""
    if state is None:
        raise CliError(
            f"cannot submit a resume of thread {args.thread!r}: the database knows no such "
            "thread; `--input JSON` queues a run from the start",
            kind="unknown_thread",
            thread_id=args.thread,
        )
    run = state.run
    if (run is not None and run.status in ACTIVE) or state.saved == INTERRUPTED:
        return  # the thread's active run is returned as it is
    raise refuse(
        state,
        "submit a resume of",
        "it is not waiting for an answer; `--input JSON` queues a run from the start",
    )


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.checkpoint.queues import queue_states
    from pregelkit.checkpoint.runs import list_runs
    from pregelkit.cli._table import print_table

    if args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}")
    with open_database(args.db, create=False) as db:
        records = list_runs(db.saver, args.status, args.limit)
        states = queue_states(db.saver)
    if args.json:
        for state in states.values():
            _print_json(_queue_json(state), out)
        for record in records:
            _print_json(record.as_json(), out)
        return 0
    if states:
        _print_queues(states, args, out)
    if not records:
        out.write("no runs" + (f" with status {args.status}" if args.status else "") + "\n")
        return 0
    now = time.time()
    rows = []
    hints: dict[str, str] = {}
    for r in records:
        if r.status == "running" and r.lease_left is not None:
            note = f"{r.worker} (lease {r.lease_left:.0f}s)"
        elif r.waits_for is not None:
            note = r.waits_for
        elif r.waiting and r.waiting.startswith("no live worker"):
            note, hint = _waiting_note(r.waiting, r.workflow, args)
            hints.setdefault(r.workflow, hint)
        elif r.waiting:
            note = r.waiting
        else:
            note = r.error or ""
        age = f"{now - r.created_at:.0f}s ago"
        queue = r.queue + (f" [{r.queue_key}]" if r.queue_key is not None else "")
        rows.append([r.thread_id, r.workflow, queue, r.status, r.priority, r.attempts, age, note])
    headers = ["THREAD", "WORKFLOW", "QUEUE", "STATUS", "PRIORITY", "TRIES", "QUEUED", "NOTE"]
    if not any(row[2] for row in rows):  # no named queue in use: the column only takes room
        headers.pop(2)
        rows = [row[:2] + row[3:] for row in rows]
    print_table(headers, rows, out, wide=args.wide, cut=("THREAD", "WORKFLOW", "NOTE"))
    for hint in hints.values():
        out.write(clean(hint) + "\n")
    return 0


def _queue_json(state: Any) -> dict[str, Any]:
    q = state.queue
    return {
        "event": "queue",
        "queue": q.name,
        "concurrency": q.concurrency,
        "worker_concurrency": q.worker_concurrency,
        "key_concurrency": q.key_concurrency,
        "rate_limit": None if q.rate_limit is None else list(q.rate_limit),
        "running": state.running,
        "started_in_window": state.started,
        "running_per_key": state.keys,
    }


def _print_queues(states: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
    """Each declared queue: its limits, and what runs against them now."""
    from pregelkit.cli._table import print_table

    rows = []
    for state in states.values():
        q = state.queue
        running = f"{state.running}" + (f"/{q.concurrency}" if q.concurrency else "")
        rate = f"{state.started}/{q.rate_limit[0]} in {q.rate_limit[1]:g}s" if q.rate_limit else ""
        busiest = sorted(state.keys.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        keys = ", ".join(f"{key} {n}" for key, n in busiest)
        rows.append([q.name, state.describe(), running, rate, keys])
    print_table(
        ["QUEUE", "LIMITS", "RUNNING", "STARTS", "BUSIEST KEYS"],
        rows,
        out,
        wide=args.wide,
        cut=("LIMITS", "BUSIEST KEYS"),
    )
    out.write("\n")


def _waiting_note(waiting: str, workflow: str, args: argparse.Namespace) -> tuple[str, str]:
    """Why a queued run waits, for its NOTE cell, and the command that
    starts a worker for it, printed whole under the table (a cell may be cut
    to fit the terminal, and a command cut in the middle is no use)."""
    reason = waiting.partition(": start one with")[0]
    command = shell_join(["pregelkit", "worker", f"MODULE:{workflow}", *_db_args(args)])
    return reason, f"start a worker for {workflow!r}: {command}"
