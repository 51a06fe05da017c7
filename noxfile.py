"""Developer tasks: ``nox -s tests``, ``lint``, ``typecheck``, ``bench``, ``docs``, ``compat``.

Needs only ``pip install nox``. Plain ``nox`` runs tests, lint and typecheck.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv" if shutil.which("uv") else "venv"
nox.options.sessions = ["tests", "lint", "typecheck"]

ROOT = Path(__file__).resolve().parent
LINT_PATHS = ["src", "tests", "benchmarks", "examples", "tools", "noxfile.py"]

# The LangGraph release pregelkit is compared with, and the SQLite saver
# release that goes with it.
LANGGRAPH = "langgraph==1.2.22"
LANGGRAPH_SQLITE = "langgraph-checkpoint-sqlite==3.1.2"
LANGGRAPH_POSTGRES = "langgraph-checkpoint-postgres==3.2.0"
# All four packages whose test suites ``nox -s compat`` runs (the savers'
# releases that go with LangGraph 1.2.22); tools/compat/run.py names the same.
COMPAT_PACKAGES = [
    LANGGRAPH,
    "langgraph-checkpoint==4.3.2",
    LANGGRAPH_SQLITE,
    "langgraph-checkpoint-postgres==3.2.0",
]


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if sys.platform == "win32" else "bin") / name


@nox.session
def tests(session: nox.Session) -> None:
    """Install pregelkit with its test extras and run pytest (posargs go to pytest).

    Two pytest-xdist workers, which take about half the time one process
    does on two cores; ``nox -s tests -- -n 0`` (or ``-p no:xdist``) runs
    the suite in one process, and a later ``-n N`` replaces the two."""
    session.install(".[test]")
    serial = any(arg.replace(" ", "") in ("no:xdist", "-pno:xdist") for arg in session.posargs)
    session.run("pytest", "-q", *([] if serial else ["-n", "2"]), *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, and the import layers (lint-imports,
    contract in pyproject.toml)."""
    session.install("ruff", "import-linter", "-e", ".")
    session.run("ruff", "check", *LINT_PATHS)
    session.run("ruff", "format", "--check", *LINT_PATHS)
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict (configured in pyproject.toml), on src and on the examples:
    they are what users copy, so their types must hold too."""
    session.install("mypy", "-e", ".[test]")
    session.run("mypy", "src", "examples", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """pregelkit vs LangGraph benchmarks, then the worker fleet's
    (benchmarks/fleet.py), runs that wait (benchmarks/waiting.py) and retention
    (benchmarks/retention.py);
    writes docs/benchmarks.md.

    pregelkit goes into this session's venv; LangGraph into a second venv
    beside it, so the two libraries' imports cannot interfere. Options after
    ``--`` go to benchmarks/run.py (e.g. ``nox -s bench -- --quick``).
    """
    session.install("-e", ".[postgres,dask]")
    lg_venv = Path(session.virtualenv.location).parent / "bench-langgraph"
    lg_python = _bin(lg_venv, "python")
    if not lg_python.exists():
        session.run("python", "-m", "venv", str(lg_venv))
    session.run(
        str(lg_python),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        LANGGRAPH,
        LANGGRAPH_SQLITE,
        LANGGRAPH_POSTGRES,
        "psycopg[binary,pool]",
        external=True,
    )
    session.run(
        "python",
        str(ROOT / "benchmarks" / "run.py"),
        "--pregelkit-python",
        str(_bin(Path(session.virtualenv.location), "python")),
        "--langgraph-python",
        str(lg_python),
        *session.posargs,
    )
    # the worker fleet (issue 15): its own section of docs/benchmarks.md
    session.run(
        "python",
        str(ROOT / "benchmarks" / "fleet.py"),
        *(["--quick"] if "--quick" in session.posargs else []),
    )
    # runs that wait (issue 28): an idle fleet's cost, wake-up delays; its own section
    session.run(
        "python",
        str(ROOT / "benchmarks" / "waiting.py"),
        *(["--quick"] if "--quick" in session.posargs else []),
    )
    # retention (issue 29): prune speed on a million checkpoints, workers' latency meanwhile
    session.run(
        "python",
        str(ROOT / "benchmarks" / "retention.py"),
        *(["--quick"] if "--quick" in session.posargs else []),
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs, warnings as errors."""
    session.install("mkdocs", "mkdocs-material", "mkdocstrings[python]", "ruff", "-e", ".[dask]")
    # NO_MKDOCS_2_WARNING: mkdocs-material's banner about its own future, not a build warning
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


# What LangGraph's test suites import besides LangGraph itself; installed on
# both sides of ``nox -s compat``.
COMPAT_TEST_DEPS = [
    "pytest", "pytest-asyncio", "pytest-mock", "pytest-retry", "pytest-timeout", "syrupy",
    "anyio", "httpx", "redis", "psycopg[binary,pool]", "pycryptodome", "numpy", "pandas",
    "dataclasses-json", "aiosqlite", "ormsgpack", "requests", "orjson",
]  # fmt: skip


@nox.session
def compat(session: nox.Session) -> None:
    """LangGraph's own test suites on LangGraph and, renamed, on pregelkit;
    writes docs/compat.md (see tools/compat/run.py). Not a default session:
    it downloads LangGraph's sdists and takes a while.

    pregelkit goes into this session's venv; LangGraph into a second venv
    beside it. Options after ``--`` go to tools/compat/run.py (e.g.
    ``nox -s compat -- --only langgraph-checkpoint-sqlite``).
    """
    session.install("-e", ".[postgres,encryption]", *COMPAT_TEST_DEPS)
    lg_venv = Path(session.virtualenv.location).parent / "compat-langgraph"
    lg_python = _bin(lg_venv, "python")
    if not lg_python.exists():
        session.run("python", "-m", "venv", str(lg_venv))
    session.run(
        str(lg_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        *COMPAT_PACKAGES, "langgraph-checkpoint-conformance", *COMPAT_TEST_DEPS,
        external=True,
    )  # fmt: skip
    session.run(
        "python",
        str(ROOT / "tools" / "compat" / "run.py"),
        "--langgraph-python",
        str(lg_python),
        "--pregelkit-python",
        str(_bin(Path(session.virtualenv.location), "python")),
        *session.posargs,
    )
