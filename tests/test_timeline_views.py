"""The views of ``pregelkit timeline``: the terminal Gantt chart, the
``--json`` document and the HTML page, rendered from timelines built by hand
(tests/timeline_samples.py), and the command's handling of its options and
mistakes. The page's behaviour in a real browser: test_timeline_browser.py.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import pregelkit.observe.timeline as timeline_module
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.cli import main
from pregelkit.cli._timeline_data import timeline_data
from pregelkit.cli._timeline_html import render_html
from pregelkit.cli._timeline_text import render_text
from pregelkit.func import entrypoint
from pregelkit.observe.timeline import RunTimeline, Timeline
from timeline_samples import ATTEMPTS, HOSTILE_ERROR, HOSTILE_NAME, attempt, sample_timeline

NOW = 1_800_086_402.0


def text_of(timeline: Timeline, *, color: bool = False, running: bool = False) -> str:
    out = io.StringIO()
    render_text(timeline, out, color=color, width=120, running=running, now=NOW)
    return out.getvalue()


def bar_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.endswith("│")]


# the terminal chart


def test_text_draws_one_bar_per_attempt_run_by_run() -> None:
    text = text_of(sample_timeline())
    rows = bar_rows(text)
    assert len(rows) == ATTEMPTS
    assert "\x1b" not in text
    headers = [line for line in text.splitlines() if line.startswith("── run")]
    assert len(headers) == 2
    assert headers[0].startswith("── run 1/2 (r1)")
    assert "1 retry" in headers[0] and "1 cached" in headers[0]
    # the second run died: its unfinished task is drawn up to the run's last record
    assert "never finished (last record at 600ms)" in headers[1] and "1 unfinished" in headers[1]
    unfinished = next(r for r in rows if " unfinished " in r)
    assert unfinished.rstrip("│").endswith("░░░")


def test_text_marks_retries_cache_hits_and_errors() -> None:
    rows = bar_rows(text_of(sample_timeline()))
    retry = [r for r in rows if "↻" in r]
    assert len(retry) == 1 and " fetch " in retry[0] and " 2↻ " in retry[0]
    cached = next(r for r in rows if " cached " in r)
    assert "◆" in cached and "█" not in cached
    assert re.search(r" cached_square +- +cached ", cached)  # no attempt ran
    text = text_of(sample_timeline())
    assert "↳ KeyError: 'missing'" in text


def test_text_bars_sit_where_the_attempts_ran() -> None:
    t = 1000.0
    run = RunTimeline(
        "r",
        t,
        t + 10,
        (
            attempt("first_half", t, t + 5, "ok", run="r"),
            attempt("second_half", t + 5, t + 10, "ok", run="r"),
        ),
    )
    rows = bar_rows(text_of(Timeline("t", (run,))))
    first = rows[0].split("│")[1]
    second = rows[1].split("│")[1]
    width = len(first)
    assert first.rstrip() == "█" * len(first.rstrip())
    assert abs(len(first.rstrip()) - width / 2) <= 1
    assert second.lstrip() == "█" * len(second.lstrip())
    assert abs(len(second.lstrip()) - width / 2) <= 1


def test_text_colours_by_outcome_only_when_asked() -> None:
    coloured = text_of(sample_timeline(), color=True)
    error_row = next(r for r in coloured.splitlines() if "KeyError" not in r and "error " in r)
    assert "\x1b[31;1m" in error_row
    assert "\x1b[32m" in coloured  # ok
    assert "\x1b" not in text_of(sample_timeline(), color=False)


def test_text_never_sends_control_characters_from_user_text() -> None:
    run = RunTimeline(
        "r\x1b[2J",
        1.0,
        2.0,
        (
            attempt(
                "evil\x1b]0;pwned\x07",
                1.0,
                2.0,
                "error",
                run="r",
                error=("E", "line one\nline two\x1b[31m"),
            ),
        ),
    )
    text = text_of(Timeline("t\x1b[H", (run,)))
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b]0;pwned\\x07" in text
    assert "line one\\nline two\\x1b[31m" in text


def test_text_of_a_live_run_says_running() -> None:
    text = text_of(sample_timeline(), running=True)
    header = next(line for line in text.splitlines() if line.startswith("── run 2/2"))
    assert "running for 2.0s" in header and "1 running" in header
    assert "unfinished" not in text


def test_text_with_no_attempts() -> None:
    assert "no attempts recorded" in text_of(Timeline("t", ()))


# the JSON document


def test_json_document_holds_every_attempt() -> None:
    data = json.loads(json.dumps(timeline_data(sample_timeline(), running=False, now=NOW)))
    assert data["version"] == 1 and data["thread_id"] == "t-1" and data["running"] is False
    assert [r["run_id"] for r in data["runs"]] == ["r1", "r2"]
    assert data["runs"][1]["ended_at"] is None and data["runs"][1]["duration"] is None
    attempts = [a for r in data["runs"] for a in r["attempts"]]
    assert len(attempts) == ATTEMPTS
    assert set(attempts[0]) == {
        "task_id",
        "name",
        "checkpoint_ns",
        "step",
        "attempt",
        "started_at",
        "ended_at",
        "duration",
        "outcome",
        "error_type",
        "error_message",
        "pid",
        "host",
        "worker",
    }
    fetch = attempts[1]
    assert fetch["outcome"] == "error" and fetch["error_type"] == "KeyError"
    assert fetch["duration"] == pytest.approx(0.3)
    killed = attempts[ATTEMPTS - 2]
    assert killed["name"] == "report" and killed["outcome"] is None and killed["ended_at"] is None


# the HTML page


def page_data(page: str) -> Any:
    found = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', page)
    assert found is not None
    return json.loads(found.group(1))


def test_html_page_is_self_contained() -> None:
    page = render_html(sample_timeline(), running=False, now=NOW)
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page  # the browser itself refuses any network use
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "@import" not in page and "url(http" not in page


def test_html_page_carries_user_text_as_escaped_data_only() -> None:
    page = render_html(sample_timeline(), running=False, now=NOW)
    # two scripts: the data block and the page's own code; no third from a task name
    assert page.count("<script") == 2
    assert HOSTILE_NAME not in page and "<img" not in page
    names = [a["name"] for r in page_data(page)["runs"] for a in r["attempts"]]
    assert HOSTILE_NAME in names
    errors = [a["error"] for r in page_data(page)["runs"] for a in r["attempts"]]
    assert f"ValueError: {HOSTILE_ERROR}" in errors


def test_html_page_escapes_the_thread_id_in_markup() -> None:
    page = render_html(Timeline('</title><script>alert("x")</script>', ()), running=False, now=1)
    assert page.count("<script") == 2
    assert "&lt;/title&gt;&lt;script&gt;" in page


def test_html_page_gives_each_attempt_its_place_in_its_run() -> None:
    runs = page_data(render_html(sample_timeline(), running=False, now=NOW))["runs"]
    assert [len(r["attempts"]) for r in runs] == [7, 3]
    assert runs[0]["span"] == pytest.approx(3.0)
    retry = runs[0]["attempts"][2]
    assert (retry["attempt"], retry["from"], retry["to"]) == (
        2,
        pytest.approx(0.9),
        pytest.approx(1.2),
    )
    killed = runs[1]["attempts"][1]
    assert killed["status"] == "unfinished" and killed["open"] is True
    assert killed["to"] == pytest.approx(runs[1]["span"])


# the command


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A database holding thread ``t-1``; its timeline is the sample one."""
    path = str(tmp_path / "state.sqlite")
    with SqliteSaver.from_conn_string(path) as saver:

        @entrypoint(checkpointer=saver)
        def double(n: int) -> int:
            return 2 * n

        double.invoke(1, {"configurable": {"thread_id": "t-1"}})

    def load(saver: object, thread_id: str) -> Timeline:
        assert thread_id == "t-1"
        return sample_timeline()

    monkeypatch.setattr(timeline_module, "load_timeline", load, raising=False)
    monkeypatch.chdir(tmp_path)
    return path


def run_cli(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


def test_command_prints_the_chart(db: str, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capfd, "timeline", "t-1", "--db", db)
    assert code == 0
    assert len(bar_rows(out)) == ATTEMPTS
    assert "\x1b[" not in out  # not a terminal: no colour


def test_command_json(db: str, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capfd, "timeline", "t-1", "--db", db, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["thread_id"] == "t-1" and data["running"] is False
    assert sum(len(r["attempts"]) for r in data["runs"]) == ATTEMPTS


def test_command_writes_the_page(db: str, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capfd, "timeline", "t-1", "--db", db, "--html", "view.html")
    assert code == 0 and out.startswith("wrote view.html")
    assert page_data(Path("view.html").read_text(encoding="utf-8"))["thread_id"] == "t-1"
    code, out, _ = run_cli(capfd, "timeline", "t-1", "--db", db, "--html", "v2.html", "--json")
    assert code == 0
    assert json.loads(out) == {
        "event": "html",
        "thread_id": "t-1",
        "path": os.path.abspath("v2.html"),
        "runs": 2,
        "attempts": ATTEMPTS,
    }
    assert sorted(n for n in os.listdir(".") if "sqlite" not in n) == ["v2.html", "view.html"]


def test_command_page_shows_no_password(
    db: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    leak = "could not connect to postgresql://app:hunter22@db.internal/flows"
    run = RunTimeline(
        "r",
        1.0,
        2.0,
        (attempt("load", 1.0, 2.0, "error", run="r", error=("OperationalError", leak)),),
    )
    monkeypatch.setattr(
        timeline_module, "load_timeline", lambda saver, t: Timeline("t-1", (run,)), raising=False
    )
    for args in (["--html", "view.html"], ["--json"], []):
        code, out, _ = run_cli(capfd, "timeline", "t-1", "--db", db, *args)
        assert code == 0
        shown = Path("view.html").read_text(encoding="utf-8") if args[:1] == ["--html"] else out
        assert "hunter22" not in shown and "postgresql://app:***@" in shown


@pytest.mark.parametrize("target", ["missing/dir/view.html", "."])
def test_command_says_when_it_cannot_write_the_page(
    db: str, capfd: pytest.CaptureFixture[str], target: str
) -> None:
    code, out, err = run_cli(capfd, "timeline", "t-1", "--db", db, "--html", target, "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert error["type"] == "usage" and repr(target) in error["message"]
    assert "Traceback" not in err


def test_command_keeps_a_good_page_when_writing_fails(
    db: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Path("view.html").write_text("the old page", encoding="utf-8")

    def broken(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pregelkit.cli._timeline_html.render_html", lambda *a, **k: "x" * 10)
    monkeypatch.setattr("os.replace", broken)
    code, _, err = run_cli(capfd, "timeline", "t-1", "--db", db, "--html", "view.html")
    assert code == 2 and "No space left on device" in err
    assert Path("view.html").read_text(encoding="utf-8") == "the old page"
    assert [n for n in os.listdir(".") if "sqlite" not in n] == ["view.html"]


def test_command_writes_into_a_pipe_without_replacing_it(
    db: str, capfd: pytest.CaptureFixture[str]
) -> None:
    import threading

    os.mkfifo("page.fifo")
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(Path("page.fifo").read_text()))
    reader.start()
    code, _, _ = run_cli(capfd, "timeline", "t-1", "--db", db, "--html", "page.fifo")
    reader.join(timeout=60)
    assert code == 0
    assert got[0].startswith("<!DOCTYPE html>") and got[0].rstrip().endswith("</html>")
    assert Path("page.fifo").is_fifo()


def test_command_unknown_thread(db: str, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capfd, "timeline", "nope", "--db", db, "--json")
    assert code == 2
    assert json.loads(out)["error"]["type"] == "unknown_thread"


def test_command_never_creates_a_database(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.sqlite"
    code, _, err = run_cli(capfd, "timeline", "t-1", "--db", str(path))
    assert code == 2 and "no database at" in err
    assert not path.exists()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_color", [None, "", "1"])
def test_command_colours_a_terminal_unless_no_color(
    db: str, monkeypatch: pytest.MonkeyPatch, no_color: str | None
) -> None:
    """NO_COLOR set to anything but the empty string turns colour off."""
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    screen = Terminal()
    monkeypatch.setattr("sys.stdout", screen)
    assert main(["timeline", "t-1", "--db", db]) == 0
    assert len(bar_rows(screen.getvalue())) == ATTEMPTS
    assert ("\x1b[31;1m" in screen.getvalue()) == (not no_color)


def test_command_output_into_a_closed_pipe(db: str) -> None:
    """``pregelkit timeline T | head -1``: a quiet exit, status 141."""
    import subprocess
    import sys

    script = (
        "import sys, timeline_samples, pregelkit.observe.timeline as m\n"
        "from pregelkit.observe.timeline import RunTimeline, Timeline\n"
        "rows = tuple(timeline_samples.attempt(f'task{i}', i, i + 1, 'ok', run='r')"
        " for i in range(3000))\n"
        "big = Timeline('t-1', (RunTimeline('r', 0, 3001, rows),))\n"
        "m.load_timeline = lambda saver, t: big\n"
        "from pregelkit.cli import main\n"
        f"sys.exit(main(['timeline', 't-1', '--db', {db!r}]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


WAITING_FLOW = """
import time
from pathlib import Path

from pregelkit.func import entrypoint


@entrypoint()
def wait_for_stop(n):
    deadline = time.monotonic() + 60
    while not Path("stop").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return n
"""


def test_command_tells_a_live_run_from_a_dead_one(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempts without an outcome are ``running`` while a run holds the
    thread, ``unfinished`` once none does."""
    import subprocess
    import sys
    import time

    (tmp_path / "flows.py").write_text(WAITING_FLOW)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        timeline_module, "load_timeline", lambda saver, t: sample_timeline(), raising=False
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pregelkit", "run", "flows:wait_for_stop", "1", "--thread", "t-1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            code, out, _ = run_cli(capfd, "timeline", "t-1", "--json")
            if code == 0 and json.loads(out)["running"]:
                break
            assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
            time.sleep(0.2)
        code, out, _ = run_cli(capfd, "timeline", "t-1")
        assert code == 0 and "running for" in out and " running " in out
    finally:
        Path("stop").touch()
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    code, out, _ = run_cli(capfd, "timeline", "t-1", "--json")
    assert json.loads(out)["running"] is False
    code, out, _ = run_cli(capfd, "timeline", "t-1")
    assert " unfinished " in out and "running" not in out
