"""The ``pregelkit`` command line, run as users run it: ``python -m pregelkit``
in a subprocess, against a SQLite file in a temporary directory (and once
against the test PostgreSQL server).

The workflows live in ``flows.py``, written into the directory each test
runs in. Their tasks print ``ran <name>`` so a test can count real runs.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

FLOWS = """
import time
from pathlib import Path

from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy, interrupt


class Point:
    def __init__(self, x):
        self.x = x

    def __repr__(self):
        return f"Point({self.x})"


@task
def fetch(n):
    print(f"ran fetch({n})", flush=True)
    return n * n


@task(cache_policy=CachePolicy())
def cached_square(n):
    print(f"ran cached_square({n})", flush=True)
    return n * n


@task
def ask(question):
    return interrupt(question)


@task
def fragile(n):
    print(f"ran fragile({n})", flush=True)
    if Path("broken").exists():
        raise KeyError(f"missing key {n}")
    return n + 1


@entrypoint()
def report(items):
    total = sum(fetch(i).result() for i in items)
    answer = interrupt(f"total {total}: publish?")
    return {"total": total, "published": answer == "yes"}


@entrypoint()
def survey(questions):
    futures = [ask(q) for q in questions]
    return [f.result() for f in futures]


@entrypoint()
def cleanup(_):
    staging = interrupt("delete the staging data?")
    production = interrupt("delete the PRODUCTION data?")
    return [staging, production]


@entrypoint()
def chain(items):
    return [fragile(i).result() for i in items]


@entrypoint()
def cached(n):
    return cached_square(n).result()


@entrypoint()
def points(n):
    return Point(fetch(n).result())


@entrypoint()
async def async_double(n):
    return 2 * await fetch(n)


@entrypoint()
def slow(seconds):
    time.sleep(seconds)
    return seconds


not_a_workflow = 42
"""


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def events(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.lines if line.startswith("{")]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    return tmp_path


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "pregelkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert "Traceback" not in proc.stderr or "--traceback" in args, proc.stderr
    return Result(proc.returncode, proc.stdout, proc.stderr)


def resume_args(line: str) -> list[str]:
    """The arguments of a printed ``pregelkit ...`` command."""
    words = shlex.split(line.strip())
    assert words[0] == "pregelkit"
    return words[1:]


# run and resume


def test_run_stops_at_interrupt_and_resume_finishes_without_rerunning(workdir: Path) -> None:
    first = cli(workdir, "run", "flows:report", "[1, 2, 3]", "--thread", "r1")
    assert first.code == 0, first.err
    assert first.lines[0] == "thread: r1"
    assert sorted(line for line in first.lines if line.startswith("ran ")) == [
        "ran fetch(1)",
        "ran fetch(2)",
        "ran fetch(3)",
    ]
    assert [line for line in first.lines if line.startswith("fetch: ")] == [
        "fetch: 1",
        "fetch: 4",
        "fetch: 9",
    ]
    assert "interrupted: thread r1 is waiting for an answer" in first.lines
    assert any(line.endswith("] total 14: publish?") for line in first.lines)
    hint = first.lines[-1]
    assert resume_args(hint) == ["resume", "r1", '"yes"']
    assert (workdir / "pregelkit.sqlite").exists()

    second = cli(workdir, *resume_args(hint))
    assert second.code == 0, second.err
    assert not any(line.startswith("ran ") for line in second.lines)
    # the entrypoint's own update is its result: printed once, as `result:`
    assert not any(line.startswith("report: ") for line in second.lines)
    assert second.lines[-2:] == ["done: thread r1", "result: {'total': 14, 'published': True}"]


def test_run_makes_up_a_thread_id_and_records_the_entrypoint(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:report", "[2]")
    assert res.code == 0, res.err
    thread = res.lines[0].removeprefix("thread: ")
    assert len(thread) == 12
    conn = sqlite3.connect(workdir / "pregelkit.sqlite")
    try:
        (meta,) = conn.execute(
            "SELECT metadata_json FROM pregelkit_checkpoints WHERE thread_id = ?", (thread,)
        ).fetchone()
    finally:
        conn.close()
    assert json.loads(meta)["pregelkit_entrypoint"] == "flows:report"


def test_file_entrypoint_resumes_from_another_directory(workdir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = str(workdir / "state.sqlite")
    res = cli(elsewhere, "run", "../flows.py:report", "[3]", "--thread", "f1", "--db", db)
    assert res.code == 0, res.err
    assert "ran fetch(3)" in res.lines
    # from the flows' own directory, with the database given by environment
    done = cli(workdir, "resume", "f1", '"no"', env={"PREGELKIT_DB": db})
    assert done.code == 0, done.err
    assert done.lines[-1] == "result: {'total': 9, 'published': False}"


def test_json_output_of_run_and_resume(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:report", "[1]", "--thread", "j1", "--json")
    assert res.code == 0, res.err
    events = res.events()
    assert events[0] == {"event": "start", "thread_id": "j1", "db": "pregelkit.sqlite"}
    assert {"event": "update", "node": "fetch", "value": 1, "cached": False} in events
    last = events[-1]
    assert last["event"] == "interrupt"
    interrupts = last["interrupts"]
    assert isinstance(interrupts, list) and len(interrupts) == 1
    assert interrupts[0]["value"] == "total 1: publish?"
    assert len(interrupts[0]["id"]) == 32
    assert resume_args(str(last["resume"])) == ["resume", "j1", '"yes"']

    done = cli(workdir, "--json", "resume", "j1", '"yes"')
    assert done.events()[-1] == {
        "event": "done",
        "thread_id": "j1",
        "output": {"total": 1, "published": True},
    }


def test_null_is_an_answer(workdir: Path) -> None:
    """VALUE_JSON null answers (the interrupt returns None), as a queued
    ``submit --resume null`` does; it was read as no answer and refused."""
    res = cli(workdir, "run", "flows:survey", '["name?", "age?"]', "--thread", "n1")
    ids = pending_ids(res)
    first = cli(workdir, "resume", "n1", "null", "--to", ids["name?"])
    assert first.code == 0, first.err
    last = cli(workdir, "resume", "n1", "null")
    assert last.code == 0, last.err
    assert last.lines[-1] == "result: [None, None]"


def test_a_thread_id_starting_with_a_dash_gets_a_hint_that_works(workdir: Path) -> None:
    """The printed resume command puts such an id after "--": argparse read
    ``pregelkit resume -t1 ...`` as an unknown option."""
    res = cli(workdir, "run", "flows:survey", '["name?", "age?"]', "--thread=-t1")
    hints = [resume_args(line) for line in res.lines if line.startswith("  pregelkit ")]
    assert len(hints) == 2, res.out
    first = cli(workdir, *[w if w != '"..."' else '"Ada"' for w in hints[0]])
    assert first.code == 0, first.err
    (hint,) = [resume_args(line) for line in first.lines if line.startswith("  pregelkit ")]
    last = cli(workdir, *hint)
    assert last.code == 0, last.err
    assert last.lines[-1].startswith("result: ["), last.out


def pending_ids(res: Result) -> dict[str, str]:
    """Question to interrupt id, as ``run``/``resume`` list the pending interrupts."""
    ids = {}
    for line in res.lines:
        if line.startswith("  [") and "] " in line:
            interrupt_id, question = line.strip()[1:].split("] ")
            ids[question] = interrupt_id
    return ids


def test_several_interrupts_are_answered_one_at_a_time_with_to(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:survey", '["name?", "age?"]', "--thread", "s1")
    assert res.code == 0, res.err
    ids = pending_ids(res)
    assert set(ids) == {"name?", "age?"}
    # one command per interrupt, each naming it with --to
    hints = [resume_args(line) for line in res.lines if line.startswith("  pregelkit ")]
    assert sorted(h[-1] for h in hints) == sorted(ids.values())
    assert all(h[:4] == ["resume", "s1", '"..."', "--to"] for h in hints)

    plain = cli(workdir, "resume", "s1", '"Ada"')
    assert plain.code == 2 and len(plain.err.strip().splitlines()) == 1
    assert "waits at 2 interrupts" in plain.err and "--to ID" in plain.err
    for question, interrupt_id in ids.items():
        assert f"{interrupt_id}: {question}" in plain.err

    unknown = cli(workdir, "resume", "s1", '"x"', "--to", "0" * 32)
    assert unknown.code == 2
    assert f"has no pending interrupt '{'0' * 32}'" in unknown.err
    assert ids["name?"] in unknown.err and ids["age?"] in unknown.err

    no_value = cli(workdir, "resume", "s1", "--to", ids["age?"])
    assert no_value.code == 2 and "give the answer as VALUE_JSON" in no_value.err

    partial = cli(workdir, "resume", "s1", '"Ada"', "--to", ids["name?"])
    assert partial.code == 0, partial.err
    assert pending_ids(partial) == {"age?": ids["age?"]}
    rest = cli(workdir, "resume", "s1", "36")  # the one left: no --to needed
    assert rest.code == 0, rest.err
    assert rest.lines[-1] == "result: ['Ada', 36]"


def test_a_re_sent_answer_does_not_answer_the_next_question(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:cleanup", "1", "--thread", "d1")
    (staging,) = pending_ids(res).values()
    first = cli(workdir, "resume", "d1", '"yes"', "--to", staging)
    assert first.code == 0, first.err
    (production,) = pending_ids(first).values()
    assert production != staging

    again = cli(workdir, "resume", "d1", '"yes"', "--to", staging)  # a double click
    assert again.code == 2
    assert "answered already" in again.err
    assert f"{production}: delete the PRODUCTION data?" in again.err
    # the old form, an id map, is not taken for the answer either
    old_form = cli(workdir, "resume", "d1", json.dumps({staging: "yes"}))
    assert old_form.code == 2 and "looks like a map of interrupt ids" in old_form.err
    shown = cli(workdir, "show", "d1")
    assert f"[{production}] delete the PRODUCTION data?" in shown.out

    done = cli(workdir, "resume", "d1", '"no"')
    assert done.code == 0, done.err
    assert done.lines[-1] == "result: ['yes', 'no']"


def test_an_answer_shaped_like_an_id_map_is_sent_as_given_with_to(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:report", "[1]", "--thread", "m1")
    (only,) = pending_ids(res).values()
    answer = {"f" * 32: "yes"}
    refused = cli(workdir, "--json", "resume", "m1", json.dumps(answer))
    assert refused.code == 2
    assert refused.events()[-1]["error"]["type"] == "usage"
    sent = cli(workdir, "resume", "m1", json.dumps(answer), "--to", only)
    assert sent.code == 0, sent.err
    assert sent.lines[-1] == "result: {'total': 1, 'published': False}"


def test_failure_exits_1_and_resume_retries_only_what_failed(workdir: Path) -> None:
    (workdir / "broken").touch()
    res = cli(workdir, "run", "flows:chain", "[1, 2]", "--thread", "c1", "--durability", "sync")
    assert res.code == 1
    assert "ran fragile(1)" in res.lines
    assert "the workflow failed: KeyError: 'missing key 1'" in res.err
    assert "continue with: pregelkit resume c1" in res.err
    assert "Traceback" not in res.err

    shown = cli(workdir, "run", "flows:chain", "[1]", "--thread", "c2", "--traceback")
    assert shown.code == 1
    assert "Traceback (most recent call last)" in shown.err

    statuses = _statuses(workdir)
    assert statuses["c1"] == "failed"

    (workdir / "broken").unlink()
    again = cli(workdir, "resume", "c1")
    assert again.code == 0, again.err
    assert again.lines[-1] == "result: [2, 3]"


def test_resume_refuses_what_it_cannot_do(workdir: Path) -> None:
    cli(workdir, "run", "flows:report", "[1]", "--thread", "r")
    no_answer = cli(workdir, "resume", "r")
    assert no_answer.code == 2
    assert "it is interrupted (waiting for an answer); give the answer as VALUE_JSON" in (
        no_answer.err
    )
    cli(workdir, "resume", "r", '"yes"')
    finished = cli(workdir, "resume", "r")
    assert finished.code == 2
    assert "cannot resume thread 'r': it is done; there is nothing to resume" in finished.err
    not_waiting = cli(workdir, "resume", "r", '"yes"')
    assert not_waiting.code == 2
    assert "is not waiting for an answer" in not_waiting.err


def test_async_entrypoint(workdir: Path) -> None:
    res = cli(workdir, "run", "flows:async_double", "21", "--thread", "a1")
    assert res.code == 0, res.err
    assert "fetch: 441" in res.lines
    assert res.lines[-1] == "result: 882"


def test_cache_option_skips_a_cached_task(workdir: Path) -> None:
    first = cli(workdir, "run", "flows:cached", "7", "--cache", "cache.sqlite")
    assert "ran cached_square(7)" in first.lines
    second = cli(workdir, "run", "flows:cached", "7", "--cache", "cache.sqlite")
    assert second.code == 0, second.err
    assert "ran cached_square(7)" not in second.lines
    assert "cached_square: 49 (cached)" in second.lines


def test_console_script_is_installed(workdir: Path) -> None:
    script = Path(sys.executable).parent / "pregelkit"
    assert script.exists()
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("pregelkit ")


# inspecting


def _statuses(cwd: Path) -> dict[str, str]:
    res = cli(cwd, "threads", "--json")
    assert res.code == 0, res.err
    return {row["thread_id"]: row["status"] for row in json.loads(res.out)}


def test_threads_table_and_json(workdir: Path) -> None:
    cli(workdir, "run", "flows:report", "[1]", "--thread", "waiting")
    cli(workdir, "run", "flows:points", "2", "--thread", "finished")
    table = cli(workdir, "threads")
    assert table.code == 0, table.err
    header = table.lines[0].split()
    assert header == ["THREAD", "STATUS", "STEP", "CHECKPOINTS", "UPDATED", "ENTRYPOINT"]
    assert set(table.lines[1]) == {"-", " "}
    rows = {line.split()[0]: line.split() for line in table.lines[2:]}
    assert rows["waiting"][1:4] == ["interrupted", "-1", "1"]
    assert rows["finished"][1:4] == ["done", "0", "2"]
    assert rows["finished"][-1] == "flows:points"
    assert _statuses(workdir) == {"waiting": "interrupted", "finished": "done"}


def test_history_table_and_json(workdir: Path) -> None:
    cli(workdir, "run", "flows:report", "[1, 2]", "--thread", "h")
    cli(workdir, "resume", "h", '"yes"')
    table = cli(workdir, "history", "h")
    assert table.code == 0, table.err
    assert table.lines[0].split() == [
        "CHECKPOINT",
        "STEP",
        "SOURCE",
        "TASKS",
        "WRITES",
        "INTERRUPTS",
        "TIME",
    ]
    first, second = (line.split() for line in table.lines[2:])
    assert first[1:7] == ["-1", "input", "3:", "fetch,", "fetch,", "report"]
    assert second[1:4] == ["0", "loop", "-"]

    rows = json.loads(cli(workdir, "history", "h", "--json").out)
    assert [r["step"] for r in rows] == [-1, 0]
    # the entrypoint and its two task calls, named by the function each called
    assert sorted(rows[0]["tasks"]) == ["fetch", "fetch", "report"]
    assert rows[1]["writes"] == 0
    assert rows[0]["checkpoint_id"] < rows[1]["checkpoint_id"]


def test_show_latest_by_prefix_and_json(workdir: Path) -> None:
    cli(workdir, "run", "flows:report", "[3]", "--thread", "s")
    res = cli(workdir, "show", "s")
    assert res.code == 0, res.err
    assert res.lines[0] == "thread:      s"
    assert "channel values:" in res.lines
    assert any(line.split()[:2] == ["__start__", "[3]"] for line in res.lines)
    writes = [line.split() for line in res.lines if "__return__" in line]
    assert writes and writes[0][0] == "fetch" and writes[0][-1] == "9"
    assert res.lines[-1].endswith("] total 9: publish? (task report)")

    data = json.loads(cli(workdir, "show", "s", "--json").out)
    assert data["channel_values"] == {"__start__": [3]}
    assert {"task": "fetch", "channel": "__return__", "value": 9} in [
        {k: w[k] for k in ("task", "channel", "value")} for w in data["pending_writes"]
    ]
    (waiting,) = data["interrupts"]
    assert waiting["task"] == "report" and waiting["value"] == "total 9: publish?"
    checkpoint_id = data["checkpoint_id"]
    by_prefix = cli(workdir, "show", "s", checkpoint_id[:13], "--json")
    assert json.loads(by_prefix.out)["checkpoint_id"] == checkpoint_id

    missing = cli(workdir, "show", "s", "ffffffff")
    assert missing.code == 2
    assert "has no checkpoint 'ffffffff'" in missing.err


def test_show_names_values_of_the_workflows_own_classes_without_importing(
    workdir: Path,
) -> None:
    cli(workdir, "run", "flows:points", "4", "--thread", "p")
    res = cli(workdir, "show", "p")
    assert res.code == 0, res.err
    assert any(line.split()[:3] == ["__end__", "<flows.Point", "x=16>"] for line in res.lines)
    data = json.loads(cli(workdir, "show", "p", "--json").out)
    assert data["channel_values"]["__end__"] == {"type": "flows.Point", "state": {"x": 16}}


def test_delete(workdir: Path) -> None:
    cli(workdir, "run", "flows:points", "1", "--thread", "gone")
    cli(workdir, "run", "flows:points", "1", "--thread", "kept")
    res = cli(workdir, "delete", "gone")
    assert res.code == 0, res.err
    assert res.lines == ["deleted thread gone"]
    assert set(_statuses(workdir)) == {"kept"}
    again = cli(workdir, "delete", "gone")
    assert again.code == 2
    assert "unknown thread 'gone'" in again.err


def test_a_thread_that_is_running_is_not_deleted_or_run_again(workdir: Path) -> None:
    from pregelkit.checkpoint.sqlite import SqliteSaver

    cli(workdir, "run", "flows:points", "1", "--thread", "busy")
    with (
        SqliteSaver.from_conn_string(str(workdir / "pregelkit.sqlite")) as saver,
        saver.lock_thread("busy"),
    ):
        res = cli(workdir, "delete", "busy")
        run = cli(workdir, "run", "flows:points", "2", "--thread", "busy")
    assert res.code == 2
    assert "not deleted: thread 'busy' is being run right now" in res.err
    assert run.code == 2
    assert "cannot run thread 'busy': it is running right now" in run.err
    assert "pregelkit cancel busy" in run.err
    assert "busy" in _statuses(workdir)


# mistakes: exit status 2, a message, no traceback


@pytest.fixture(scope="module")
def one_thread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose database holds one finished thread, ``t``."""
    path = tmp_path_factory.mktemp("mistakes")
    (path / "flows.py").write_text(textwrap.dedent(FLOWS))
    (path / "sub").mkdir()
    (path / "sub" / "json.py").write_text("x = 1\n")
    assert cli(path, "run", "flows:points", "1", "--thread", "t").code == 0
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "flows:nope", "1"], "flows has no attribute 'nope'; workflows defined there:"),
        (["run", "flows:not_a_workflow", "1"], "is of type int, not a workflow"),
        (["run", "no_such_module:x", "1"], "no module named 'no_such_module'"),
        (["run", "missing.py:x", "1"], "no such file: 'missing.py'"),
        (["run", "flows", "1"], "does not name an entrypoint: write MODULE:NAME"),
        (["run", "sub/json.py:x", "1"], "a module of that name is already loaded; rename"),
        (["run", "flows:report", "hello"], "INPUT_JSON is not valid JSON"),
        (["run", "flows:report"], "give the workflow an input (INPUT_JSON)"),
        (["history", "nope"], "unknown thread 'nope'"),
        (["show", "nope"], "unknown thread 'nope'"),
        (["resume", "nope", "1"], "unknown thread 'nope'"),
        (["resume", "t", "not json"], "VALUE_JSON is not valid JSON"),
    ],
)
def test_mistakes_exit_2_with_a_message(one_thread: Path, args: list[str], message: str) -> None:
    res = cli(one_thread, *args)
    assert res.code == 2, res.out
    assert res.err.startswith("pregelkit: error: ")
    assert message in res.err
    assert "Traceback" not in res.err


def test_unreadable_databases(workdir: Path) -> None:
    missing = cli(workdir, "threads", "--db", "nothing.sqlite")
    assert missing.code == 2
    assert "no database at 'nothing.sqlite'" in missing.err
    assert not (workdir / "nothing.sqlite").exists()  # a typo creates no file

    (workdir / "notes.txt").write_text("not a database, just text\n" * 100)
    garbage = cli(workdir, "--db", "notes.txt", "threads")
    assert garbage.code == 2
    assert "cannot read the database 'notes.txt'" in garbage.err

    other = workdir / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    foreign = cli(workdir, "threads", "--db", str(other))
    assert foreign.code == 2
    assert "holds no pregelkit checkpoints" in foreign.err

    empty = cli(workdir, "threads", "--db", str(workdir / "new.sqlite"))
    assert empty.code == 2


def test_resume_needs_the_entrypoint_when_none_was_recorded(workdir: Path) -> None:
    from pregelkit.checkpoint.sqlite import SqliteSaver

    sys.path.insert(0, str(workdir))
    try:
        import flows  # type: ignore[import-not-found]

        with SqliteSaver.from_conn_string(str(workdir / "pregelkit.sqlite")) as saver:
            flows.report.copy(checkpointer=saver).invoke([5], {"configurable": {"thread_id": "x"}})
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop("flows", None)
    res = cli(workdir, "resume", "x", '"yes"')
    assert res.code == 2
    assert "pass --target MODULE:NAME" in res.err
    ok = cli(workdir, "resume", "x", '"yes"', "--target", "flows:report")
    assert ok.code == 0, ok.err
    assert ok.lines[-1] == "result: {'total': 25, 'published': True}"


def test_help_and_version(workdir: Path) -> None:
    res = cli(workdir, "--help")
    assert res.code == 0
    for command in ("run", "resume", "threads", "history", "show", "delete"):
        assert command in res.out
    version = cli(workdir, "--version")
    assert version.code == 0 and version.out.startswith("pregelkit ")
    assert cli(workdir).code == 2  # no command


# PostgreSQL


def test_run_resume_and_inspect_on_postgres(workdir: Path, postgres_database: object) -> None:
    assert callable(postgres_database)
    dsn = str(postgres_database("pregelkit_cli"))
    res = cli(workdir, "run", "flows:report", "[1, 2]", "--thread", "pg", "--db", dsn)
    assert res.code == 0, res.err
    hint = resume_args(res.lines[-1])
    assert hint == ["--db", dsn, "resume", "pg", '"yes"']
    done = cli(workdir, *hint)
    assert done.code == 0, done.err
    assert done.lines[-1] == "result: {'total': 5, 'published': True}"
    threads = json.loads(cli(workdir, "threads", "--json", "--db", dsn).out)
    assert [(t["thread_id"], t["status"]) for t in threads] == [("pg", "done")]
    history = json.loads(cli(workdir, "history", "pg", "--json", "--db", dsn).out)
    assert [h["source"] for h in history] == ["input", "loop"]
    shown = json.loads(cli(workdir, "show", "pg", "--json", "--db", dsn).out)
    assert shown["channel_values"]["__end__"] == {"total": 5, "published": True}
    assert cli(workdir, "delete", "pg", "--db", dsn).code == 0
    assert json.loads(cli(workdir, "threads", "--json", "--db", dsn).out) == []
    refused = cli(workdir, "threads", "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert refused.code == 2
    assert "cannot connect to the database" in refused.err
