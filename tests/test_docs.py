"""The documentation's code runs, and says what the code does.

Every fenced block tagged ``python`` in README.md and in the pages under
docs/ (not docs/benchmarks.md, which is generated) is a complete program: it
is run in a fresh interpreter, in an empty directory, and must exit 0. Most
end in ``assert`` lines, so a wrong claim fails. Python that is not meant to
run on its own (a fragment, a signature) is tagged ``py`` instead.

Blocks that read the ``DATABASE_URL`` environment variable get the test
PostgreSQL server's address in it.

README.md's quickstart transcript is compared with what the quickstart
really prints, and its set-up lines are checked literally.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GENERATED = {DOCS / "benchmarks.md"}

_FENCE = re.compile(r"^([ \t]*)```(\S*)[^\n]*\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)


def doc_files() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if p not in GENERATED)
    return [ROOT / "README.md", *pages]


def blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """(line number, code) of each fenced block of ``language`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        if match.group(2) == language:
            line = text.count("\n", 0, match.start()) + 1
            found.append((line, textwrap.dedent(match.group(3))))
    return found


def _python_blocks() -> list[pytest.param]:  # type: ignore[valid-type]
    params = []
    for path in doc_files():
        for line, code in blocks(path, "python"):
            name = f"{path.relative_to(ROOT)}:{line}"
            params.append(pytest.param(code, id=name))
    return params


PYTHON_BLOCKS = _python_blocks()


def test_there_are_runnable_blocks_in_readme_and_every_guide() -> None:
    ids = [p.id for p in PYTHON_BLOCKS]
    assert any(i.startswith("README.md:") for i in ids)
    for guide in sorted((DOCS / "guides").glob("*.md")):
        name = str(guide.relative_to(ROOT))
        if guide.stem in ("cli",):  # shell commands only
            continue
        assert any(i.startswith(name + ":") for i in ids), f"{name} has no runnable block"


@pytest.mark.parametrize("code", PYTHON_BLOCKS)
def test_python_block_runs(code: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    if "DATABASE_URL" in code:
        env["DATABASE_URL"] = request.getfixturevalue("postgres_dsn")
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"block failed:\n{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


# README.md


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_has_the_two_test_suite_lines() -> None:
    lines = _readme().splitlines()
    assert "python -m pip install nox" in lines
    assert "nox -s tests" in lines
    assert lines.index("nox -s tests") == lines.index("python -m pip install nox") + 1


def test_readme_quickstart_command_is_literal() -> None:
    assert "python -m pip install -e . && python examples/quickstart.py" in _readme()


def _transcript() -> list[tuple[str, list[str]]]:
    """(command, output lines) for each ``$ python examples/quickstart.py...``
    prompt in README.md's console blocks."""
    runs: list[tuple[str, list[str]]] = []
    for _, block in blocks(ROOT / "README.md", "console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                runs.append((line[2:], []))
            elif runs:
                runs[-1][1].append(line)
    return [(cmd, out) for cmd, out in runs if cmd.startswith("python examples/quickstart.py")]


def test_readme_quickstart_transcript_matches_real_output(tmp_path: Path) -> None:
    """Run the transcript's commands in order, in a clean directory (so a
    fresh SQLite file), and compare each output with the README."""
    runs = _transcript()
    assert len(runs) >= 2, "README should show the first run and the resumed run"
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "quickstart.py").write_bytes((ROOT / "examples" / "quickstart.py").read_bytes())
    for command, expected in runs:
        argv = command.split()
        assert argv[0] == "python"
        proc = subprocess.run(
            [sys.executable, *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == expected, f"output of {command!r} differs"


# links and navigation

_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files(path: Path) -> None:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    for target in _LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_every_page_is_in_the_mkdocs_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    in_nav = set(re.findall(r":\s+(\S+\.md)\s*$", config, re.MULTILINE))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == in_nav
