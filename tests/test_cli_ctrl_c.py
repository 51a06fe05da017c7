"""Ctrl-C in ``pregelkit run``: the first says at once that the run is
stopping and what it waits for; a second stops without waiting for the
running sync task (its result is not saved, and the resume runs it again);
both exit 130 with a resume hint that works.

Real processes and real SIGINTs; each signal is sent once the previous
step is seen (a log line, a stderr line), never after a fixed sleep, and
the only clock is a generous guard against hanging.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

GUARD = 60.0
EXE = str(Path(sys.executable).parent / "pregelkit")

FLOW = """
import asyncio, os, time
from pregelkit.func import entrypoint, task

LOG = {log!r}

def note(line):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (line + "\\n").encode())
    os.close(fd)

def seconds():
    # the first attempt hangs (long enough to be stopped), later ones are quick
    return {first} if not os.path.exists(LOG + ".again") else 0.01

@task
def fetch(x: int) -> int:
    note("start fetch")
    time.sleep(seconds())
    note("end fetch")
    return x * 2

@entrypoint()
def flow(x: int) -> int:
    return fetch(x).result() + 1

@entrypoint()
async def aflow(x: int) -> int:
    return await fetch(x) + 1

@entrypoint()
def ask(x: int) -> int:
    from pregelkit.types import interrupt

    more = interrupt("how much more?")
    return fetch(x).result() + more
"""


class Run:
    """``pregelkit run`` in a process, its stderr read line by line."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [EXE, *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def wait_for(self, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + GUARD
        while not predicate():
            assert self.proc.poll() is None, (self.proc.returncode, self.err)
            assert time.monotonic() < deadline, self.err
            time.sleep(0.02)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.err)

    def finish(self, guard: float = GUARD) -> tuple[int, str, str]:
        try:  # not communicate(): it would take stderr's lines from the reader
            self.proc.wait(timeout=guard)
        finally:
            self.proc.kill()
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.reader.join(GUARD)
        return self.proc.returncode, out, "\n".join(self.err)


def _setup(tmp_path: Path, first: float) -> Path:
    log = tmp_path / "log"
    (tmp_path / "wf.py").write_text(FLOW.format(log=str(log), first=first))
    return log


def _started(run: Run, log: Path) -> None:
    """Wait until the task has started, and a moment more for the CLI to get
    the run's event saying so (the message names the tasks it knows of)."""
    run.wait_for(lambda: "start fetch" in _log(log))
    time.sleep(1.0)


def _ctrl_c_twice(run: Run, log: Path) -> tuple[int, str, str]:
    """Ctrl-C once the task runs, again once the first one is answered."""
    _started(run, log)
    run.proc.send_signal(signal.SIGINT)
    run.wait_for(lambda: run.said("stopping:"))
    run.proc.send_signal(signal.SIGINT)
    return run.finish()


def _log(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _resume(tmp_path: Path, hint: str) -> subprocess.CompletedProcess[str]:
    """Run the resume command the stop printed, word for word."""
    words = hint.split()
    assert words[0] == "pregelkit", hint
    return subprocess.run(
        [EXE, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=GUARD
    )


def _ctrl_c_once(run: Run, log: Path) -> tuple[int, str, str]:
    _started(run, log)
    run.proc.send_signal(signal.SIGINT)
    return run.finish()


def _resume_runs_fetch_again(tmp_path: Path, log: Path, err: str) -> None:
    """fetch was stopped before its end: the printed resume runs it again."""
    assert "end fetch" not in _log(log)
    (tmp_path / "log.again").write_text("")
    resumed = _resume(tmp_path, _hint(err))
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "result: 11" in resumed.stdout, resumed.stdout
    assert _log(log) == ["start fetch", "start fetch", "end fetch"]


def _hint(err: str) -> str:
    return err.split("continue with: ", 1)[1].splitlines()[0].strip()


def test_second_ctrl_c_stops_without_waiting_and_resume_runs_the_task_again(
    tmp_path: Path,
) -> None:
    log = _setup(tmp_path, first=600)  # without the second Ctrl-C: a 10-minute wait
    db = str(tmp_path / "state.db")
    run = Run(tmp_path, "run", "wf.py:flow", "5", "--thread", "S3", "--db", db)
    code, out, err = _ctrl_c_twice(run, log)
    assert code == 130, (out, err)
    assert "stopping: waiting for 1 running task (fetch) to finish; Ctrl-C again to stop now" in err
    assert "stopping now, without waiting for fetch: its result is not saved" in err
    _resume_runs_fetch_again(tmp_path, log, err)


def test_ctrl_c_in_an_async_run_cancels_at_once_and_says_the_result_is_lost(
    tmp_path: Path,
) -> None:
    """An async run's tasks are cancelled (as in LangGraph): a sync task's
    thread cannot be, so its result is dropped, and the command says so
    instead of waiting for it."""
    log = _setup(tmp_path, first=600)
    db = str(tmp_path / "state.db")
    run = Run(tmp_path, "run", "wf.py:aflow", "5", "--thread", "S6", "--db", db)
    code, out, err = _ctrl_c_once(run, log)
    assert code == 130, (out, err)
    assert (
        "stopping: cancelling 1 running task (fetch): its result is not saved "
        "(resume runs it again)" in err
    )
    _resume_runs_fetch_again(tmp_path, log, err)


def test_first_ctrl_c_waits_for_the_running_task_and_saves_it(tmp_path: Path) -> None:
    log = _setup(tmp_path, first=2)
    db = str(tmp_path / "state.db")
    run = Run(tmp_path, "run", "wf.py:flow", "5", "--thread", "S4", "--db", db)
    code, out, err = _ctrl_c_once(run, log)
    assert code == 130, (out, err)
    assert "stopping: waiting for 1 running task (fetch) to finish" in err
    assert "stopping now" not in err
    assert _log(log) == ["start fetch", "end fetch"]  # waited for, and saved:
    resumed = _resume(tmp_path, _hint(err))
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "result: 11" in resumed.stdout
    assert _log(log) == ["start fetch", "end fetch"]  # the resume did not run it again


def test_under_json_stdout_stays_json_and_ends_with_the_interrupted_error(tmp_path: Path) -> None:
    """Under --json stdout stays JSON lines, the last one the error (type
    ``interrupted``, with the resume command); the Ctrl-C messages go to stderr."""
    log = _setup(tmp_path, first=600)
    db = str(tmp_path / "state.db")
    run = Run(tmp_path, "--json", "run", "wf.py:flow", "5", "--thread", "S5", "--db", db)
    code, out, err = _ctrl_c_twice(run, log)
    assert code == 130, (out, err)
    events = [json.loads(line) for line in out.splitlines()]
    error = events[-1]["error"]
    assert error["type"] == "interrupted" and error["thread_id"] == "S5", events
    assert error["resume"].startswith("pregelkit ") and "resume S5" in error["resume"]
    assert "stopping now" in err


def test_ctrl_c_twice_while_an_answer_runs_hints_the_answer_again(tmp_path: Path) -> None:
    """``pregelkit resume T VALUE`` stopped before the answered task saved
    anything: the thread still waits for the answer, so the printed command
    gives it again (a bare ``pregelkit resume T`` is refused there)."""
    log = _setup(tmp_path, first=600)
    db = str(tmp_path / "state.db")
    asked = subprocess.run(
        [EXE, "run", "wf.py:ask", "5", "--thread", "S7", "--db", db],
        cwd=tmp_path, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert "waiting for an answer" in asked.stdout, (asked.stdout, asked.stderr)
    run = Run(tmp_path, "resume", "S7", "1", "--db", db)
    code, out, err = _ctrl_c_twice(run, log)
    assert code == 130, (out, err)
    hint = _hint(err)
    assert "resume S7 1" in hint, hint
    (tmp_path / "log.again").write_text("")
    resumed = subprocess.run(
        [EXE, *shlex.split(hint)[1:]], cwd=tmp_path, capture_output=True, text=True,
        timeout=GUARD,
    )  # fmt: skip
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "result: 11" in resumed.stdout, resumed.stdout
