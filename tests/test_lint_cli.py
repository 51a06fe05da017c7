"""``pregelkit lint`` and the flake8 plugin: exit statuses, output formats,
no import of the linted code nor of the lint by ``import pregelkit``, and no
finding on the project's own examples and documentation."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from pregelkit.cli import main
from pregelkit.lint import lint_paths, lint_source

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

FLOW = textwrap.dedent(
    """\
    import time
    from pregelkit.func import entrypoint

    @entrypoint()
    def wf(x: int) -> float:
        return time.time() + x
    """
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_findings_exit_1_with_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "flows.py").write_text(FLOW)
    (tmp_path / "clean.py").write_text("x = 1\n")
    code, out, err = run(capsys, str(tmp_path))
    assert code == 1
    assert out == (
        f"{tmp_path}/flows.py:6:12: PK001 time.time() reads the wall clock in entrypoint 'wf'; "
        "a replay reads another time: move it into a @task (its result is recorded) or pass "
        "the time in as input\n"
    )
    assert err == "1 finding(s) in 2 file(s) (PK001 1)\n"


def test_json_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "flows.py").write_text(FLOW)
    code, out, _ = run(capsys, str(tmp_path / "flows.py"), "--format", "json")
    assert code == 1
    document = json.loads(out)
    assert document["files"] == 1 and document["errors"] == []
    [finding] = document["findings"]
    assert {k: finding[k] for k in ("line", "col", "code")} == {
        "line": 6,
        "col": 12,
        "code": "PK001",
    }


def test_nothing_found_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "flows.py").write_text(FLOW.replace("time.time()", "0.0"))
    assert run(capsys, str(tmp_path)) == (0, "", "0 finding(s) in 1 file(s)\n")


def test_the_lint_needs_no_rich(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # `import rich` fails
    (tmp_path / "flows.py").write_text(FLOW)
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 1 and "PK001" in out
    assert main(["threads", "--db", str(tmp_path / "x.sqlite")]) == 2  # the others do


def test_a_missing_path_or_a_broken_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.py"))
    assert code == 2
    assert "nope.py: no such file or directory" in err
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "flows.py").write_text(FLOW)
    code, out, err = run(capsys, str(tmp_path))
    assert code == 2
    assert "PK001" in out  # the other files are still linted
    assert f"error: {tmp_path}/broken.py:1: does not parse" in err


def test_the_linted_code_is_never_imported(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(f"raise SystemExit('imported!')\n{FLOW}")
    report = lint_paths([tmp_path])
    assert [f.code for f in report.findings] == ["PK001"]


def test_import_pregelkit_does_not_import_the_lint() -> None:
    probe = (
        "import sys, pregelkit, pregelkit.func, pregelkit.pregel, pregelkit.types;"
        "print([m for m in sys.modules if m.startswith('pregelkit.lint')])"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_projects_examples_have_no_finding() -> None:
    report = lint_paths([ROOT / "examples"])
    assert report.files >= 9 and report.errors == []
    assert report.findings == []


def _docs_python_blocks() -> list[tuple[str, str]]:
    from test_docs import blocks, doc_files

    return [
        (f"{path.relative_to(ROOT)}:{line}", code)
        for path in doc_files()
        for language in ("python", "py")
        for line, code in blocks(path, language)
    ]


def test_the_docs_python_blocks_have_no_finding() -> None:
    found = []
    checked = 0
    for name, code in _docs_python_blocks():
        try:
            found += lint_source(code, name)
        except SyntaxError:
            continue  # a `py` fragment (a signature): nothing to lint
        checked += 1
    assert checked >= 60
    assert found == []


def test_pyproject_registers_the_flake8_plugin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["flake8.extension"] == {"PK": "pregelkit.lint.flake8:Plugin"}


def test_flake8_reports_the_findings_and_applies_noqa(tmp_path: Path) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(
        FLOW
        + "\n\n@entrypoint()\ndef quiet(x: int) -> float:\n    return time.time()  # noqa: PK001\n"
    )
    installed = any(
        ep.name == "PK" for ep in importlib.metadata.entry_points(group="flake8.extension")
    )
    if not installed:  # an editable install older than the entry point: name it here
        (tmp_path / "setup.cfg").write_text(
            "[flake8:local-plugins]\nextension =\n    PK = pregelkit.lint.flake8:Plugin\n"
            f"paths = {SRC}\n"
        )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "PK", "flows.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        "flows.py:6:12: PK001 time.time() reads the wall clock in entrypoint 'wf'; a replay "
        "reads another time: move it into a @task (its result is recorded) or pass the time "
        "in as input"
    ]
