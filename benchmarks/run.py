"""Run the benchmark workloads on pregelkit and on LangGraph, and report.

Every measurement is one fresh interpreter running ``benchmarks/workloads.py``
once. pregelkit and LangGraph live in two different virtual environments
(``--pregelkit-python`` and ``--langgraph-python``), so their imports cannot
interfere. Each round runs every (workload, N) on both libraries back to back,
alternating which one goes first; the reported figure is the median over the
rounds. A run that fails (an exception, a crash, a timeout) is recorded and
shown as ``failed: <error>``. The tables are built in ``report_tables.py``
(targets, ratios, the short runs' percentiles and wire counts) and written
to ``docs/benchmarks.md`` by ``report_markdown.py``.

Usage::

    nox -s bench                      # both venvs, full suite, writes docs/benchmarks.md
    nox -s bench -- --quick           # smoke run: small N, one round, writes nothing
    python benchmarks/run.py --pregelkit-python .venv/bin/python \\
        --langgraph-python /path/to/langgraph-venv/bin/python --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from report_markdown import machine_info, write_markdown
from report_tables import (
    HEADER,
    SHORT_HEADER,
    SHORT_RUNS,
    WIRE_HEADER,
    Case,
    Outcome,
    Results,
    build_rows,
    extra_checks,
    sample_value,
    short_rows,
    text_table,
    wire_rows,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = HERE / "workloads.py"
LIBS = ("pregelkit", "langgraph")

ONE_SIZE = (
    "chain_memory",
    "chain_sqlite_default",
    "chain_sqlite",
    "resume",
    "async_fanout",
    "pregel_chain",
    "pregel_chain_cold",
    "pregel_chain_cold_nowarmup",
    "cached",
)
"""The workloads measured at one size (1,000; 100 with --quick) on both libraries."""
STORE_KINDS = ("sqlite", "postgres")


def plan(quick: bool) -> list[Case]:
    both = LIBS
    if quick:
        small = 100
        return [
            Case("fanout", small, both),
            Case("fanout", 1000, ("pregelkit",)),
            Case("chain", small, both),
            Case("chain", 1000, ("pregelkit",)),
            *(Case(w, small, both) for w in ONE_SIZE),
            *(Case(w, 50, both) for w in _short_runs()),
            Case("import", 0, both),
            *_store_cases(100, 2),
            *_dask_cases(4),
        ]
    cases: list[Case] = []
    for w in ("fanout", "chain"):
        cases += [
            Case(w, 1_000, both),
            Case(w, 10_000, both),
            Case(w, 100_000, ("pregelkit",)),  # LangGraph takes minutes here
        ]
    cases += [Case(w, 1_000, both) for w in ONE_SIZE]
    cases += [Case(w, 300, both) for w in _short_runs()]
    cases.append(Case("import", 0, both))
    cases += _store_cases(1_000, 10)
    cases += _dask_cases(16)
    return cases


def _short_runs() -> tuple[str, ...]:
    """The short-run workloads; the PostgreSQL one only with BENCH_PG_DSN."""
    if os.environ.get("BENCH_PG_DSN"):
        return SHORT_RUNS
    return tuple(w for w in SHORT_RUNS if w != "short_postgres")


def _dask_cases(n: int) -> list[Case]:
    """pregelkit only: the same CPU-bound fan-out on threads and on Dask."""
    return [Case(w, n, ("pregelkit",)) for w in ("cpu_fanout", "cpu_fanout_dask")]


def _store_cases(n: int, searches: int) -> list[Case]:
    """Store workloads; PostgreSQL ones only with BENCH_PG_DSN (a database
    they may fill and empty). LangGraph's vector search needs sqlite-vec /
    pgvector, which may be missing: it then shows as failed."""
    kinds = [k for k in STORE_KINDS if k == "sqlite" or os.environ.get("BENCH_PG_DSN")]
    return [
        Case(f"store_{kind}_{what}", searches if what == "vector_search" else n, LIBS)
        for kind in kinds
        for what in ("put", "get", "search", "vector_search")
    ]


def run_workload(
    python: str, lib: str, case: Case, timeout: float, import_repeats: int
) -> dict[str, Any]:
    cmd = [
        python,
        str(WORKLOADS),
        "--lib",
        lib,
        "--workload",
        case.workload,
        "--n",
        str(case.n),
        "--import-repeats",
        str(import_repeats),
    ]
    env = {**_user_env(), "BENCH_LIB": lib}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT), env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s", "timeout": True}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {"error": f"crashed (exit {proc.returncode}): {tail}"[:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _user_env() -> dict[str, str]:
    """The environment minus ``PYTHONDONTWRITEBYTECODE``: a sandbox or CI may
    set it, and then every fresh process compiles each module from source,
    which a user's install (pip writes the .pyc files) never does; it would
    charge the cold workloads for compiling, not for importing."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_bytecode(python: str, lib: str) -> None:
    """Write the .pyc files of ``lib``'s packages as ``pip install`` does, so
    the first timed process does not pay for compiling (an editable install
    of pregelkit has none until something imports it with caching on)."""
    code = (
        "import compileall, importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    for path in importlib.import_module(name).__path__:\n"
        "        compileall.compile_dir(path, quiet=1)\n"
    )
    packages = [lib] if lib == "pregelkit" else ["langgraph", "langchain_core"]
    subprocess.run(
        [python, "-c", code, *packages], check=True, capture_output=True, env=_user_env()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="pregelkit vs LangGraph benchmarks",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    parser.add_argument("--pregelkit-python", default=sys.executable)
    parser.add_argument(
        "--langgraph-python",
        default=None,
        help="interpreter of a venv with langgraph installed; without it LangGraph is skipped",
    )
    parser.add_argument("--rounds", type=int, default=None, help="default 5 (1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small N, one round, no docs write")
    parser.add_argument(
        "--output",
        default=None,
        help="markdown report path (default docs/benchmarks.md; --quick writes none unless given)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only, write no report")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    parser.add_argument("--import-repeats", type=int, default=None)
    parser.add_argument(
        "--only", action="append", default=[], help="run only this workload (repeatable)"
    )
    parser.add_argument(
        "--json",
        default=None,
        help="write raw samples here (default benchmarks/.results/latest.json; quick: none)",
    )
    parser.add_argument(
        "--no-postgres-server",
        action="store_true",
        help="without BENCH_PG_DSN, skip the PostgreSQL workloads instead of starting a "
        "throwaway server (tests/_pg_server.py) for them",
    )
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.import_repeats is None:
        args.import_repeats = 3 if args.quick else 7
    with _postgres(not args.no_postgres_server):
        return _run(args)


@contextlib.contextmanager
def _postgres(start: bool) -> Iterator[None]:
    """BENCH_PG_DSN for the PostgreSQL workloads: the caller's, or a throwaway
    server's where PostgreSQL is installed; without either they are skipped."""
    if os.environ.get("BENCH_PG_DSN") or not start:
        yield
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from _pg_server import PostgresUnavailable, postgres_server

    try:
        server = postgres_server()
        dsn = server.__enter__()
    except PostgresUnavailable as exc:
        print(f"PostgreSQL workloads skipped: {exc}", file=sys.stderr)
        yield
        return
    os.environ["BENCH_PG_DSN"] = dsn
    try:
        yield
    finally:
        del os.environ["BENCH_PG_DSN"]
        server.__exit__(None, None, None)


def _run(args: argparse.Namespace) -> int:
    pythons = {"pregelkit": args.pregelkit_python, "langgraph": args.langgraph_python}
    cases = plan(args.quick)
    if args.only:
        cases = [c for c in cases if c.workload in args.only]

    results: Results = {}
    for case in cases:
        for lib in case.libs:
            results[(case.workload, case.n, lib)] = Outcome(skipped=pythons[lib] is None)

    args.load_at_start = machine_info()["load"]
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if busy > 0.5:
        print(
            f"warning: load average is {busy:.2f} before starting; other processes will add "
            "noise to the timings",
            file=sys.stderr,
        )
    for lib, python in pythons.items():
        if python is not None:
            compile_bytecode(python, lib)
    started = time.perf_counter()
    for rnd in range(args.rounds):
        order = LIBS if rnd % 2 == 0 else LIBS[::-1]
        for case in cases:
            for lib in order:
                if lib not in case.libs or pythons[lib] is None:
                    continue
                outcome = results[(case.workload, case.n, lib)]
                if any("timeout" in e for e in outcome.errors):
                    continue
                t0 = time.perf_counter()
                res = run_workload(pythons[lib], lib, case, args.timeout, args.import_repeats)
                took = time.perf_counter() - t0
                if "error" in res:
                    outcome.errors.append(res["error"])
                    shown = f"FAILED: {res['error']}"
                else:
                    outcome.samples.append({**res, "round": rnd})
                    unit = "ms" if res.get("per") in ("import", "invoke") else "µs"
                    shown = f"{sample_value(res):.1f} {unit}/{res['per']}"
                print(
                    f"[round {rnd + 1}/{args.rounds}] {case.workload:20} n={case.n:<7} "
                    f"{lib:9} {shown}  ({took:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    elapsed = time.perf_counter() - started

    print()
    print(text_table(HEADER, build_rows(cases, results)))
    print()
    for header, rows in ((SHORT_HEADER, short_rows), (WIRE_HEADER, wire_rows)):
        if table := rows(cases, results):
            print()
            print(text_table(header, table))
    print()
    print(text_table(["check", "value", "target", "met?"], extra_checks(cases, results)))
    for (w, n, lib), o in results.items():
        for err in sorted(set(o.errors)):
            print(f"failure: {w} n={n} {lib}: {err}")
    print(f"\ntotal time: {elapsed / 60:.1f} min")

    write_docs = not args.no_write and (not args.quick or args.output is not None)
    if write_docs:
        out = Path(args.output) if args.output else ROOT / "docs" / "benchmarks.md"
        write_markdown(out, args, cases, results, elapsed)
        print(f"wrote {out}")
    raw = args.json or (None if args.quick else str(HERE / ".results" / "latest.json"))
    if raw:
        Path(raw).parent.mkdir(parents=True, exist_ok=True)
        dump = [
            {"workload": w, "n": n, "lib": lib, "samples": o.samples, "errors": o.errors}
            for (w, n, lib), o in results.items()
        ]
        Path(raw).write_text(json.dumps(dump, indent=1), encoding="utf-8")
        print(f"wrote {raw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
