"""The ``pregelkit`` command as a tool scripts can rely on, driven as a
subprocess like ``test_cli``: JSON-only stdout, errors as JSON, passwords
never printed, quiet under ``| head``, resuming exactly the recorded
workflow, inspecting without importing anything, lock files that do not
pile up, and a thread's status while it runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pregelkit.checkpoint.sqlite._filelock import RANGE_LOCKS, RANGES_FILE
from test_cli import FLOWS, Result, cli, resume_args

EXTRA = """

@entrypoint()
def fanout(n):
    return sum(f.result() for f in [quiet(i) for i in range(n)])


@task
def quiet(i):
    return i


@entrypoint()
def until(path):
    # runs until path exists (a minute at most): as long as a test needs it running
    import os
    import time

    for _ in range(6000):
        if os.path.exists(path):
            return path
        time.sleep(0.01)
    raise TimeoutError(path)


@entrypoint()
def big(n):
    return list(range(n))


@entrypoint()
def chatty(n):
    import os
    import subprocess

    print("partial line from the entrypoint", end="")
    os.write(1, b"raw bytes on fd 1\\n")
    subprocess.run(["echo", "a child process"], check=True)
    return fetch(n).result()
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS) + textwrap.dedent(EXTRA))
    return tmp_path


def all_json(res: Result) -> list[dict[str, object]]:
    """Every stdout line, parsed: fails on any line that is not JSON."""
    return [json.loads(line) for line in res.lines]


# --json: stdout holds JSON alone


def test_json_stdout_holds_only_json_while_the_workflow_prints(workdir: Path) -> None:
    (workdir / "loud.py").write_text(
        "print('loud module imported')\nfrom flows import chatty  # noqa\n"
    )
    res = cli(workdir, "run", "loud:chatty", "3", "--thread", "j", "--json")
    assert res.code == 0, res.err
    events = all_json(res)
    assert [e.get("event") for e in events] == ["start", "update", "update", "done"]
    assert events[-1] == {"event": "done", "thread_id": "j", "output": 9}
    for printed in (
        "loud module imported",
        "partial line from the entrypoint",
        "raw bytes on fd 1",
        "a child process",
        "ran fetch(3)",
    ):
        assert printed in res.err
        assert printed not in res.out
    for command in (["threads"], ["history", "j"], ["show", "j"]):
        assert all_json(cli(workdir, *command, "--json"))


def test_errors_under_json_are_json_with_a_stable_shape(workdir: Path) -> None:
    assert cli(workdir, "run", "flows:report", "[1]", "--thread", "t").code == 0
    cases = [
        (["history", "nope"], 2, "unknown_thread", "nope"),
        (["resume", "t"], 2, "not_resumable", "t"),
        (["resume", "t", "not json"], 2, "usage", None),
        (["run", "flows:nope", "1"], 2, "target", None),
        (["threads", "--bogus"], 2, "usage", None),
        (["threads", "--db", "missing.sqlite"], 2, "database", None),
        (["threads", "--db", "mysql://u@h/db"], 2, "database", None),
    ]
    for args, code, kind, thread_id in cases:
        res = cli(workdir, *args, "--json")
        assert res.code == code, (args, res.out, res.err)
        (line,) = all_json(res)
        error = line["error"]
        assert isinstance(error, dict) and error["type"] == kind, (args, line)
        assert isinstance(error["message"], str) and error["message"]
        assert error.get("thread_id") == thread_id, (args, line)
        assert res.err.startswith("pregelkit: error: ")

    (workdir / "broken").touch()
    failed = cli(workdir, "run", "flows:chain", "[1]", "--thread", "c", "--json")
    assert failed.code == 1
    *events, last = all_json(failed)
    assert events[0]["event"] == "start"
    error = last["error"]
    assert isinstance(error, dict)
    assert error["type"] == "workflow" and error["exception"] == "KeyError"
    assert error["thread_id"] == "c"
    assert error["message"] == "KeyError: 'missing key 1'"
    assert resume_args(str(error["resume"])) == ["resume", "c"]


# passwords


SECRET = "s3cr3t-pw"


def _assert_no_secret(res: Result) -> None:
    assert SECRET not in res.out and SECRET not in res.err, (res.out, res.err)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://user:{SECRET}@127.0.0.1:1/db",
        f"postgres://user:{SECRET}@127.0.0.1:1/db?sslmode=disable",
        f"postgresql://user@127.0.0.1:1/db?password={SECRET}&sslmode=disable",
        f"host=127.0.0.1 port=1 user=user password={SECRET} dbname=db",
        f"host=127.0.0.1 port=1 password='{SECRET}' dbname=db",
        f"mysql://user:{SECRET}@127.0.0.1:1/db",
        f"postgresql://user:{SECRET}@127.0.0.1:notaport/db",
    ],
)
def test_unreachable_or_unsupported_database_names_the_url_not_the_password(
    workdir: Path, url: str
) -> None:
    for args in (
        ["threads"],
        ["show", "t"],
        ["run", "flows:report", "[1]"],
        ["resume", "t", "1"],
        ["threads", "--json"],
    ):
        res = cli(workdir, *args, "--db", url)
        assert res.code == 2, (args, res.err)
        _assert_no_secret(res)
        assert "***" in res.err or "://" not in url, res.err
        assert "127.0.0.1" in res.err
    env = cli(workdir, "threads", env={"PREGELKIT_DB": url})
    assert env.code == 2
    _assert_no_secret(env)


def test_a_real_server_with_a_password_never_shows_it(
    workdir: Path, postgres_server: str, postgres_database: object
) -> None:
    import psycopg

    assert callable(postgres_database)
    dsn = str(postgres_database("pregelkit_cli_secret"))
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS cli_user")
        conn.execute(f"CREATE ROLE cli_user LOGIN PASSWORD '{SECRET}'")
        conn.execute('GRANT ALL ON DATABASE "pregelkit_cli_secret" TO cli_user')
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("GRANT ALL ON SCHEMA public TO cli_user")
    url = dsn.replace("postgresql://postgres@", f"postgresql://cli_user:{SECRET}@")
    assert SECRET in url

    run = cli(workdir, "run", "flows:report", "[1, 2]", "--thread", "pw", "--db", url)
    assert run.code == 0, run.err
    _assert_no_secret(run)
    hint = resume_args(run.lines[-1])
    assert hint[:2] == ["--db", url.replace(SECRET, "***")]
    results = [
        cli(workdir, "run", "flows:report", "[1]", "--thread", "j", "--db", url, "--json"),
        cli(workdir, "threads", "--db", url),
        cli(workdir, "threads", "--json", "--db", url),
        cli(workdir, "history", "pw", "--db", url),
        cli(workdir, "show", "pw", "--json", "--db", url),
        cli(workdir, "show", "nope", "--json", "--db", url),
        cli(workdir, "resume", "pw", '"yes"', "--db", url),
    ]
    (workdir / "broken").touch()
    results.append(cli(workdir, "run", "flows:chain", "[1]", "--traceback", "--db", url, "--json"))
    for res in results:
        _assert_no_secret(res)
    from pregelkit.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as saver, saver.lock_thread("pw"):
        held = cli(workdir, "threads", "--json", "--db", url)
    assert {r["thread_id"]: r["status"] for r in json.loads(held.out)}["pw"] == "running"
    assert "running" not in cli(workdir, "threads", "--db", url).out
    assert results[0].events()[0]["db"] == url.replace(SECRET, "***")
    assert results[-2].lines[-1] == "result: {'total': 5, 'published': True}"
    assert results[-1].code == 1 and "Traceback" in results[-1].err


# pipes


def _through_head(cwd: Path, command: str, head: str = "-1") -> subprocess.CompletedProcess[str]:
    script = (
        f"set -o pipefail; {shlex.quote(sys.executable)} -m pregelkit {command} | head {head} "
        ">/dev/null; echo status=$?"
    )
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_show_into_head_exits_quietly(workdir: Path) -> None:
    assert cli(workdir, "run", "flows:fanout", "5000", "--thread", "wide").code == 0
    assert cli(workdir, "run", "flows:big", "300000", "--thread", "big").code == 0
    assert cli(workdir, "run", "flows:report", "[1]", "--thread", "small").code == 0
    first = json.loads(cli(workdir, "history", "wide", "--json").out)[0]["checkpoint_id"]
    # 5001 pending writes in a table; one long JSON line, cut short
    commands = ((f"show wide {first}", "-1"), ("show big --json", "-c 100"))
    for command, head in commands:
        full = cli(workdir, *command.split())
        assert full.code == 0 and len(full.out) > 150_000, command  # more than a pipe holds
        proc = _through_head(workdir, command, head)
        assert proc.stderr == "", proc.stderr
        assert proc.stdout.strip() == "status=141", command
    small = _through_head(workdir, "show small")
    assert small.stderr == ""
    assert small.stdout.strip() in ("status=0", "status=141")


# targets


IMPOSTER = """
from pathlib import Path

Path(__file__).with_name("imposter_ran").touch()
print("imposter imported")
"""


def test_resume_from_another_directory_beside_a_same_named_module(
    workdir: Path, tmp_path: Path
) -> None:
    db = str(workdir / "pregelkit.sqlite")
    assert cli(workdir, "run", "flows:report", "[2]", "--thread", "m").code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "flows.py").write_text(IMPOSTER)
    done = cli(elsewhere, "resume", "m", '"yes"', "--db", db)
    assert done.code == 0, done.err
    assert done.lines[-1] == "result: {'total': 4, 'published': True}"
    assert not (elsewhere / "imposter_ran").exists()
    assert "imposter imported" not in done.out + done.err


def test_a_moved_or_renamed_workflow_is_an_error_saying_what_changed(
    workdir: Path, tmp_path: Path
) -> None:
    assert cli(workdir, "run", "flows.py:report", "[2]", "--thread", "f").code == 0
    assert cli(workdir, "run", "flows:report", "[3]", "--thread", "m").code == 0
    moved = tmp_path / "moved"
    moved.mkdir()
    (workdir / "flows.py").rename(moved / "flows.py")

    for thread in ("f", "m"):
        res = cli(workdir, "resume", thread, '"yes"', "--json")
        assert res.code == 2
        (line,) = all_json(res)
        error = line["error"]
        assert isinstance(error, dict) and error["type"] == "target"
        message = str(error["message"])
        assert str(workdir / "flows.py") in message
        assert "--target" in message
    gone = cli(workdir, "resume", "f", '"yes"')
    assert "no longer exists" in gone.err
    assert "is no longer found there" in cli(workdir, "resume", "m", '"yes"').err

    fixed = cli(workdir, "resume", "f", '"yes"', "--target", str(moved / "flows.py") + ":report")
    assert fixed.code == 0, fixed.err
    assert fixed.lines[-1] == "result: {'total': 4, 'published': True}"

    source = (moved / "flows.py").read_text().replace("def report(", "def summary(")
    (workdir / "flows.py").write_text(source)
    renamed = cli(workdir, "resume", "m", '"yes"')
    assert renamed.code == 2
    assert "no longer defines 'report'" in renamed.err
    assert "summary" in renamed.err


# inspecting never imports


EVIL = """
from pathlib import Path

from pregelkit.func import entrypoint

Path(__file__).with_name("evil_imported").touch()
print("evil imported")


class Secretive:
    def __init__(self, n):
        self.n = n


@entrypoint()
def flow(n):
    return Secretive(n)
"""


def test_inspecting_never_imports_the_module_the_database_names(workdir: Path) -> None:
    (workdir / "evil.py").write_text(EVIL)
    assert cli(workdir, "run", "evil:flow", "5", "--thread", "e").code == 0
    marker = workdir / "evil_imported"
    assert marker.exists()
    marker.unlink()
    for args in (
        ["threads"],
        ["threads", "--json"],
        ["history", "e"],
        ["history", "e", "--json"],
        ["show", "e"],
        ["show", "e", "--json"],
    ):
        res = cli(workdir, *args)  # from the module's own directory: importable, not imported
        assert res.code == 0, (args, res.err)
        assert not marker.exists(), args
        assert "evil imported" not in res.out + res.err
    shown = json.loads(cli(workdir, "show", "e", "--json").out)
    assert shown["channel_values"]["__end__"] == {"type": "evil.Secretive", "state": {"n": 5}}
    table = cli(workdir, "show", "e")
    assert any(line.split()[:3] == ["__end__", "<evil.Secretive", "n=5>"] for line in table.lines)
    assert json.loads(cli(workdir, "threads", "--json").out)[0]["status"] == "done"


# lock files and status


def test_lock_files_do_not_pile_up_and_delete_removes_them(workdir: Path) -> None:
    locks = workdir / "pregelkit.sqlite.locks"
    idle = [RANGES_FILE] if RANGE_LOCKS else []  # one file of byte-range locks, or none
    for n in range(3):
        assert cli(workdir, "run", "flows:points", str(n), "--thread", f"t{n}").code == 0
    assert os.listdir(locks) == idle

    proc = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "run", "flows:slow", "30", "--thread", "killed"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_status(workdir, "killed", "running")
        assert len(list(locks.iterdir())) == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    # the kernel released the lock; a per-thread lock file stays
    assert len(list(locks.iterdir())) == 1
    assert _status(workdir, "killed") == "pending"
    res = cli(workdir, "delete", "killed")
    assert res.code == 0, res.err
    assert os.listdir(locks) == idle


def _status(cwd: Path, thread_id: str) -> str | None:
    res = cli(cwd, "threads", "--json")
    assert res.code == 0, res.err
    rows = {r["thread_id"]: r["status"] for r in json.loads(res.out)}
    return rows.get(thread_id)


def _wait_for_status(cwd: Path, thread_id: str, status: str) -> None:
    deadline = time.monotonic() + 60
    while _status(cwd, thread_id) != status:
        assert time.monotonic() < deadline, f"{thread_id} never became {status}"
        time.sleep(0.2)


def test_threads_shows_a_run_in_progress_as_running(workdir: Path) -> None:
    assert cli(workdir, "run", "flows:points", "1", "--thread", "first").code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "run", "flows:until", '"go"', "--thread", "busy"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_status(workdir, "busy", "running")
        table = cli(workdir, "threads")
        assert ["busy", "running"] in [line.split()[:2] for line in table.lines]
    finally:
        (workdir / "go").touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _status(workdir, "busy") == "done"
    assert os.listdir(workdir / "pregelkit.sqlite.locks") == ([RANGES_FILE] if RANGE_LOCKS else [])


# the guide shows what the command really prints

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "cli.md"
_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)
_VOLATILE = [
    (
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
        "<checkpoint>",
    ),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<interrupt>"),
    (re.compile(r"\bid='[0-9a-f]{0,31}…"), "id='<interrupt>…"),  # cut to fit the table
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "<time>"),
    (re.compile(r", \d+\.\d s$"), ", <seconds>"),  # how long a replay check took
    (re.compile(r"(?<=  )[0-9a-f]{8}(?=  )"), "<task>"),
]


def _guide_sessions() -> list[tuple[str, list[str]]]:
    """(command, the lines shown after it) for every ``$ pregelkit`` line of
    the guide's ``console`` blocks, in order."""
    sessions: list[tuple[str, list[str]]] = []
    for block in _CONSOLE.findall(GUIDE.read_text(encoding="utf-8")):
        for line in block.splitlines():
            if line.startswith("$ "):
                sessions.append((line[2:], []))
            else:
                sessions[-1][1].append(line)
    return sessions


def _normalized(lines: list[str], workdir: Path) -> list[str]:
    found = []
    for line in lines:
        line = line.replace(str(workdir), "/home/me/pregelkit")
        for pattern, placeholder in _VOLATILE:
            line = pattern.sub(placeholder, line)
        found.append(line)
    return sorted(found)  # stdout and stderr are merged: compare lines, not their order


def test_the_cli_guide_shows_what_the_command_prints(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    shutil.copy(GUIDE.parent.parent.parent / "examples" / "quickstart.py", tmp_path / "examples")
    (tmp_path / "notes.txt").write_text("not a database\n")
    env = {k: v for k, v in os.environ.items() if k != "PREGELKIT_DB"}
    env["COLUMNS"] = "120"  # the guide shows tables as a terminal 120 cells wide does
    sessions = _guide_sessions()
    assert len(sessions) >= 8
    for command, shown in sessions:
        words = shlex.split(command)
        assert words[0] == "pregelkit", command
        proc = subprocess.run(
            [sys.executable, "-m", "pregelkit", *words[1:]],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            env=env,
        )
        got = _normalized(proc.stdout.splitlines(), tmp_path)
        assert got == _normalized(shown, tmp_path), f"{command}\n{proc.stdout}"


def test_a_tampered_row_is_shown_never_run(workdir: Path, tmp_path: Path) -> None:
    assert cli(workdir, "run", "flows:report", "[1]", "--thread", "t").code == 0
    pwned = tmp_path / "pwned"
    script = f"""
import os, sqlite3
from pregelkit.checkpoint.sqlite import SqliteSaver

class Payload:
    def __reduce__(self):
        return (os.system, ("touch {pwned}",))

conn = sqlite3.connect("pregelkit.sqlite")
(cid,) = conn.execute("SELECT checkpoint_id FROM pregelkit_checkpoints").fetchone()
conn.close()
# the intruder's serializer stores anything (pregelkit's own refuses these at save)
from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer
trusting = JsonPlusSerializer(pickle_fallback=True)
with SqliteSaver.from_conn_string("pregelkit.sqlite", serde=trusting) as saver:
    config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}}}
    saver.put_writes(config, [("evil", Payload()), ("code", lambda: 1)], "intruder")
"""
    subprocess.run([sys.executable, "-c", script], cwd=workdir, check=True)
    shown = cli(workdir, "show", "t")
    assert shown.code == 0, shown.err
    assert "<posix.system 'touch " in shown.out
    assert "<code stored by value (cloudpickle): not loaded>" in shown.out
    writes = json.loads(cli(workdir, "show", "t", "--json").out)["pending_writes"]
    assert {"type": "posix.system", "args": [f"touch {pwned}"]} in [w["value"] for w in writes]
    assert cli(workdir, "threads").code == 0
    refused = cli(workdir, "resume", "t", '"yes"', "--json")
    assert refused.code == 2
    (line,) = all_json(refused)
    assert line["error"]["type"] == "database"  # type: ignore[index]
    assert "refusing to load posix.system" in refused.err
    assert not pwned.exists()
