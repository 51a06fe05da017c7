"""Drives threads of ``lifecycle_flows:flow`` into each state of the
lifecycle table (docs/guides/lifecycle.md), performs its actions through
the Python API or the command line (``pregelkit.cli.main`` in-process), and
judges what happened against the table's outcome words.

Used by tests/test_lifecycle_table.py (every cell) and
tests/test_lifecycle_properties.py (random sequences of actions).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import lifecycle_flows
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.cli import main
from pregelkit.cli._commands import _state, _thread_row
from pregelkit.cli._db import open_database
from pregelkit.cli._lifecycle import latest_run
from pregelkit.cli._target import load_target, recorded
from pregelkit.errors import (
    EmptyInputError,
    GraphDrained,
    NothingToResumeError,
    RunCancelledError,
    ThreadBusyError,
    ThreadStateError,
)
from pregelkit.runtime import RunControl
from pregelkit.types import Command
from pregelkit.worker import Worker

DOC = Path(__file__).parents[1] / "docs" / "guides" / "lifecycle.md"
STATES = (
    "sleeping",  # first: the worker that suspends them takes any queued run of flow
    "waiting",
    "queued",
    "running",
    "interrupted",
    "failed",
    "pending",
    "cancelled",
    "drained",
    "done",
)
ACTIONS = (
    "run",
    "resume",
    "answer",
    "cancel",
    "uncancel",
    "delete",
    "submit",
    "submit resume",
    "Ctrl-C",
)
OUTCOMES = {
    "runs",
    "continues",
    "answers",
    "waits",
    "returns",
    "refused",
    "cancels",
    "clears",
    "unchanged",
    "deletes",
    "queues",
    "joins",
    "stops",
    "none",
}
REFUSALS = (
    RunCancelledError,
    ThreadBusyError,
    NothingToResumeError,
    EmptyInputError,
    ThreadStateError,
)
ENTRY = "lifecycle_flows:flow"
_CELL = re.compile(r"^`([\w-]+)`(?:\s*/\s*`([\w-]+)`)?")


def read_table() -> dict[str, dict[str, tuple[str, str]]]:
    """state -> action -> (API outcome, CLI outcome), from the guide."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| state | run |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    table: dict[str, dict[str, tuple[str, str]]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        row: dict[str, tuple[str, str]] = {}
        for action, cell in zip(header[1:], cells[1:], strict=True):
            found = _CELL.match(cell)
            assert found, f"cell {cells[0]}/{action} does not start with an outcome: {cell!r}"
            api, cli = found.group(1), found.group(2) or found.group(1)
            row[action] = (api, cli)
        table[cells[0]] = row
    return table


@dataclass
class Result:
    ok: bool
    value: Any = None
    error: BaseException | None = None
    code: int | None = None
    out: str = ""
    err: str = ""


TERMINAL = ("done", "interrupted", "failed")


@dataclass
class Harness:
    """``entry`` runs on ``input``; ``strict``: judge by what ``flow(1)`` and
    ``flow(10)`` do exactly (the table's cells), else by the states a run of
    any small workflow may end in (the random sequences)."""

    url: str
    saver: BaseCheckpointSaver[Any]
    capture: Callable[[], tuple[str, str]]
    entry: str = ENTRY
    input: Any = 1
    strict: bool = True
    wf: Any = field(init=False)

    def __post_init__(self) -> None:
        target = load_target(self.entry)
        self.wf = target.graph.copy(checkpointer=self.saver).with_config(metadata=recorded(target))

    @staticmethod
    def cfg(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    # reading

    def status(self, thread: str) -> str | None:
        """What ``pregelkit threads`` shows for the thread (None: not listed)."""
        with open_database(self.url, create=False, inspect=True) as db:
            row = _thread_row(db, thread)
        return None if row is None else str(row["status"])

    def saved(self, thread: str) -> str | None:
        """What the thread's checkpoints alone say (None: it has none)."""
        with open_database(self.url, create=False) as db:
            state = _state(db, thread)
        return None if state is None else state.saved

    def run_id(self, thread: str) -> str | None:
        with open_database(self.url, create=False) as db:
            run = latest_run(db, thread)
        return None if run is None else run.run_id

    def run_status(self, thread: str) -> str | None:
        with open_database(self.url, create=False) as db:
            run = latest_run(db, thread)
        return None if run is None else run.status

    def mark(self, thread: str) -> Any:
        return self.saver.get_thread_control(thread)

    # making states

    def make(self, state: str, thread: str) -> None:
        """Drive ``thread`` into ``state`` (``running``: use ``hold``)."""
        cfg = self.cfg(thread)
        if state == "queued":
            self.wf.submit(1, cfg)
        elif state in ("sleeping", "waiting"):
            self._suspend(state, thread)
        elif state == "interrupted":
            self.wf.invoke(10, cfg)
        elif state == "failed":
            lifecycle_flows.FAIL["step"] = True
            try:
                with pytest.raises(ValueError, match="on purpose"):
                    self.wf.invoke(1, cfg)
            finally:
                lifecycle_flows.FAIL["step"] = False
        elif state in ("pending", "cancelled", "running"):
            # the reader leaves after the first task: the run stops there
            for _ in self.wf.stream(1, cfg, stream_mode="updates"):
                break
            if state == "cancelled":
                self.wf.cancel(cfg)
        elif state == "drained":
            control = RunControl()
            control.request_drain("deploy")
            with pytest.raises(GraphDrained):
                self.wf.invoke(1, cfg, control=control)
        elif state == "done":
            self.wf.invoke(1, cfg)
        else:
            raise AssertionError(state)

    def _suspend(self, state: str, thread: str) -> None:
        """A worker runs ``flow(-1)`` (a sleep of an hour) or ``flow(-2)`` (a
        ``recv``) until the run is suspended in the queue, and stops. It
        would take any queued run of ``flow`` too: these states are made
        before any other (their rows come first in the table)."""
        handle = self.wf.submit(-1 if state == "sleeping" else -2, self.cfg(thread))
        worker = Worker([self.wf], self.saver, concurrency=1)
        serving = threading.Thread(target=worker.run, daemon=True)
        serving.start()
        try:
            end = time.monotonic() + 30
            while handle.status() != state:
                assert time.monotonic() < end, f"{thread} never got {state}"
                time.sleep(0.01)
        finally:
            worker.stop()
            serving.join(30)

    @contextlib.contextmanager
    def hold(self, state: str, thread: str) -> Iterator[None]:
        """While in this block, a ``running`` thread is held by a run."""
        if state != "running":
            yield
            return
        with self.saver.lock_thread(thread):
            yield

    # acting

    def act(self, interface: str, action: str, thread: str) -> Result:
        lifecycle_flows.RAN.clear()
        if interface == "api":
            return self._api(action, thread)
        return self._cli(action, thread)

    def _api(self, action: str, thread: str) -> Result:
        cfg = self.cfg(thread)
        calls: dict[str, Callable[[], Any]] = {
            "run": lambda: self.wf.invoke(self.input, cfg),
            "resume": lambda: self.wf.invoke(None, cfg),
            "answer": lambda: self.wf.invoke(Command(resume="yes"), cfg),
            "cancel": lambda: self.wf.cancel(cfg),
            "uncancel": lambda: self.wf.uncancel(cfg),
            "delete": lambda: self.saver.delete_thread(thread),
            "submit": lambda: self.wf.submit(self.input, cfg),
            "submit resume": lambda: self.wf.submit(Command(resume="yes"), cfg),
        }
        try:
            return Result(True, calls[action]())
        except REFUSALS as exc:
            return Result(False, error=exc)
        except ValueError as exc:
            if "on purpose" not in str(exc):
                raise
            return Result(True, error=exc)  # it ran, and a task failed: the thread is failed

    def _cli(self, action: str, thread: str) -> Result:
        words: dict[str, list[str]] = {
            "run": ["run", self.entry, json.dumps(self.input), "--thread", thread],
            "resume": ["resume", thread],
            "answer": ["resume", thread, '"yes"'],
            "cancel": ["cancel", thread],
            "uncancel": ["uncancel", thread],
            "delete": ["delete", thread],
            "submit": ["submit", self.entry, "--input", json.dumps(self.input), "--thread", thread],
            "submit resume": ["submit", self.entry, "--resume", '"yes"', "--thread", thread],
        }
        code = main([*words[action], "--db", self.url])
        out, err = self.capture()
        # exit 1: it ran, and a task failed (the thread is failed)
        ran = code == 0 or (code == 1 and "the workflow failed" in err)
        return Result(ran, code=code, out=out, err=err)

    # judging

    def disagreement(
        self,
        outcome: str,
        state: str,
        thread: str,
        result: Result,
        run_before: str | None,
    ) -> str | None:
        """Why what happened is not ``outcome`` (None: it is)."""
        if result.code is not None and "Traceback" in result.err:
            return f"a traceback: {result.err}"
        status = self.status(thread)
        ran = list(lifecycle_flows.RAN)
        if outcome == "refused":
            if result.ok:
                return f"not refused (status now {status})"
            if result.code is not None:
                lines = result.err.strip().splitlines()
                if result.code != 2 or len(lines) != 1:
                    return f"exit {result.code}, not one line: {result.err!r}"
                if "(config)" in result.err or "invoke(" in result.err:
                    return f"Python advice on the command line: {result.err!r}"
                if f"it is {state}" not in result.err and "being run" not in result.err:
                    return f"the error does not name the state {state!r}: {result.err!r}"
            if status != state:
                return f"refused, but the status changed from {state} to {status}"
            return None
        if not result.ok:
            return f"failed: {result.error!r} {result.err.strip()}"
        strict = self.strict
        ended = ("done",) if strict else TERMINAL
        checks: dict[str, Callable[[], bool]] = {
            "runs": lambda: "step" in ran and status in ended,
            # what finished before is not run again (step had, when pending)
            "continues": lambda: (
                status in ended
                and not (strict and state in ("pending", "cancelled") and "step" in ran)
            ),
            "answers": lambda: status in ended and (not strict or ran == ["tail"]),
            "waits": lambda: status == "interrupted" and ran == [],
            "returns": lambda: status == "done" and ran == [],
            "cancels": lambda: (
                self.mark(thread) == "cancelled" and status in ("cancelled", "running")
            ),
            # a thread cancelled before it ever ran is as if never submitted
            "clears": lambda: (
                self.mark(thread) is None
                and status != "cancelled"
                and (status is not None or self.saved(thread) is None)
            ),
            "unchanged": lambda: status == state,
            "deletes": lambda: self.saver.get_tuple(self.cfg(thread)) is None,
            "queues": lambda: (
                self.run_status(thread) == "queued"
                and self.run_id(thread) != run_before
                and status in ("queued", "running")
            ),
            "joins": lambda: self.run_id(thread) == run_before and status == state,
        }
        if not checks[outcome]():
            return f"not {outcome}: status {status}, ran {ran}, mark {self.mark(thread)!r}"
        return None
