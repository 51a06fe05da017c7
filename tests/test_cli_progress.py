"""The live progress line of ``pregelkit run`` / ``resume``: shown in place on
stderr when stderr is a terminal (a pseudo-terminal here), with the step,
the tasks running and done, the retries and the time elapsed; absent from
pipes and under ``--json``."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

FLOWS = """
import sys
import time
from pathlib import Path

from pregelkit.func import entrypoint, task
from pregelkit.types import RetryPolicy, interrupt


@task(retry_policy=RetryPolicy(initial_interval=0.2, jitter=False, retry_on=ConnectionError))
def flaky(n):
    marker = Path(f"flaky-{n}")
    if not marker.exists():
        marker.write_text("failed once")
        raise ConnectionError("the first try fails")
    time.sleep(0.6)
    print(f"flaky({n}) warns", file=sys.stderr, flush=True)
    print(f"flaky({n}) worked", flush=True)
    return n


@entrypoint()
def slow_flaky(n):
    return flaky(n).result()


@entrypoint()
def sleepy(n):
    time.sleep(n)
    return n


@entrypoint()
def ask_then_flaky(n):
    answer = interrupt("go?")
    return [answer, flaky(n).result()]
"""

PROGRESS = "\x1b[K… "


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    return tmp_path


def on_terminal(
    cwd: Path, *args: str, once_shown: Callable[[subprocess.Popen[bytes]], None] | None = None
) -> tuple[int, str, str]:
    """Run ``pregelkit ARGS`` with stderr on a pseudo-terminal: (exit status,
    stdout, what the terminal showed). ``once_shown`` is called when the
    progress line first shows."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=child,
    )
    os.close(child)
    assert proc.stdout is not None
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                data = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            if once_shown is not None and PROGRESS.encode() in b"".join(chunks):
                once_shown(proc)
                once_shown = None
        elif proc.poll() is not None:
            break
    os.close(main)
    out = proc.stdout.read().decode()
    return proc.wait(timeout=60), out, b"".join(chunks).decode()


def test_progress_line_on_a_terminal(workdir: Path) -> None:
    code, out, screen = on_terminal(workdir, "run", "flows:slow_flaky", "3", "--thread", "p1")
    assert code == 0, screen
    assert PROGRESS in screen
    shown = [part for part in screen.split("\r") if part.startswith(PROGRESS)]
    assert any(
        "step 0 · running flaky, slow_flaky · 0 tasks done · 1 retry · " in s for s in shown
    ), shown
    # the last status shown was cleared (by a line of output, or as the run ended)
    last = screen.rfind("\r" + PROGRESS)
    assert screen.find("\r\x1b[K", last + 1) > last
    # what the workflow writes to stderr comes whole, after the status is cleared
    assert "\r\x1b[Kflaky(3) warns\r\n" in screen
    assert "flaky(3) worked" in out and "result: 3" in out
    assert "\x1b" not in out


def test_progress_line_on_resume(workdir: Path) -> None:
    code, out, _ = on_terminal(workdir, "run", "flows:ask_then_flaky", "4", "--thread", "p2")
    assert code == 0 and "waiting for an answer" in out
    code, out, screen = on_terminal(workdir, "resume", "p2", '"yes"')
    assert code == 0, screen
    assert "1 retry" in screen and PROGRESS in screen
    assert "result: ['yes', 4]" in out


def test_ctrl_c_clears_the_line_before_saying_how_to_continue(workdir: Path) -> None:
    code, _, screen = on_terminal(
        workdir,
        "run",
        "flows:sleepy",
        "3",  # the running task finishes before the run stops: keep it short
        "--thread",
        "p3",
        once_shown=lambda p: p.send_signal(2),
    )
    assert code == 130
    assert "\r\x1b[Kpregelkit: stopped. Finished tasks are saved; continue with: " in screen


def test_no_progress_line_in_a_pipe(workdir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pregelkit", "run", "flows:slow_flaky", "5"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x1b" not in proc.stderr
    assert "…" not in proc.stderr and "retry" not in proc.stderr.lower()


def test_no_progress_line_under_json(workdir: Path) -> None:
    code, out, screen = on_terminal(workdir, "run", "flows:slow_flaky", "6", "--json")
    assert code == 0, screen
    assert "\x1b" not in screen and "…" not in screen
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["event"] == "done" and events[-1]["output"] == 6


@pytest.mark.parametrize("is_async", [False, True])
def test_each_retry_is_logged(is_async: bool, caplog: pytest.LogCaptureFixture) -> None:
    """The record the progress line counts: one INFO line per retry, saying
    which task, which attempt and why, as LangGraph logs it."""
    import asyncio

    from pregelkit.func import entrypoint, task
    from pregelkit.types import RetryPolicy

    failures = [ConnectionError("down"), ConnectionError("still down")]
    policy = RetryPolicy(initial_interval=0.01, jitter=False, retry_on=ConnectionError)

    def body(n: int) -> int:
        if failures:
            raise failures.pop(0)
        return n

    async def abody(n: int) -> int:
        return body(n)

    flaky = task(retry_policy=policy, name="flaky")(abody if is_async else body)

    @entrypoint()
    def wf(n: int) -> int:
        return flaky(n).result()

    @entrypoint()
    async def awf(n: int) -> int:
        return await flaky(n)

    with caplog.at_level("INFO", logger="pregelkit.pregel._retry"):
        result = asyncio.run(awf.ainvoke(7)) if is_async else wf.invoke(7)
    assert result == 7
    assert [r.getMessage() for r in caplog.records] == [
        "Retrying task flaky after 0.01 seconds (attempt 1) after ConnectionError down",
        "Retrying task flaky after 0.02 seconds (attempt 2) after ConnectionError still down",
    ]
