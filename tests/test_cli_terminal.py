"""What the ``pregelkit`` command prints for a person: nothing in a thread id
or a value reaches the terminal as a control sequence or as rich markup,
tables align by terminal cells and fit the terminal's width, ``run`` shows
the workflow's own stream chunks, and the small mistakes of a first day of
use get a message saying what to do.

Commands that run workflows run as users run them (``python -m pregelkit``
in a subprocess, in a directory holding ``flows.py``); the others call
``main`` in this process.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import textwrap
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pregelkit.cli import main
from pregelkit.cli._render import clean
from pregelkit.cli._table import render_table
from test_cli import Result

FLOWS = """
from typing import TypedDict

from pregelkit.config import get_stream_writer
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def shout(text: str) -> str:
    write = get_stream_writer()
    write({"progress": 0.5})
    write("half way\\nthere")
    return text.upper()


@entrypoint()
def greet(name: str) -> str:
    return shout(name).result()


@entrypoint()
def total(items: list[int]) -> int:
    return sum(items)


class Order(TypedDict):
    id: int
    note: str


@entrypoint()
def order(o: Order) -> str:
    return o["note"]


@entrypoint()
def untyped(x):
    return x


@entrypoint()
def ask(question: str) -> str:
    return interrupt(question)
"""

EVIL = "evil\x1b[31mred"
MARKUP = "[bold]x[/]"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    return tmp_path


def run_cli(cwd: Path, *args: str, columns: int | None = None) -> Result:
    """``pregelkit ARGS`` in a subprocess, stdout a pipe; ``COLUMNS`` set
    only when given (a pipe then gets tables of that width)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PREGELKIT_DB")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run(
        [sys.executable, "-m", "pregelkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def inline(capfd: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``pregelkit ARGS`` through ``main`` in this process."""

    def run(*args: str) -> Result:
        code = main(list(args))
        out, err = capfd.readouterr()
        assert "Traceback" not in err, err
        return Result(code, out, err)

    return run


def cells(text: str) -> int:
    """Terminal cells of ``text``, counted without rich: East Asian wide
    and fullwidth characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def column_of(line: str, word: str) -> int:
    """The terminal cell at which ``word`` starts in ``line``."""
    return cells(line[: line.index(word)])


# escaping


def test_control_characters_and_markup_in_ids_and_values_print_as_text(workdir: Path) -> None:
    run = run_cli(workdir, "run", "flows:greet", json.dumps(f"{MARKUP}\x1b[2J"), "--thread", EVIL)
    assert run.code == 0, run.err
    assert run_cli(workdir, "run", "flows:ask", json.dumps("ok?\x07"), "--thread", MARKUP).code == 0
    outputs = {
        "run": run,
        "threads": run_cli(workdir, "threads"),
        "history": run_cli(workdir, "history", EVIL),
        "show": run_cli(workdir, "show", EVIL),
        "show interrupted": run_cli(workdir, "show", MARKUP),
        "resume": run_cli(workdir, "resume", MARKUP, '"yes"'),
    }
    for name, res in outputs.items():
        assert res.code == 0, (name, res.err)
        assert "\x1b" not in res.out + res.err and "\x07" not in res.out, name
    assert "thread: evil\\x1b[31mred" in run.lines
    assert "result: [BOLD]X[/]\\x1b[2J" in run.lines
    threads = outputs["threads"].out
    assert "evil\\x1b[31mred" in threads and MARKUP in threads  # markup stays literal
    assert "[BOLD]X[/]\\x1b[2J" in outputs["show"].out
    assert "ok?\\x07" in outputs["show interrupted"].out
    deleted = run_cli(workdir, "delete", EVIL)
    assert deleted.out == "deleted thread evil\\x1b[31mred\n"


def test_a_printed_command_quotes_control_characters_so_a_shell_reads_them_back(
    workdir: Path,
) -> None:
    res = run_cli(workdir, "run", "flows:ask", '"go?"', "--thread", EVIL)
    assert res.code == 0, res.err
    hint = res.lines[-1].strip()
    assert hint == "pregelkit resume $'evil\\x1b[31mred' '\"yes\"'"
    assert "\x1b" not in res.out
    echoed = subprocess.run(
        ["bash", "-c", hint.replace("pregelkit resume", "printf '%s|%s'")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert echoed.stdout == f'{EVIL}|"yes"'


def test_runs_escapes_thread_ids(tmp_path: Path, inline: Callable[..., Result]) -> None:
    db = str(tmp_path / "q.db")
    submitted = inline("submit", "fleet_flows:chain", "--input", "3", "--thread", EVIL, "--db", db)
    assert submitted.code == 0, submitted.err
    assert "\x1b" not in submitted.out and "evil\\x1b[31mred" in submitted.out
    listed = inline("runs", "--db", db)
    assert "\x1b" not in listed.out and "evil\\x1b[31mred" in listed.out


# layout


def test_wide_characters_align(workdir: Path) -> None:
    for thread in ("顧客-42", "plain-thread-id", "東京"):
        assert run_cli(workdir, "run", "flows:total", "[1]", "--thread", thread).code == 0
    table = run_cli(workdir, "threads")
    assert table.code == 0, table.err
    header, rule, *rows = table.lines
    assert len(rows) == 3
    starts = {column_of(line, "done") for line in rows}
    assert starts == {column_of(header, "STATUS")}, table.out
    assert {column_of(line, "flows:total") for line in rows} == {column_of(header, "ENTRYPOINT")}
    # the rule under each column is as wide as its widest cell
    assert rule.split()[0] == "-" * cells("plain-thread-id")


def test_tables_fit_the_width_cutting_with_an_ellipsis_and_wide_shows_whole_values(
    workdir: Path,
) -> None:
    long_id = "thread-" + "x" * 80
    assert run_cli(workdir, "run", "flows:total", "[1]", "--thread", long_id).code == 0
    assert run_cli(workdir, "run", "flows:total", "[2]", "--thread", "short").code == 0

    fitted = run_cli(workdir, "threads", columns=90)
    assert fitted.code == 0, fitted.err
    assert max(cells(line) for line in fitted.lines) <= 90
    assert long_id not in fitted.out
    (cut,) = [line for line in fitted.lines if line.startswith("thread-")]
    assert re.match(r"^thread-x+… +done ", cut), cut
    assert "flows:total" in cut  # the other columns are all there

    for whole in (
        run_cli(workdir, "threads", "--wide", columns=90),
        run_cli(workdir, "threads"),  # a pipe without COLUMNS: nothing is cut
    ):
        assert whole.code == 0, whole.err
        assert long_id in whole.out and "…" not in whole.out

    as_json = run_cli(workdir, "threads", "--json", columns=40)
    assert {row["thread_id"] for row in json.loads(as_json.out)} == {long_id, "short"}


def on_a_terminal(cwd: Path, columns: int, *args: str) -> str:
    """What ``pregelkit ARGS`` shows on a terminal ``columns`` cells wide
    (stdout and stderr on a pseudo-terminal, ``COLUMNS`` unset)."""
    main_fd, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PREGELKIT_DB")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", *args], cwd=cwd, stdout=child, stderr=child, env=env
    )
    os.close(child)
    shown = b""
    while select.select([main_fd], [], [], 60)[0]:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert proc.wait(timeout=60) == 0, shown
    os.close(main_fd)
    return shown.decode().replace("\r\n", "\n")


def test_a_table_on_a_terminal_fits_its_width(workdir: Path) -> None:
    long_id = "thread-" + "y" * 80
    assert run_cli(workdir, "run", "flows:total", "[1]", "--thread", long_id).code == 0
    shown = on_a_terminal(workdir, 90, "threads").splitlines()
    assert max(cells(line) for line in shown) <= 90
    assert re.match(r"^thread-y+… +done ", shown[2]), shown
    wide = on_a_terminal(workdir, 90, "threads", "--wide")
    assert long_id in wide


def test_a_terminal_too_narrow_for_the_table_gets_every_column(workdir: Path) -> None:
    assert run_cli(workdir, "run", "flows:total", "[1]", "--thread", "t" * 30).code == 0
    narrow = run_cli(workdir, "threads", columns=20)
    header = narrow.lines[0].split()
    assert header == ["THREAD", "STATUS", "STEP", "CHECKPOINTS", "UPDATED", "ENTRYPOINT"]
    assert narrow.lines[2].split()[1:4] == ["done", "0", "2"]


def test_show_cuts_long_values_to_the_width_and_wide_shows_them(workdir: Path) -> None:
    question = " ".join(f"q{i}" for i in range(100)) + " end?"
    assert run_cli(workdir, "run", "flows:ask", json.dumps(question), "--thread", "big").code == 0
    fitted = run_cli(workdir, "show", "big", columns=80)
    start = next(line for line in fitted.lines if line.lstrip().startswith("__start__"))
    assert cells(start) <= 80 and start.endswith("…"), fitted.out
    wide = run_cli(workdir, "show", "big", "--wide", columns=80)
    assert any(line.rstrip().endswith("q99 end?") for line in wide.lines), wide.out


def test_runs_note_never_cuts_the_command_to_start_a_worker(
    tmp_path: Path, inline: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "q.db")
    assert (
        inline("submit", "fleet_flows:chain", "--input", "3", "--thread", "c1", "--db", db).code
        == 0
    )
    monkeypatch.setenv("COLUMNS", "70")
    listed = inline("runs", "--db", db)
    assert listed.code == 0, listed.err
    assert f"start a worker for 'chain': pregelkit worker MODULE:chain --db {db}" in listed.lines
    (row,) = [line for line in listed.lines if line.startswith("c1 ")]
    assert "no live worker" in row and "pregelkit worker" not in row


# run


def test_run_shows_the_workflows_custom_stream_chunks(workdir: Path) -> None:
    res = run_cli(workdir, "run", "flows:greet", '"ada"', "--thread", "g")
    assert res.code == 0, res.err
    assert res.lines[1:4] == ["{'progress': 0.5}", "half way", "there"]
    events = [
        json.loads(line) for line in run_cli(workdir, "run", "flows:greet", '"bo"', "--json").lines
    ]
    custom = [e["value"] for e in events if e["event"] == "custom"]
    assert custom == [{"progress": 0.5}, "half way\nthere"]


def test_run_and_resume_print_the_result_once(workdir: Path) -> None:
    done = run_cli(workdir, "run", "flows:greet", '"ada"', "--thread", "g")
    assert [line for line in done.lines if "ADA" in line] == ["shout: ADA", "result: ADA"]
    asked = run_cli(workdir, "run", "flows:ask", '"go?"', "--thread", "a")
    assert asked.code == 0, asked.err
    resumed = run_cli(workdir, "resume", "a", '"yes!"')
    assert [line for line in resumed.lines if "yes!" in line] == ["result: yes!"]


def test_the_input_hint_of_run_follows_the_workflows_signature(workdir: Path) -> None:
    hints = {}
    for name in ("greet", "total", "order", "untyped"):
        res = run_cli(workdir, "run", f"flows:{name}")
        assert res.code == 2
        hints[name] = re.search(r"e\.g\. (.*); without one", res.err).group(1)  # type: ignore[union-attr]
    assert hints == {
        "greet": "pregelkit run flows:greet '\"hello\"'",
        "total": "pregelkit run flows:total '[1, 2, 3]'",
        "order": 'pregelkit run flows:order \'{"id": 1, "note": "hello"}\'',
        "untyped": "pregelkit run flows:untyped INPUT_JSON",
    }


def test_example_inputs_of_other_types() -> None:
    from typing import Literal, Optional

    from pregelkit.cli._example import example_input
    from pregelkit.func import entrypoint

    def example(hint: object) -> str | None:
        def flow(x):  # type: ignore[no-untyped-def]
            return x

        flow.__annotations__ = {"x": hint}
        return example_input(entrypoint()(flow))

    assert example(bool) == "true"
    assert example(list[bool]) == "[true]"
    assert example(float) == "1.5"
    assert example(Optional[dict[str, int]]) == '{"key": 1}'
    assert example(Literal["fast", "slow"]) == '"fast"'
    assert example(tuple[int, str]) == '[1, "hello"]'


# mistakes


def test_a_directory_as_db_says_so(workdir: Path) -> None:
    (workdir / "data").mkdir()
    for args in (["threads"], ["run", "flows:total", "[1]"]):
        res = run_cli(workdir, *args, "--db", "data")
        assert res.code == 2
        assert res.err == (
            "pregelkit: error: --db 'data' is a directory: name a SQLite file, e.g. "
            "'data/pregelkit.sqlite'\n"
        )


def test_run_on_a_file_that_is_not_a_database_gives_the_hint_threads_gives(
    workdir: Path,
) -> None:
    (workdir / "notes.txt").write_text("not a database\n" * 50)
    threads = run_cli(workdir, "threads", "--db", "notes.txt")
    run = run_cli(workdir, "run", "flows:total", "[1]", "--db", "notes.txt")
    assert threads.code == run.code == 2
    assert "Is it a SQLite file? Point --db at the file your workflows use" in threads.err
    assert run.err == threads.err
    assert (workdir / "notes.txt").read_text() == "not a database\n" * 50


def test_a_usage_mistake_points_at_the_commands_help(
    tmp_path: Path, inline: Callable[..., Result]
) -> None:
    for args in (["threads", "--limit"], ["threads", "--nope"], ["threads", "--limit", "x"]):
        res = inline(*args, "--db", str(tmp_path / "x.db"))
        assert res.code == 2
        assert res.err.rstrip().endswith("(see `pregelkit threads --help`)"), res.err


def test_threads_takes_limit_and_status(workdir: Path) -> None:
    for thread in ("first", "second", "third"):
        assert run_cli(workdir, "run", "flows:total", "[1]", "--thread", thread).code == 0
    assert run_cli(workdir, "run", "flows:ask", '"?"', "--thread", "waiting").code == 0

    def ids(*args: str) -> list[str]:
        res = run_cli(workdir, "threads", "--json", *args)
        assert res.code == 0, res.err
        return [row["thread_id"] for row in json.loads(res.out)]

    assert ids() == ["waiting", "third", "second", "first"]
    assert ids("--limit", "2") == ["waiting", "third"]
    assert ids("--status", "done") == ["third", "second", "first"]
    assert ids("--status", "done", "--limit", "1") == ["third"]
    assert ids("--status", "interrupted") == ["waiting"]
    table = run_cli(workdir, "threads", "--status", "failed")
    assert table.out == "no threads with status failed in pregelkit.sqlite\n"
    bad = run_cli(workdir, "threads", "--limit", "0")
    assert bad.code == 2 and "--limit must be at least 1" in bad.err
    bad = run_cli(workdir, "threads", "--status", "finished")
    assert bad.code == 2 and "invalid choice: 'finished'" in bad.err


def test_help_lists_the_common_options_and_a_line_per_command(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")

    def help_of(*args: str) -> str:
        with pytest.raises(SystemExit) as exited:
            main([*args, "--help"])
        assert exited.value.code == 0
        return capfd.readouterr().out

    top = help_of()
    assert "--db DB" in top and "--json" in top
    listing = top.split("COMMAND\n", 1)[1].split("\n\n")[0].splitlines()
    commands = [line.split()[0] for line in listing]
    assert len(commands) >= 11
    assert all(re.match(r"^    [a-z-]+ +\S", line) for line in listing), listing  # one line each
    for command in commands:
        described = help_of(command).split("\n\n")[1]
        assert described.strip() and not described.startswith(("positional", "options")), command


# rich is the cli extra


def test_without_rich_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, inline: Callable[..., Result]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich fails
    res = inline("threads")
    assert res.code == 2
    assert res.err == (
        "pregelkit: error: the pregelkit command needs rich, which is not installed: "
        "pip install 'pregelkit[cli]'\n"
    )
    as_json = inline("threads", "--json")
    assert json.loads(as_json.out)["error"]["type"] == "install"


def test_without_rich_help_still_shows(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The help that says what the command is reads without the extra (it
    is where a new user looks first), as does --version."""
    monkeypatch.setitem(sys.modules, "rich", None)
    for args in (["--help"], ["run", "--help"], ["--version"]):
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 0, args
        assert "pregelkit" in capfd.readouterr().out, args


# any cells: escaped, aligned, cut only with an ellipsis

_CHARS = st.sampled_from(
    [*"ab x[/]\\'", "\x1b", "\x07", "\n", "\t", "\x85", "\u202e", "顧", "客", "…"]
)


def _by_cells(line: str, start: int, end: int | None) -> str:
    """The characters of ``line`` between two terminal-cell offsets."""
    out, at = [], 0
    for c in line:
        if at >= start and (end is None or at < end):
            out.append(c)
        at += cells(c)
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.lists(st.text(_CHARS, max_size=12), min_size=3, max_size=3), max_size=5),
    width=st.one_of(st.none(), st.integers(20, 60)),
)
def test_any_cells_are_escaped_aligned_and_cut_only_with_an_ellipsis(
    rows: list[list[str]], width: int | None
) -> None:
    headers = ["ID", "STATUS", "VALUE"]
    text = render_table(headers, rows, width, cut=("ID", "VALUE"))
    lines = text.splitlines()
    assert all(c.isprintable() for line in lines for c in line)
    header = lines[0]
    starts = [column_of(header, h) for h in headers]
    natural = [max([cells(h)] + [cells(clean(r[i])) for r in rows]) for i, h in enumerate(headers)]
    least = [n if h == "STATUS" else min(n, max(cells(h), 4)) for h, n in zip(headers, natural)]
    if width is not None and width >= sum(least) + 4:
        assert all(cells(line) <= width for line in lines)  # never wider than asked
    for row, line in zip(rows, lines[2:]):
        for i, cell in enumerate(row):
            shown = _by_cells(line, starts[i], starts[i + 1] if i + 1 < len(starts) else None)
            shown = shown.rstrip(" ")
            whole = clean(cell).rstrip(" ")
            if shown != whole:
                assert headers[i] in ("ID", "VALUE") and width is not None, (cell, shown)
                assert shown.endswith("…") and whole.startswith(shown[:-1].rstrip(" "))
