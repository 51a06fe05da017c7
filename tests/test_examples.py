"""Every script in examples/ runs as it is and prints what it promises.

Each runs in a fresh interpreter with an empty working directory (the
scripts that keep SQLite files keep them there or in a temporary directory).
Tasks running in parallel may print in any order, so those lines are
compared as sets.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(name: str, *args: str, cwd: Path, expect: int = 0) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == expect, (
        f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


def test_every_example_is_tested() -> None:
    tested = {
        "quickstart.py",
        "human_in_the_loop.py",
        "cached_steps.py",
        "retries.py",
        "fan_out.py",
        "crash_resume.py",
        "streaming.py",
        "low_level_pregel.py",
        "async_workflow.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_quickstart_stops_then_a_second_process_resumes(tmp_path: Path) -> None:
    first = run("quickstart.py", cwd=tmp_path)
    assert first[0] == "starting thread 'quickstart'"
    assert first[1:4] == ["running fetch(1)", "running fetch(2)", "running fetch(3)"]
    assert first[4] == "paused: publish a report with total 14? (yes/no)"
    assert first[5].startswith("resume with: python ") and first[5].endswith(" --answer yes")
    assert (tmp_path / "quickstart.sqlite").exists()

    # asked again without an answer, it says it is waiting and runs nothing
    waiting = run("quickstart.py", cwd=tmp_path)
    assert waiting[0].startswith("thread 'quickstart' is waiting for an answer: publish")
    assert not any(line.startswith("running") for line in waiting)

    second = run("quickstart.py", "--answer", "yes", cwd=tmp_path)
    assert second == [
        "resuming thread 'quickstart' with answer 'yes'",
        "running publish(14)",
        "done: {'report': {'total': 14}, 'published': True, "
        "'message': 'published a report with total 14'}",
        "fetch did not run again: its results were read from quickstart.sqlite",
    ]

    # nothing to answer any more
    done = run("quickstart.py", "--answer", "yes", cwd=tmp_path, expect=1)
    assert done == ["thread 'quickstart' is not waiting for an answer; run without --answer"]

    # a new run of the thread: fetch comes from the SQLite cache
    third = run("quickstart.py", cwd=tmp_path)
    assert not any(line.startswith("running fetch") for line in third)
    assert third[1:4] == [
        "fetch -> 1 (from the cache, not run)",
        "fetch -> 4 (from the cache, not run)",
        "fetch -> 9 (from the cache, not run)",
    ]
    rejected = run("quickstart.py", "--answer", "no", cwd=tmp_path)
    assert rejected[-2:] == [
        "done: {'report': {'total': 14}, 'published': False}",
        "fetch did not run again: its results were read from quickstart.sqlite",
    ]


def test_quickstart_thread_and_db_options(tmp_path: Path) -> None:
    out = run("quickstart.py", "--thread", "t2", "--db", "other.sqlite", cwd=tmp_path)
    assert out[0] == "starting thread 't2'"
    assert (tmp_path / "other.sqlite").exists()
    assert (tmp_path / "other-cache.sqlite").exists()


def test_human_in_the_loop(tmp_path: Path) -> None:
    out = run("human_in_the_loop.py", cwd=tmp_path)
    run1 = out.index("run 1: draft and ask for three reviews")
    run2 = out.index("run 2: answer two of them, by interrupt id")
    run3 = out.index("run 3: answer the last review (one pending, so no id needed)")
    run4 = out.index("run 4: sign off")
    assert set(out[run1 + 1 : run1 + 4]) == {
        "drafting 'pregel'",
        "drafting 'supersteps'",
        "drafting 'checkpoints'",
    }
    waiting = [line for line in out[run1:run2] if line.startswith("  waiting:")]
    assert len(waiting) == 3
    assert "3 questions pending" in out
    # after two answers, one review is still pending
    assert [line for line in out[run2:run3] if "waiting" in line] == [
        "  waiting: {'section': 'All about checkpoints.', 'question': 'approve, or give an edit'}"
    ]
    assert "'question': 'publish?'" in " ".join(out[run3:run4])
    assert out[run4 + 1 : run4 + 4] == [
        "All about pregel.",
        "Supersteps run in parallel, then apply writes.",
        "All about checkpoints.",
    ]
    assert out[-2:] == ["published: True", "pending after the last answer: 0"]
    # drafts were written once, never again on the three resumes
    assert sum(line.startswith("drafting") for line in out) == 3


def test_cached_steps_across_processes(tmp_path: Path) -> None:
    out = run("cached_steps.py", cwd=tmp_path)
    p1 = out.index("process 1: empty cache")
    p2 = out.index("process 2: same texts in capitals, new process")
    p3 = out.index("process 3: after embed.clear_cache()")
    assert out[p1 + 1 : p2] == [
        "  computing embed('Hello world')",
        "  computing embed('Pregel in Python')",
        "  result: {'Hello world': [5.0, 5.0], 'Pregel in Python': [6.0, 2.0, 6.0]}",
    ]
    # the second process computes nothing: the key function ignores case
    assert out[p2 + 1 : p3] == ["  result: {'HELLO WORLD': [5.0, 5.0]}"]
    assert out[p3 + 1 :] == [
        "  cleared embed's cache",
        "  computing embed('Hello world')",
        "  result: {'Hello world': [5.0, 5.0]}",
    ]


def test_retries_back_off_and_skip_bugs(tmp_path: Path) -> None:
    out = run("retries.py", cwd=tmp_path)
    times = [
        int(m.group(1))
        for line in out
        if (m := re.fullmatch(r"call_service attempt \d at \+(\d+) ms", line))
    ]
    assert len(times) == 3
    assert times[1] - times[0] >= 45  # initial_interval 0.05 s
    assert times[2] - times[1] >= 95  # then twice that
    assert "result: response to 'ping'" in out
    assert "call_service ran 3 times" in out
    assert out[-3:] == [
        "parse attempt 1",
        "parse failed without retrying: invalid literal for int() with base 10: 'not a number'",
        "parse ran 1 time",
    ]


def test_fan_out_runs_in_parallel(tmp_path: Path) -> None:
    out = run("fan_out.py", cwd=tmp_path)
    assert out == [
        "best word: superstep (score 139)",
        "8 tasks of 0.2 s ran in parallel: True",
        "total length via Send and Topic: 49",
        "8 sends ran in parallel: True",
    ]


def test_crash_resume_does_not_rerun_finished_tasks(tmp_path: Path) -> None:
    out = run("crash_resume.py", cwd=tmp_path)
    killed = out.index("child killed by SIGKILL (exit status -9)")
    assert out[1:killed] == [f"  child: running step {i}" for i in range(4)]
    after = out[killed + 1 :]
    assert after == [
        "this process: resuming the same thread",
        "running step 3",
        "running step 4",
        "result: [0, 10, 20, 30, 40]",
    ]


def test_streaming(tmp_path: Path) -> None:
    out = run("streaming.py", cwd=tmp_path)
    translation = "DURABLE WORKFLOWS FROM PLAIN FUNCTIONS"
    final = f"{{'pipeline': {{'words': 5, 'translation': '{translation}'}}}}"
    assert out[:4] == [
        'stream_mode="updates":',
        "  {'tokenize': ['durable', 'workflows', 'from', 'plain', 'functions']}",
        f"  {{'translate': '{translation}'}}",
        f"  {final}",
    ]
    custom = out.index('stream_mode="custom":')
    both = out.index('stream_mode=["updates", "custom"]:')
    assert out[custom + 1] == "  starting"
    assert out[custom + 2] == "  {'progress': '1/5', 'partial': 'DURABLE'}"
    assert out[both - 1] == f"  {{'progress': '5/5', 'partial': '{translation}'}}"
    mixed = out[both + 1 :]
    assert mixed[0] == "  custom: starting"
    assert mixed[1].startswith("  updates: {'tokenize'")
    assert sum(line.startswith("  custom: {'progress'") for line in mixed) == 5
    assert mixed[-1] == f"  updates: {final}"


def test_low_level_pregel(tmp_path: Path) -> None:
    out = run("low_level_pregel.py", cwd=tmp_path)
    assert out[:4] == [
        "part 1: the seed example",
        "{'b': 'foofoo', 'c': 'foofoofoofoo'}",
        "  superstep update: {'node1': {'b': 'foofoo'}}",
        "  superstep update: {'node2': {'c': 'foofoofoofoo'}}",
    ]
    assert "graph TD" in out
    assert "    n_count --> ch_total" in out
    assert "final state: {'n': 5, 'total': 14, 'message': 'total so far: 14'}" in out
    history = out[out.index("checkpoints, oldest first:") + 1 :]
    assert history[0] == "  step -1 (input): next ('count',)"
    assert history[-1] == "  step  4 (loop): next ()"


def test_async_workflow(tmp_path: Path) -> None:
    out = run("async_workflow.py", cwd=tmp_path)
    assert out == [
        "paused: 5 downloads, 125 bytes: store them? (yes/no)",
        "downloads run: 5, concurrently: True",
        "result: stored=True, 5 files",
        "downloads run in total: 5 (none again on resume)",
    ]
