"""Runs LangGraph's own test suites on LangGraph and, renamed, on pregelkit,
and writes the measured figures to docs/compat.md.

``nox -s compat`` is the way in (it builds the two virtual environments);
run by hand::

    python tools/compat/run.py --langgraph-python LG/bin/python \\
        --pregelkit-python PK/bin/python [--only langgraph-checkpoint-sqlite]
    python tools/compat/run.py --report-only   # rewrite the page from the cache

The page covers every package measured in the cache: ``--only`` re-measures
one and keeps the others' last results.

The published sdists are downloaded into ``--cache`` (default
``.compat-cache``, gitignored): nothing of LangGraph is committed. Each
package's ``tests/`` runs twice, with the same pytest settings and the same
throwaway PostgreSQL server: as published, on LangGraph, then renamed, on
pregelkit, only the tests that passed on LangGraph and are in scope
(classify.py says which). Harness changes, the same on both sides: the
hard-coded ``localhost:5441``/``5442`` PostgreSQL addresses point at the
throwaway server.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from classify import classify  # noqa: E402
from rename import copy_renamed  # noqa: E402
from report import Outcome, write_report  # noqa: E402

# The LangGraph release pregelkit is measured against, and the saver
# releases that go with it (its lock file's versions, as published).
PACKAGES = {
    "langgraph": "langgraph==1.2.22",
    "langgraph-checkpoint": "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-sqlite": "langgraph-checkpoint-sqlite==3.1.2",
    "langgraph-checkpoint-postgres": "langgraph-checkpoint-postgres==3.2.0",
}
_PG_ADDRESS = re.compile(r"localhost:544\d")
_DROPPED_ADDOPTS = {"--full-trace", "-vv", "--snapshot-warn-unused", "--strict-config"}


def _download(spec: str, cache: Path, python: str) -> Path:
    """The sdist of ``spec``, extracted under ``cache/src``."""
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    name, version = spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}"
    archive = sdists / f"{stem}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", "--disable-pip-version-check", spec, "-d", str(sdists)],
            check=True,
        )  # fmt: skip
    src = cache / "src" / stem
    if not src.exists():
        with tarfile.open(archive) as tar:
            tar.extractall(cache / "src", filter="data")
        extracted = cache / "src" / f"{name}-{version}"
        if extracted.exists() and not src.exists():
            extracted.rename(src)
    return src


def _pytest_ini(src: Path) -> str:
    """The package's own pytest settings, less reporting options."""
    options = tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))
    ini = options.get("tool", {}).get("pytest", {}).get("ini_options", {})
    lines = ["[pytest]"]
    for key, value in ini.items():
        if key == "addopts":
            kept = [o for o in str(value).split() if o not in _DROPPED_ADDOPTS]
            kept = [o for o in kept if not o.startswith("--durations")]
            value = " ".join(kept)
        elif isinstance(value, list):
            value = "\n    ".join(["", *map(str, value)])
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _prepare(src: Path, dest: Path, *, renamed: bool, pg_address: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    tests = dest / "tests"
    if renamed:
        copy_renamed(src / "tests", tests)
    else:
        if tests.exists():
            shutil.rmtree(tests)
        shutil.copytree(src / "tests", tests)
    for path in tests.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        moved = _PG_ADDRESS.sub(pg_address, text)
        if moved != text:
            path.write_text(moved, encoding="utf-8")
    (dest / "pytest.ini").write_text(_pytest_ini(src), encoding="utf-8")


def _pytest(
    side: str, python: str, workdir: Path, env: dict[str, str], plugins: list[str], timeout: int
) -> dict[str, dict[str, str]]:
    results = workdir / "results.json"
    results.unlink(missing_ok=True)
    cmd = [python, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-v", "--tb=line",
           "--timeout", str(timeout), "--continue-on-collection-errors"]  # fmt: skip
    for plugin in plugins:
        cmd += ["-p", plugin]
    run_env = {**os.environ, **env, "COMPAT_RESULTS": str(results), "PYTHONPATH": str(HERE)}
    started = time.monotonic()
    log = workdir / "pytest.log"  # written as the tests run: `tail -f` it to follow
    with log.open("w", encoding="utf-8") as out:
        subprocess.run(cmd, cwd=workdir, env=run_env, stdout=out, stderr=subprocess.STDOUT)
    lines = log.read_text(encoding="utf-8").strip().splitlines() or ["(no output)"]
    print(f"  on {side}: {lines[-1]} ({time.monotonic() - started:.0f} s)", flush=True)
    if not results.exists():
        raise SystemExit(f"pytest produced no results in {workdir}; see {workdir / 'pytest.log'}")
    loaded: dict[str, dict[str, str]] = json.loads(results.read_text(encoding="utf-8"))
    return loaded


def _pg_server_module() -> object:
    spec = importlib.util.spec_from_file_location("_pg_server", ROOT / "tests" / "_pg_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measure(args: argparse.Namespace, cache: Path) -> None:
    pg = _pg_server_module()
    with pg.postgres_server() as dsn:  # type: ignore[attr-defined]
        address = dsn.split("@", 1)[1].split("/", 1)[0]
        for package, spec in PACKAGES.items():
            if args.only and package not in args.only:
                continue
            print(f"{spec}:", flush=True)
            src = _download(spec, cache, args.langgraph_python)
            tests = classify(src / "tests")
            run = cache / "run" / package
            lg_dir, pk_dir = run / "langgraph", run / "pregelkit"
            _prepare(src, lg_dir, renamed=False, pg_address=address)
            _prepare(src, pk_dir, renamed=True, pg_address=address)
            in_scope = sorted(
                f"{path}::{name}" for (path, name), info in tests.items() if not info.out_of_scope
            )
            (run / "select.txt").write_text("\n".join(in_scope) + "\n", encoding="utf-8")
            env = {"COMPAT_SELECT": str(run / "select.txt")}
            earlier = lg_dir / "results.json"
            if args.pregelkit_only and earlier.exists():
                lg = json.loads(earlier.read_text(encoding="utf-8"))
            else:
                lg = _pytest(
                    "LangGraph", args.langgraph_python, lg_dir, env, ["compat_plugin"], args.timeout
                )
            passed = sorted(n for n, r in lg.items() if r["outcome"] == "passed")
            (run / "passed.txt").write_text("\n".join(passed) + "\n", encoding="utf-8")
            env["COMPAT_NODEIDS"] = str(run / "passed.txt")
            _pytest(
                "pregelkit",
                args.pregelkit_python,
                pk_dir,
                env,
                ["missing_names", "compat_plugin"],
                args.timeout,
            )


def _outcomes(cache: Path) -> dict[str, list[Outcome]]:
    """Every package measured in ``cache`` (by this run or, with ``--only``,
    an earlier one)."""
    outcomes: dict[str, list[Outcome]] = {}
    for package, spec in PACKAGES.items():
        name, version = spec.split("==")
        src = cache / "src" / f"{name.replace('-', '_')}-{version}"
        run = cache / "run" / package
        sides = [run / side / "results.json" for side in ("langgraph", "pregelkit")]
        if not (src.exists() and all(p.exists() for p in sides)):
            continue
        lg, pk = (json.loads(p.read_text(encoding="utf-8")) for p in sides)
        outcomes[package] = [Outcome.of(package, spec, classify(src / "tests"), lg, pk)]
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langgraph-python")
    parser.add_argument("--pregelkit-python")
    parser.add_argument("--cache", type=Path, default=ROOT / ".compat-cache")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "compat.md")
    parser.add_argument("--only", action="append", choices=sorted(PACKAGES))
    parser.add_argument("--timeout", type=int, default=60, help="seconds per test")
    parser.add_argument(
        "--pregelkit-only",
        action="store_true",
        help="reuse the cached LangGraph results; run only the pregelkit side",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the page from the cached results"
    )
    args = parser.parse_args()
    cache: Path = args.cache.resolve()
    if not args.report_only:
        if not (args.langgraph_python and args.pregelkit_python):
            parser.error("--langgraph-python and --pregelkit-python are needed to measure")
        # A terminated run still stops its PostgreSQL server (the finally blocks run).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        _measure(args, cache)
    write_report(args.out, _outcomes(cache))


if __name__ == "__main__":
    main()
