"""The subcommands (run, resume, threads, history, show, delete): each takes
the parsed arguments and the output stream and returns the exit status."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from pregelkit.cli._ctrl_c import CtrlC, ctrl_c, leave_now, run_async
from pregelkit.cli._db import DEFAULT_DB, ENTRYPOINT_KEY, TARGET_KEY, Database, open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._lifecycle import (
    ACTIVE,
    UNREADABLE,
    ThreadState,
    queued_threads,
    refuse,
    state_of,
)
from pregelkit.cli._progress import Progress, _whole_lines
from pregelkit.cli._render import (
    _cell,
    _entry_cell,
    _fail_line,
    _interrupt_cell,
    _jsonable,
    _print_error,
    _print_json,
    _short,
    _when,
    clean,
    one_line,
    shell_join,
)
from pregelkit.cli._replays import Replays
from pregelkit.cli._secrets import Redactor
from pregelkit.cli._status import ERROR, interrupts_of, task_labels
from pregelkit.cli._target import Target, load_recorded, load_target, recorded

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import CheckpointTuple
    from pregelkit.pregel import Pregel
    from pregelkit.types import Interrupt, StreamMode


_NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
_INTERRUPT = "__interrupt__"


@dataclass
class RunOutcome:
    interrupts: list[Interrupt] = field(default_factory=list)
    output: Any = None
    error: BaseException | None = None


def _bound(target: Target, db: Database, cache: str | None) -> Pregel:
    update: dict[str, Any] = {"checkpointer": db.saver}
    if cache:
        from pregelkit.cache.sqlite import SqliteCache

        update["cache"] = SqliteCache(path=cache)
    return target.graph.copy(**update)


def _is_async(graph: Pregel) -> bool:
    return any(node.is_async for node in graph.nodes.values())


def _drive(
    graph: Pregel,
    input: Any,
    config: dict[str, Any],
    durability: str | None,
    on_chunk: Callable[[str, Any], None],
    progress: bool,
    stop: CtrlC,
) -> None:
    # the debug stream (tasks started and finished, with their step) feeds the
    # progress line; without one, the tasks stream still tells a Ctrl-C what
    # is running
    modes: list[StreamMode] = (
        ["updates", "custom", "debug"] if progress else ["updates", "custom", "tasks"]
    )
    if _is_async(graph):

        async def consume() -> None:
            stop.attach()
            async for mode, chunk in graph.astream(
                input, config, stream_mode=modes, durability=durability
            ):
                on_chunk(mode, chunk)

        run_async(consume(), stop)
    else:
        for mode, chunk in graph.stream(input, config, stream_mode=modes, durability=durability):
            on_chunk(mode, chunk)


def _execute(
    args: argparse.Namespace,
    db: Database,
    target: Target,
    thread_id: str,
    input: Any,
    out: TextIO,
) -> int:
    graph = _bound(target, db, args.cache)
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread_id},
        "metadata": recorded(target),
    }
    as_json = args.json
    outcome = RunOutcome()
    # a continued run first replays the results saved before it stopped:
    # they are shown as such, never as cache hits
    replays = Replays(db, thread_id) if not _is_fresh(input) else Replays.none()
    # an @entrypoint's own update is its return value: `result:` prints it
    returns = {name for name, node in graph.nodes.items() if getattr(node, "orchestrates", False)}
    with (
        Progress(out, sys.stderr, enabled=not as_json and sys.stderr.isatty()) as progress,
        # under --json the workflow's prints already go to stderr (_streams)
        contextlib.nullcontext() if as_json else _whole_lines(progress, out),
    ):

        def on_chunk(mode: str, chunk: Any) -> None:
            if mode == "debug":
                progress.debug_event(chunk)
                return
            if mode == "custom":
                _custom_lines(chunk, as_json, progress.line)
                return
            if mode == "tasks":
                progress.task_event(chunk)
                return
            if _INTERRUPT in chunk:
                outcome.interrupts.extend(chunk[_INTERRUPT])
                return
            cached = bool(chunk.get("__metadata__", {}).get("cached"))
            for name, value in chunk.items():
                if name == "__metadata__":
                    continue
                replayed = replays.take(name, cached)
                hit = cached and not replayed
                if as_json:
                    event = {"event": "update", "node": name, "value": value, "cached": hit}
                    if replayed:
                        event["replayed"] = True
                    progress.line(json.dumps(_jsonable(event), ensure_ascii=False))
                elif name not in returns or replayed:
                    suffix = " (replayed)" if replayed else " (cached)" if hit else ""
                    progress.line(f"{clean(name)}: {_short(value, 200)}{suffix}")

        stop: CtrlC | None = None
        try:
            with ctrl_c(progress, graph.nodes) as stop:
                _drive(graph, input, config, args.durability, on_chunk, progress.enabled, stop)
        except KeyboardInterrupt:
            again = _stopped_hint(args, db, thread_id, input)
            if as_json:
                _print_error(out, "interrupted", "stopped by Ctrl-C", thread_id, resume=again)
            else:
                progress.line("")
            _fail_line(f"stopped. Finished tasks are saved; continue with: {again}")
            if stop is not None:
                out.flush()
                leave_now(stop, 130)
            return 130
        except BrokenPipeError:
            raise  # stdout's reader went away: exit quietly
        except Exception as exc:
            outcome.error = exc
    return _report(args, db, graph, thread_id, config, outcome, out)


def _custom_lines(chunk: Any, as_json: bool, line: Callable[[str], None]) -> None:
    """What the workflow wrote with ``get_stream_writer()``: a string as its
    lines, anything else on one line (``--json``: a ``custom`` event)."""
    if as_json:
        line(json.dumps(_jsonable({"event": "custom", "value": chunk}), ensure_ascii=False))
    elif isinstance(chunk, str):
        for text in chunk.splitlines() or [""]:
            line(clean(text))
    else:
        line(_short(chunk, 500))


def _report(
    args: argparse.Namespace,
    db: Database,
    graph: Pregel,
    thread_id: str,
    config: dict[str, Any],
    outcome: RunOutcome,
    out: TextIO,
) -> int:
    from pregelkit.errors import RunCancelledError, ThreadBusyError, ThreadStateError

    exc = outcome.error
    if isinstance(exc, RunCancelledError):
        return _report_cancelled(args, thread_id, out)
    if isinstance(exc, ThreadStateError):
        # a run of it was queued since this command looked (the engine's
        # refusal names Python calls; this one names commands)
        raise CliError(
            f"cannot {exc.action} thread {thread_id!r}: it is {exc.state}; a worker runs it: "
            f"`{_cli(args, 'cancel', thread_id)}` cancels its queued run",
            kind="not_resumable",
            thread_id=thread_id,
        )
    if exc is not None:
        if isinstance(exc, ThreadBusyError):
            raise CliError(
                f"thread {thread_id!r} is being run by another process; wait for that run to "
                "finish (`pregelkit threads` shows its status)",
                kind="thread_busy",
                thread_id=thread_id,
            )
        if args.traceback:
            traceback.print_exception(exc)
        message = f"{type(exc).__name__}: {exc}"
        again = _resume_command(args, thread_id, None)
        if args.json:
            _print_error(
                out, "workflow", message, thread_id, exception=type(exc).__name__, resume=again
            )
        _fail_line(
            f"the workflow failed: {message}\nFinished tasks are saved; after fixing the "
            f"cause, continue with: {again}"
            + ("" if args.traceback else "\n(--traceback shows where it failed)")
        )
        return 1
    if outcome.interrupts:
        resume = _resume_command(args, thread_id, outcome.interrupts)
        if args.json:
            _print_json(
                {
                    "event": "interrupt",
                    "thread_id": thread_id,
                    "interrupts": outcome.interrupts,
                    "resume": resume,
                },
                out,
            )
        else:
            out.write(f"interrupted: thread {clean(thread_id)} is waiting for an answer\n")
            for i in outcome.interrupts:
                out.write(f"  [{clean(i.id)}] {_short(i.value, 200)}\n")
            if len(outcome.interrupts) == 1:
                out.write(f"resume with (the answer is JSON):\n  {resume}\n")
            else:
                out.write("answer each with (the answer is JSON; --to says which it answers):\n")
                for i in outcome.interrupts:
                    out.write(f"  {_resume_command(args, thread_id, outcome.interrupts, i.id)}\n")
        return 0
    output = graph.get_state(config).values
    if args.json:
        _print_json({"event": "done", "thread_id": thread_id, "output": output}, out)
    else:
        out.write(f"done: thread {clean(thread_id)}\nresult: {_short(output, 500)}\n")
    return 0


def _report_cancelled(args: argparse.Namespace, thread_id: str, out: TextIO) -> int:
    """``pregelkit cancel`` (or ``cancel()``) stopped the run meanwhile:
    not a crash, and the way on is a command, not a Python call."""
    again = _resume_command(args, thread_id, None)
    message = (
        f"cancelled: thread {thread_id} was cancelled while it ran; finished tasks are "
        f"saved. Continue it with: {again}"
    )
    if args.json:
        _print_error(out, "cancelled", message, thread_id, resume=again)
    _fail_line(message)
    return 1


def _is_fresh(input: Any) -> bool:
    """Whether a run starts from ``input`` rather than continuing the thread."""
    from pregelkit.types import Command

    return input is not None and not isinstance(input, Command)


def _db_args(args: argparse.Namespace) -> list[str]:
    """``--db`` for a printed command, unless the default (or $PREGELKIT_DB,
    which the user's shell still has) names the database; a password shows as
    ``***`` (give it again, or through PGPASSWORD or ~/.pgpass)."""
    if args.db in (DEFAULT_DB, os.environ.get("PREGELKIT_DB")):
        return []
    return ["--db", Redactor().mask(args.db)]


def _resume_command(
    args: argparse.Namespace,
    thread_id: str,
    interrupts: Sequence[Interrupt] | None,
    to: str | None = None,
) -> str:
    """The command that resumes ``thread_id``: with an answer to fill in when
    ``interrupts`` wait, and ``--to`` naming one (``to``, else the first) when
    several do."""
    words = ["pregelkit", *_db_args(args), "resume"]
    answer, options = [], []
    if interrupts:
        if len(interrupts) == 1:
            answer = ['"yes"']
        else:
            answer, options = ['"..."'], ["--to", to or interrupts[0].id]
    if thread_id.startswith("-"):  # an option to argparse, unless after "--"
        return shell_join([*words, *options, "--", thread_id, *answer])
    return shell_join([*words, thread_id, *answer, *options])


def _stopped_hint(args: argparse.Namespace, db: Database, thread_id: str, input: Any) -> str:
    """The command that continues a run Ctrl-C stopped. An answer the run
    stopped before taking (the answered task saved nothing) is asked for
    again: a bare ``pregelkit resume`` is refused while the thread waits."""
    from pregelkit.types import Command

    if isinstance(input, Command) and isinstance(input.resume, dict):
        found = _load_tuples(db, thread_id, latest=True)
        waiting = {i.id for _, i in interrupts_of(found[0])} if found else set()
        if waiting & set(input.resume):
            to = ["--to", args.to] if getattr(args, "to", None) else []
            return _cli(args, "resume", thread_id, args.value, *to)
    return _resume_command(args, thread_id, None)


def _parse_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(
            f"{what} is not valid JSON ({exc}): {text!r}. Strings need quotes, e.g. "
            "'\"yes\"'; numbers, lists and objects are written as in JSON"
        ) from None


def _cli(args: argparse.Namespace, *words: str) -> str:
    """A ``pregelkit`` command line for the user to type, with this ``--db``."""
    return shell_join(["pregelkit", *_db_args(args), *words])


def _start_line(args: argparse.Namespace, db: Database, thread_id: str, out: TextIO) -> None:
    if args.json:
        _print_json({"event": "start", "thread_id": thread_id, "db": db.shown}, out)
    else:
        out.write(f"thread: {clean(thread_id)}\n")
        out.flush()


def _state(db: Database, thread_id: str) -> ThreadState | None:
    found = _load_tuples(db, thread_id, latest=True)
    return state_of(db, thread_id, found[0] if found else None)


def _known_state(db: Database, thread_id: str) -> ThreadState:
    """The state of a thread the user named: one the database does not know
    is their mistake."""
    state = _state(db, thread_id)
    if state is None:
        raise _unknown_thread(db, thread_id)
    return state


def _run_example(args: argparse.Namespace, target: Target) -> str:
    """``pregelkit run`` with an input of the type the workflow takes."""
    from pregelkit.cli._example import example_input

    example = example_input(target.graph)
    words = ["pregelkit", *_db_args(args), "run", args.entrypoint]
    return shell_join(words) + " " + (shell_join([example]) if example else "INPUT_JSON")


def _resume_target(args: argparse.Namespace, db: Database, thread_id: str) -> Target:
    """The workflow to resume: ``--target`` if given (the user's choice), else
    the one ``run`` recorded, from where it was found then. Importing it runs
    its module: only because the user asked to resume this thread."""
    if args.target:
        return load_target(args.target)
    meta = db.metadata_of(thread_id)
    spec = meta.get(ENTRYPOINT_KEY)
    if not isinstance(spec, str):
        raise CliError(
            f"thread {thread_id!r} does not say which workflow it runs (it was not started "
            "by `pregelkit run`): pass --target MODULE:NAME",
            kind="target",
            thread_id=thread_id,
        )
    return load_recorded(spec, meta.get(TARGET_KEY), thread_id)


def _require_thread(db: Database, thread_id: str) -> None:
    if not db.has_thread(thread_id):
        raise _unknown_thread(db, thread_id)


def _unknown_thread(db: Database, thread_id: str) -> CliError:
    return CliError(
        f"unknown thread {thread_id!r} in {db.shown!r}: `pregelkit threads` lists the "
        "threads there",
        kind="unknown_thread",
        thread_id=thread_id,
    )


def _load_tuples(
    db: Database, thread_id: str, checkpoint_id: str | None = None, *, latest: bool = False
) -> list[CheckpointTuple]:
    """The thread's root checkpoints, newest first (or only the one named, or
    only the latest)."""
    from pregelkit.errors import CheckpointCorruptError

    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    try:
        if checkpoint_id is not None or latest:
            if checkpoint_id is not None:
                conf["checkpoint_id"] = checkpoint_id
            found = db.saver.get_tuple({"configurable": conf})
            return [found] if found is not None else []
        return list(db.saver.list({"configurable": conf}))
    except CheckpointCorruptError as exc:
        raise CliError(str(exc), kind="database", thread_id=thread_id) from None


def cmd_threads(args: argparse.Namespace, out: TextIO) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}")
    with open_database(args.db, create=False, inspect=True) as db:
        rows = _thread_rows(db, args.status, args.limit)
        if args.json:
            _print_json(rows, out)
            return 0
        if not rows:
            which = f" with status {args.status}" if args.status else ""
            out.write(f"no threads{which} in {clean(db.shown)}\n")
            return 0
        from pregelkit.cli._table import print_table

        print_table(
            ["THREAD", "STATUS", "STEP", "CHECKPOINTS", "UPDATED", "ENTRYPOINT"],
            [
                [
                    r["thread_id"],
                    " ".join(filter(None, (r["status"], r.get("waits_for")))),
                    _cell(r.get("step")),
                    _cell(r.get("checkpoints")),
                    _when(r.get("updated")),
                    _entry_cell(r.get("entrypoint")),
                ]
                for r in rows
            ],
            out,
            wide=args.wide,
            cut=("THREAD", "ENTRYPOINT"),
        )
    return 0


def _thread_rows(db: Database, status: str | None, limit: int | None) -> list[dict[str, Any]]:
    """The rows of ``threads`` in ``status`` (any: ``None``), at most
    ``limit``, the most recently updated first. Threads with checkpoints are
    read newest first and only until ``limit`` of them match."""
    rows: list[dict[str, Any]] = []

    def add(thread_id: str) -> bool:
        row = _thread_row(db, thread_id)
        if row is None or (status is not None and row["status"] != status):
            return False
        rows.append(row)
        return True

    queued = set(queued_threads(db))  # may have no checkpoint yet: all read
    for thread_id in queued:
        add(thread_id)
    found = 0
    for thread_id in db.threads():
        if limit is not None and found >= limit:
            break
        if thread_id not in queued and add(thread_id):
            found += 1
    rows.sort(key=lambda r: str(r.get("updated") or ""), reverse=True)
    return rows[:limit] if limit is not None else rows


def _thread_row(db: Database, thread_id: str) -> dict[str, Any] | None:
    """The thread's row of ``threads``; None if it is gone meanwhile."""
    spec = db.entrypoint_of(thread_id)
    try:
        found = _load_tuples(db, thread_id, latest=True)
    except CliError:
        return {"thread_id": thread_id, "status": UNREADABLE, "entrypoint": spec}
    latest = found[0] if found else None
    state = state_of(db, thread_id, latest)
    if state is None:
        return None
    status, run = state.status, state.run
    row: dict[str, Any] = {"thread_id": thread_id, "status": status}
    if latest is None:
        # a queued run that has not saved a checkpoint yet
        row.update(
            step=None,
            checkpoints=0,
            updated=_iso(run.created_at) if run is not None else None,
        )
    else:
        row.update(
            step=latest.metadata.get("step"),
            checkpoints=db.checkpoint_count(thread_id),
            updated=latest.checkpoint["ts"],
        )
    row["entrypoint"] = spec
    if run is not None and run.status == status and run.waits_for is not None:
        row["waits_for"] = run.waits_for  # sleeping or waiting: until when, for what
    return row


def _iso(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat()


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False, inspect=True) as db:
        _require_thread(db, args.thread)
        tuples = list(reversed(_load_tuples(db, args.thread)))
        rows = []
        for tup in tuples:
            cid = tup.config["configurable"]["checkpoint_id"]
            writes = tup.pending_writes or []
            labels = task_labels(db, tup)
            tasks = sorted({t for t, _, _ in writes if t != _NULL_TASK_ID})
            rows.append(
                {
                    "checkpoint_id": cid,
                    "step": tup.metadata.get("step"),
                    "source": tup.metadata.get("source"),
                    "tasks": [labels.get(t, "-") for t in tasks],
                    "writes": len(writes),
                    "interrupts": [_interrupt_data(i, t, labels) for t, i in interrupts_of(tup)],
                    "errors": [v for _, c, v in writes if c == ERROR],
                    "time": tup.checkpoint["ts"],
                }
            )
        if args.json:
            _print_json(rows, out)
            return 0
        from pregelkit.cli._table import print_table

        whole = None if args.wide else 30
        print_table(
            ["CHECKPOINT", "STEP", "SOURCE", "TASKS", "WRITES", "INTERRUPTS", "TIME"],
            [
                [
                    r["checkpoint_id"],
                    _cell(r["step"]),
                    _cell(r["source"]),
                    _tasks_cell(r["tasks"], whole),
                    str(r["writes"]) + (" (error)" if r["errors"] else ""),
                    _interrupt_cell([i["value"] for i in r["interrupts"]], whole),
                    _when(r["time"]),
                ]
                for r in rows
            ],
            out,
            wide=args.wide,
            cut=("TASKS", "INTERRUPTS"),
        )
    return 0


def _tasks_cell(labels: list[str], width: int | None) -> str:
    """How many tasks, and their names (cut to ``width`` characters)."""
    if not labels:
        return "-"
    return f"{len(labels)}: {_short(', '.join(sorted(labels)), width)}"


def _interrupt_data(interrupt: Any, task_id: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "id": getattr(interrupt, "id", None),
        "value": getattr(interrupt, "value", interrupt),
        "task_id": task_id,
        "task": labels.get(task_id, "-"),
    }


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False, inspect=True) as db:
        _require_thread(db, args.thread)
        checkpoint_id = args.checkpoint
        if checkpoint_id is not None:
            checkpoint_id = _match_checkpoint(db, args.thread, checkpoint_id)
        found = _load_tuples(db, args.thread, checkpoint_id, latest=True)
        if not found:
            raise CliError(f"thread {args.thread!r} has no checkpoints", thread_id=args.thread)
        tup = found[0]
        conf = tup.config["configurable"]
        labels = task_labels(db, tup)
        writes = tup.pending_writes or []
        data = {
            "thread_id": args.thread,
            "checkpoint_id": conf["checkpoint_id"],
            "parent_checkpoint_id": (tup.parent_config or {})
            .get("configurable", {})
            .get("checkpoint_id"),
            "time": tup.checkpoint["ts"],
            "metadata": tup.metadata,
            "channel_values": tup.checkpoint["channel_values"],
            "channel_versions": tup.checkpoint["channel_versions"],
            "pending_writes": [
                {"task": labels.get(t, "-"), "task_id": t, "channel": c, "value": v}
                for t, c, v in writes
            ],
            "interrupts": [_interrupt_data(i, t, labels) for t, i in interrupts_of(tup)],
        }
        if args.json:
            _print_json(data, out)
            return 0
        _print_checkpoint(data, out, args.wide)
    return 0


def _print_checkpoint(data: dict[str, Any], out: TextIO, wide: bool) -> None:
    from pregelkit.cli._table import print_table

    meta = {k: v for k, v in data["metadata"].items() if k not in ("parents", TARGET_KEY)}
    whole = None if wide else 200
    out.write(f"thread:      {clean(data['thread_id'])}\n")
    out.write(f"checkpoint:  {clean(data['checkpoint_id'])}\n")
    out.write(f"parent:      {clean(data['parent_checkpoint_id'] or '-')}\n")
    out.write(f"time:        {_when(data['time'])}\n")
    out.write(f"metadata:    {_short(meta, whole)}\n")
    out.write("\nchannel values:\n")
    values = data["channel_values"]
    if values:
        rows = [[k, one_line(v)] for k, v in values.items()]
        print_table(
            ["CHANNEL", "VALUE"], rows, out, wide=wide, cut=("CHANNEL", "VALUE"), indent="  "
        )
    else:
        out.write("  (none)\n")
    out.write("\npending writes:\n")
    if data["pending_writes"]:
        rows = [
            [w["task"], w["task_id"][:8], w["channel"], one_line(w["value"])]
            for w in data["pending_writes"]
        ]
        print_table(
            ["TASK", "TASK ID", "CHANNEL", "VALUE"],
            rows,
            out,
            wide=wide,
            cut=("TASK", "CHANNEL", "VALUE"),
            indent="  ",
        )
    else:
        out.write("  (none)\n")
    if data["interrupts"]:
        out.write("\ninterrupts:\n")
        for i in data["interrupts"]:
            out.write(
                f"  [{clean(str(i['id']))}] {_short(i['value'], whole)} (task {clean(i['task'])})\n"
            )


def _match_checkpoint(db: Database, thread_id: str, prefix: str) -> str:
    rows = db._rows(
        "SELECT checkpoint_id FROM pregelkit_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ""),
    )
    ids = sorted(str(r[0]) for r in rows if str(r[0]).startswith(prefix))
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise CliError(
            f"thread {thread_id!r} has no checkpoint {prefix!r}: `pregelkit history "
            f"{thread_id}` lists its checkpoints",
            thread_id=thread_id,
        )
    raise CliError(
        f"{prefix!r} matches {len(ids)} checkpoints; give more of the id", thread_id=thread_id
    )


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    """Forget a thread. Holding its lock while deleting keeps a run from
    starting meanwhile; releasing it removes the lock file too."""
    from pregelkit.errors import ThreadBusyError

    with open_database(args.db, create=False, inspect=True) as db:
        state = _known_state(db, args.thread)
        if state.run is not None and state.run.status in ACTIVE:
            raise refuse(
                state,
                "delete",
                f"cancel its run first: `{_cli(args, 'cancel', args.thread)}`",
            )
        try:
            with db.saver.lock_thread(args.thread):
                db.saver.delete_thread(args.thread)
        except ThreadBusyError:
            raise CliError(
                f"not deleted: thread {args.thread!r} is being run right now; delete it when "
                "that run is over",
                kind="thread_busy",
                thread_id=args.thread,
            ) from None
        if args.json:
            _print_json({"deleted": args.thread}, out)
        else:
            out.write(f"deleted thread {clean(args.thread)}\n")
    return 0
