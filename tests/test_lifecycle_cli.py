"""The thread lifecycle from the command line: each defect found by using
``pregelkit`` as a new user would (issue 25, section 1), reproduced. The
whole table of states and actions is tests/test_lifecycle_table.py."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import lifecycle_flows
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.cli import main
from pregelkit.cli._target import load_target, recorded
from pregelkit.func import entrypoint, task
from pregelkit.worker import Worker

ENTRY = "lifecycle_flows:flow"


@dataclass
class Done:
    code: int
    out: str
    err: str


Cli = Callable[..., Done]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "life.sqlite")
    monkeypatch.setenv("LIFECYCLE_DB", path)
    return path


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str], db: str) -> Cli:
    def run(*args: str) -> Done:
        code = main([*args, "--db", db])
        out, err = capfd.readouterr()
        assert "Traceback" not in err, err
        return Done(code, out, err)

    return run


def statuses(cli: Cli) -> dict[str, dict[str, Any]]:
    listed = cli("threads", "--json")
    assert listed.code == 0, listed.err
    return {r["thread_id"]: r for r in json.loads(listed.out)}


def stopped_after_its_last_task(db: str, thread: str) -> None:
    """What Ctrl-C during the last task of `pregelkit run` leaves: every task
    finished and saved, the step's checkpoint not made yet."""
    with SqliteSaver.from_conn_string(db) as saver:
        wf = lifecycle_flows.flow.copy(checkpointer=saver)
        wf = wf.with_config(metadata=recorded(load_target(ENTRY)))
        for _ in wf.stream(1, {"configurable": {"thread_id": thread}}, stream_mode="updates"):
            break
        state = wf.get_state({"configurable": {"thread_id": thread}})
        assert state.next == () and state.tasks and state.tasks[0].result is not None


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "(config)" not in err and "invoke(" not in err, err
    return lines[0]


def test_resume_continues_a_thread_stopped_after_its_last_task(db: str, cli: Cli) -> None:
    stopped_after_its_last_task(db, "S3")
    assert statuses(cli)["S3"]["status"] == "pending"
    resumed = cli("resume", "S3")
    assert resumed.code == 0, resumed.err
    assert "result: 4" in resumed.out
    assert statuses(cli)["S3"]["status"] == "done"


def test_a_replayed_result_is_not_labelled_a_cache_hit(db: str, cli: Cli) -> None:
    stopped_after_its_last_task(db, "S4")
    again = cli("run", ENTRY, "--thread", "S4")  # continue it, without an input
    assert again.code == 0, again.err
    assert "flow: 4 (replayed)" in again.out and "(cached)" not in again.out
    stopped_after_its_last_task(db, "S5")
    as_json = cli("resume", "S5", "--json")
    update = next(e for e in map(json.loads, as_json.out.splitlines()) if e["event"] == "update")
    assert update == {"event": "update", "node": "flow", "value": 4, "cached": False,
                      "replayed": True}  # fmt: skip


def test_cancel_refuses_a_finished_thread(db: str, cli: Cli) -> None:
    from pregelkit.errors import ThreadStateError

    assert cli("run", ENTRY, "1", "--thread", "d").code == 0
    refused = cli("cancel", "d")
    assert refused.code == 2
    assert "cannot cancel thread 'd': it is done" in one_line(refused.err)
    assert statuses(cli)["d"]["status"] == "done"
    assert cli("run", ENTRY, "2", "--thread", "d").code == 0  # not left marked
    with SqliteSaver.from_conn_string(db) as saver:
        wf = lifecycle_flows.flow.copy(checkpointer=saver)
        with pytest.raises(ThreadStateError, match="cannot cancel thread 'd': it is done"):
            wf.cancel({"configurable": {"thread_id": "d"}})
        assert saver.get_thread_control("d") is None


def test_cancelling_a_queued_run_that_never_started(db: str, cli: Cli) -> None:
    assert cli("submit", ENTRY, "--input", "1", "--thread", "r-9").code == 0
    assert statuses(cli)["r-9"]["status"] == "queued"
    cancelled = cli("cancel", "r-9")
    assert cancelled.code == 0, cancelled.err
    assert "before it started" in cancelled.out and "resume" not in cancelled.out
    assert statuses(cli)["r-9"]["status"] == "cancelled"
    resumed = cli("resume", "r-9")
    assert resumed.code == 2
    line = one_line(resumed.err)
    assert "unknown thread" not in line and "cancelled before it ever ran" in line
    assert f"pregelkit --db {db} submit MODULE:flow --input JSON --thread r-9" in line


def test_running_a_cancelled_thread_is_refused_with_commands_that_work(db: str, cli: Cli) -> None:
    stopped_after_its_last_task(db, "c")
    assert cli("cancel", "c").code == 0
    refused = cli("run", ENTRY, "1", "--thread", "c")
    assert refused.code == 2
    line = one_line(refused.err)
    assert "cannot run thread 'c': it is cancelled" in line
    resume = f"pregelkit --db {db} resume c"
    assert resume in line and f"pregelkit --db {db} uncancel c" in line
    resumed = cli(*shlex.split(resume)[1:])  # the advice works
    assert resumed.code == 0, resumed.err
    assert statuses(cli)["c"]["status"] == "done"


def test_resume_never_quietly_clears_a_cancel_mark(db: str, cli: Cli) -> None:
    assert cli("run", ENTRY, "1", "--thread", "m").code == 0
    with SqliteSaver.from_conn_string(db) as saver:
        # a cancel that reached the database as the run ended
        saver.put_thread_control("m", "cancelled")
    refused = cli("resume", "m")
    assert refused.code == 2
    line = one_line(refused.err)
    assert "nothing left to run" in line and f"pregelkit --db {db} uncancel m" in line
    assert statuses(cli)["m"]["status"] == "cancelled"
    cleared = cli("uncancel", "m")
    assert cleared.code == 0 and "is done now" in cleared.out
    assert statuses(cli)["m"]["status"] == "done"


def test_a_run_cancelled_meanwhile_is_not_reported_as_a_crash(cli: Cli) -> None:
    stopped = cli("run", "lifecycle_flows:cancelled_meanwhile", "3", "--thread", "x")
    assert stopped.code == 1
    line = one_line(stopped.err)
    assert line.startswith("pregelkit: cancelled: thread x was cancelled while it ran")
    assert "RunCancelledError" not in line
    resume = line.split("Continue it with: ")[1]
    assert resume.startswith("pregelkit ")
    assert statuses(cli)["x"]["status"] == "cancelled"
    assert cli(*shlex.split(resume)[1:]).code == 0  # the hint works
    assert statuses(cli)["x"]["status"] == "done"


def test_a_queued_thread_records_its_workflow_and_its_resume_is_queued(db: str, cli: Cli) -> None:
    assert cli("submit", ENTRY, "--input", "10", "--thread", "r-1").code == 0
    with SqliteSaver.from_conn_string(db) as saver:
        Worker([lifecycle_flows.flow], saver).run_until_idle()
    row = statuses(cli)["r-1"]
    assert row["status"] == "interrupted" and row["entrypoint"] == ENTRY
    # no --target: the workflow is recorded; the answer goes through the queue
    answered = cli("resume", "r-1", '"yes"')
    assert answered.code == 0, answered.err
    assert "queued: run" in answered.out and "a worker serving 'flow'" in answered.out
    assert statuses(cli)["r-1"]["status"] == "queued"
    with SqliteSaver.from_conn_string(db) as saver:
        Worker([lifecycle_flows.flow], saver).run_until_idle()
        wf = lifecycle_flows.flow.copy(checkpointer=saver)
        assert wf.get_state({"configurable": {"thread_id": "r-1"}}).values == 28
    assert statuses(cli)["r-1"]["status"] == "done"


def test_submit_resume_answers_an_interrupted_thread_through_the_queue(db: str, cli: Cli) -> None:
    assert cli("submit", ENTRY, "--input", "10", "--thread", "r-2").code == 0
    with SqliteSaver.from_conn_string(db) as saver:
        Worker([lifecycle_flows.flow], saver).run_until_idle()
    # what users tried: --input with the answer restarts the workflow
    queued = cli("submit", ENTRY, "--resume", '"no"', "--thread", "r-2", "--json")
    assert queued.code == 0, queued.err
    assert json.loads(queued.out)["status"] == "queued"
    with SqliteSaver.from_conn_string(db) as saver:
        Worker([lifecycle_flows.flow], saver).run_until_idle()
        wf = lifecycle_flows.flow.copy(checkpointer=saver)
        assert wf.get_state({"configurable": {"thread_id": "r-2"}}).values == 26
    refused = cli("submit", ENTRY, "--resume", '"no"', "--thread", "r-2")
    assert refused.code == 2
    assert "it is done; it is not waiting for an answer" in one_line(refused.err)


ONE_TASK = """
import time
from pathlib import Path

from pregelkit.func import entrypoint, task


@task
def slow(n):
    Path("started").write_text("1")
    time.sleep(1.5)
    return n


@entrypoint()
def flow(n):
    return slow(n).result()
"""


def test_ctrl_c_during_the_only_task_then_the_printed_hint_works(tmp_path: Path) -> None:
    (tmp_path / "wf.py").write_text(textwrap.dedent(ONE_TASK))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    exe = [sys.executable, "-m", "pregelkit"]
    run = subprocess.Popen(
        [*exe, "run", "wf.py:flow", "5", "--thread", "S3"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, (out, err)
    hint = err.strip().splitlines()[-1].split("continue with: ")[-1]
    assert hint == "pregelkit resume S3", err

    def pregelkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*exe, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )

    listed = pregelkit("threads", "--json")
    assert json.loads(listed.stdout)[0]["status"] == "pending", listed
    resumed = pregelkit(*shlex.split(hint)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert "result: 5" in resumed.stdout and "(cached)" not in resumed.stdout


def test_pregelkit_worker_records_the_workflow_of_a_run_submitted_from_python(
    tmp_path: Path, db: str, cli: Cli
) -> None:
    with SqliteSaver.from_conn_string(db) as saver:
        # wf.submit from a program: it names no MODULE:NAME
        wf = lifecycle_flows.flow.copy(checkpointer=saver)
        wf.submit(10, {"configurable": {"thread_id": "r-1"}})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "worker", ENTRY, "--db", db],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while statuses(cli).get("r-1", {}).get("status") != "interrupted":
            assert time.monotonic() < deadline and worker.poll() is None, worker.stderr
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    assert statuses(cli)["r-1"]["entrypoint"] == ENTRY
    answered = cli("resume", "r-1", '"yes"')  # no --target
    assert answered.code == 0, answered.err
    assert statuses(cli)["r-1"]["status"] == "queued"


def test_ctrl_c_in_invoke_leaves_the_thread_pending_and_invoke_none_continues(
    db: str, cli: Cli
) -> None:
    """The table's Ctrl-C cell through the API: a KeyboardInterrupt (SIGINT)
    while a task runs stops the run; what finished is saved."""
    ran: list[int] = []

    @task
    def part(i: int) -> int:
        ran.append(i)
        if i == 1 and len(ran) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, while this task runs
            time.sleep(0.3)
        return i

    @entrypoint()
    def three(n: int) -> int:
        return sum(part(i).result() for i in range(n))

    with SqliteSaver.from_conn_string(db) as saver:
        wf = three.copy(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "k"}}
        with pytest.raises(KeyboardInterrupt):
            wf.invoke(3, cfg)
        assert statuses(cli)["k"]["status"] == "pending"
        assert wf.invoke(None, cfg) == 3
    assert ran[:2] == [0, 1] and 2 in ran and ran.count(0) == 1, ran
    assert statuses(cli)["k"]["status"] == "done"


def test_a_run_queued_while_the_command_looked_is_refused_with_commands(
    db: str, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine refuses a run of a thread whose run is queued; when that
    run was queued after `pregelkit run` looked, the refusal still names
    commands, not Python calls."""
    import pregelkit.cli._resume as resume

    assert cli("submit", ENTRY, "--input", "1", "--thread", "q").code == 0
    monkeypatch.setattr(resume, "_state", lambda db, thread_id: None)  # it looked before
    refused = cli("run", ENTRY, "1", "--thread", "q")
    assert refused.code == 2
    line = one_line(refused.err)
    assert "cannot run thread 'q': it is queued" in line
    assert f"pregelkit --db {db} cancel q" in line
