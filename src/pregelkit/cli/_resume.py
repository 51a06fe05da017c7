"""``pregelkit run`` and ``resume``: the commands that run a workflow here,
or, for a thread whose runs go through the queue, queue its resume. Each
first asks the thread's state (``_lifecycle``) and refuses, in a line, what
makes no sense in it (docs/guides/lifecycle.md)."""

from __future__ import annotations

import argparse
import uuid
from typing import TYPE_CHECKING, Any, TextIO

from pregelkit.cli._answer import pending_interrupts, resume_map
from pregelkit.cli._commands import (
    _cli,
    _execute,
    _known_state,
    _parse_json,
    _resume_command,
    _resume_target,
    _run_example,
    _start_line,
    _state,
)
from pregelkit.cli._db import ENTRYPOINT_KEY, TARGET_KEY, Database, open_database
from pregelkit.cli._errors import CliError
from pregelkit.cli._lifecycle import (
    CANCELLED,
    DONE,
    INTERRUPTED,
    QUEUED,
    RUNNING,
    SLEEPING,
    WAITING,
    ThreadState,
    refuse,
)
from pregelkit.cli._render import _print_json, clean
from pregelkit.cli._target import Target, load_target

if TYPE_CHECKING:
    from pregelkit.types import Interrupt

__all__ = ["cmd_resume", "cmd_run"]

NO_ANSWER: Any = object()
"""What ``resume`` gets without VALUE_JSON (``null`` is an answer: the
interrupt returns None, as a queued ``submit --resume null`` does)."""


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    value = _parse_json(args.input, "INPUT_JSON")
    target = load_target(args.entrypoint)
    thread_id = args.thread or uuid.uuid4().hex[:12]
    with open_database(args.db, create=True) as db:
        state = _state(db, thread_id)
        if value is None:
            if state is None:
                raise CliError(
                    f"give the workflow an input (INPUT_JSON), e.g. {_run_example(args, target)}; "
                    "without one, run continues an existing thread (--thread ID)"
                )
            # `run` without an input continues the thread: what `resume` does
            return _continue(args, db, state, NO_ANSWER, target, out)
        if state is not None:
            _check_fresh_run(args, state)
        _start_line(args, db, thread_id, out)
        return _execute(args, db, target, thread_id, value, out)


def _check_fresh_run(args: argparse.Namespace, state: ThreadState) -> None:
    """A run with a new input starts over in any state but these."""
    thread_id = state.thread_id
    if state.status == QUEUED:
        raise refuse(
            state, "run", f"a worker runs it; `{_cli(args, 'cancel', thread_id)}` cancels it"
        )
    if state.status in (SLEEPING, WAITING):
        raise refuse(
            state,
            "run",
            "a worker serving its workflow resumes it when it is due; "
            f"`{_cli(args, 'cancel', thread_id)}` cancels it",
        )
    if state.status == RUNNING:
        raise refuse(
            state,
            "run",
            f"wait for that run to end, or stop it with `{_cli(args, 'cancel', thread_id)}`",
        )
    if state.status == CANCELLED:
        again = ""
        if state.left_to_run:
            again = f"`{_cli(args, 'resume', thread_id)}` continues it, or "
        raise refuse(
            state,
            "run",
            f"{again}`{_cli(args, 'uncancel', thread_id)}` lets it run again",
        )


def cmd_resume(args: argparse.Namespace, out: TextIO) -> int:
    value = _parse_json(args.value, "VALUE_JSON")
    with open_database(args.db, create=False) as db:
        state = _known_state(db, args.thread)
        answer = NO_ANSWER if args.value is None else value  # JSON null is an answer too
        return _continue(args, db, state, answer, None, out)


def _continue(
    args: argparse.Namespace,
    db: Database,
    state: ThreadState,
    value: Any,
    target: Target | None,
    out: TextIO,
) -> int:
    """Resume the thread (answering its interrupt with ``value``), here or,
    for a thread whose runs go through the queue, by queueing the resume."""
    from pregelkit.types import Command

    thread_id = state.thread_id
    to = getattr(args, "to", None)  # `run` without an input has no --to
    if to is not None and value is NO_ANSWER:
        example = _cli(args, "resume", thread_id, '"yes"', "--to", to)
        raise CliError(
            f"--to {to} names the interrupt to answer: give the answer as VALUE_JSON too, "
            f"e.g. {example}",
            thread_id=thread_id,
        )
    pending = _check_resumable(args, db, state, value)
    run_input = None
    if value is not NO_ANSWER:
        answers = resume_map(
            thread_id,
            value,
            to,
            pending,
            lambda iid: _resume_command(args, thread_id, pending, iid),
        )
        run_input = Command(resume=answers)
    if state.status == CANCELLED:
        # resuming is the explicit ask a cancelled thread waits for
        db.saver.put_thread_control(thread_id, None)
    if state.queued_thread and target is None and not args.target:
        return _queue_resume(args, db, state, run_input, out)
    target = target or _resume_target(args, db, thread_id)
    _start_line(args, db, thread_id, out)
    return _execute(args, db, target, thread_id, run_input, out)


def _check_resumable(
    args: argparse.Namespace, db: Database, state: ThreadState, value: Any
) -> list[Interrupt]:
    """Refuse what makes no sense in the thread's state, naming what does;
    returns the interrupts it waits at."""
    thread_id = state.thread_id
    if state.status == QUEUED:
        raise refuse(
            state,
            "resume",
            "a worker runs it (`pregelkit runs` shows it); "
            f"`{_cli(args, 'cancel', thread_id)}` cancels it",
        )
    if state.status == RUNNING:
        raise refuse(
            state,
            "resume",
            f"wait for that run to end, or stop it with `{_cli(args, 'cancel', thread_id)}`",
        )
    if state.saved is None:
        workflow = state.run.workflow if state.run is not None else "NAME"
        raise refuse(
            state,
            "resume",
            "nothing of it was saved; queue it again with `"
            + _cli(args, "submit", f"MODULE:{workflow}", "--input", "JSON", "--thread", thread_id)
            + "`",
        )
    if state.saved == DONE:
        if value is not NO_ANSWER:
            action, advice = "answer", "it is not waiting for an answer; "
        else:
            action, advice = "resume", ""
        if state.status == CANCELLED:
            advice += f"`{_cli(args, 'uncancel', thread_id)}` clears the mark"
        else:
            spec = db.entrypoint_of(thread_id) or "MODULE:NAME"
            advice += (
                "there is nothing to resume; `"
                + _cli(args, "run", spec, "INPUT_JSON", "--thread", thread_id)
                + "` runs it again"
            )
        raise refuse(state, action, advice)
    pending = pending_interrupts(db, thread_id)
    if state.saved == INTERRUPTED and value is NO_ANSWER:
        raise refuse(
            state,
            "resume",
            "give the answer as VALUE_JSON, e.g. "
            + _resume_command(args, thread_id, pending or None),
        )
    if state.saved != INTERRUPTED and value is not NO_ANSWER:
        if state.status in (SLEEPING, WAITING):
            then = "a worker serving its workflow resumes it when it is due"
        else:
            then = f"`{_cli(args, 'resume', thread_id)}` continues it"
        raise refuse(state, "answer", f"it is not waiting for an answer: {then}")
    return pending


def _queue_resume(
    args: argparse.Namespace, db: Database, state: ThreadState, run_input: Any, out: TextIO
) -> int:
    """The thread's runs go through the queue: so does its resume, for a
    worker serving its workflow to run."""
    from pregelkit.checkpoint.runs import submit_run

    assert state.run is not None
    meta = db.metadata_of(state.thread_id)
    config = {
        "configurable": {"thread_id": state.thread_id},
        "metadata": {k: meta[k] for k in (ENTRYPOINT_KEY, TARGET_KEY) if k in meta},
    }
    handle = submit_run(db.saver, state.run.workflow, run_input, config)
    status = handle.status()
    if args.json:
        _print_json(
            {
                "event": "submitted",
                "run_id": handle.run_id,
                "thread_id": state.thread_id,
                "workflow": state.run.workflow,
                "status": status,
            },
            out,
        )
    elif status in ("sleeping", "waiting"):
        # its run waits in the queue already (a durable wait): joined, not queued
        out.write(
            f"{status}: run {handle.run_id} of thread {clean(state.thread_id)} is in the queue "
            f"already; a worker serving {state.run.workflow!r} resumes it when it is due "
            "(`pregelkit runs` shows it)\n"
        )
    else:
        out.write(
            f"queued: run {handle.run_id} of thread {clean(state.thread_id)} ({status}); a worker "
            f"serving {state.run.workflow!r} resumes it (`pregelkit runs` shows it)\n"
        )
    return 0
