"""Run the benchmark workloads on pregelkit and on LangGraph, and report.

Every measurement is one fresh interpreter running ``benchmarks/workloads.py``
once. pregelkit and LangGraph live in two different virtual environments
(``--pregelkit-python`` and ``--langgraph-python``), so their imports cannot
interfere. Each round runs every (workload, N) on both libraries back to back,
alternating which one goes first; the reported figure is the median over the
rounds. A run that fails (an exception, a crash, a timeout) is recorded and
shown as ``failed: <error>``.

Usage::

    nox -s bench                      # both venvs, full suite, writes docs/benchmarks.md
    nox -s bench -- --quick           # smoke run: small N, one round, writes nothing
    python benchmarks/run.py --pregelkit-python .venv/bin/python \\
        --langgraph-python /path/to/langgraph-venv/bin/python --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = HERE / "workloads.py"
LIBS = ("pregelkit", "langgraph")
TIMES = "\N{MULTIPLICATION SIGN}"

# Targets: ratio = langgraph time / pregelkit time, higher is better for pregelkit.
RATIO_TARGETS: dict[str, float] = {
    "fanout": 10.0,
    "chain": 10.0,
    "chain_memory": 10.0,
    "chain_sqlite_default": 10.0,
    "resume": 10.0,
    "async_fanout": 10.0,
    "pregel_chain": 5.0,
    "short_memory": 10.0,
    "short_sqlite": 10.0,
    "short_async_sqlite": 10.0,
}
ONE_SIZE = (
    "chain_memory",
    "chain_sqlite_default",
    "chain_sqlite",
    "resume",
    "async_fanout",
    "pregel_chain",
    "cached",
)
"""The workloads measured at one size (1,000; 100 with --quick) on both libraries."""
SHORT_RUNS = ("short_memory", "short_sqlite", "short_async_sqlite", "short_postgres")
IMPORT_TARGET_MS = 50.0
SCALING_TARGET = 1.5  # pregelkit per-task time at the largest N / at the smallest N
SQLITE_TARGET = 2.0  # pregelkit chain_sqlite_default / chain_memory at the same N
DASK_TARGET = 1.8  # CPU-bound fan-out: default executor time / DaskExecutor (2 processes) time

LABELS = {
    "fanout": "fan-out (sync tasks)",
    "chain": "chain (sequential tasks)",
    "chain_memory": "chain + InMemorySaver",
    "chain_sqlite_default": "chain + SqliteSaver (default durability)",
    "chain_sqlite": 'chain + SqliteSaver (durability="sync")',
    "resume": "resume replay after interrupt",
    "async_fanout": "async fan-out (ainvoke)",
    "pregel_chain": "Pregel chain of N nodes",
    "cached": "cached tasks (all hits)",
    "cpu_fanout": "CPU-bound fan-out, default executor",
    "cpu_fanout_dask": "CPU-bound fan-out, DaskExecutor (LocalCluster, 2 processes)",
    "short_memory": "short runs + InMemorySaver",
    "short_sqlite": "short runs + SqliteSaver",
    "short_async_sqlite": "short runs + AsyncSqliteSaver (ainvoke)",
    "short_postgres": "short runs + PostgresSaver",
    "import": "import `<lib>.func`",
    "store_sqlite_put": "SqliteStore.put",
    "store_sqlite_get": "SqliteStore.get (1,000 items)",
    "store_sqlite_search": "SqliteStore.search, filtered (1,000 items)",
    "store_sqlite_vector_search": "SqliteStore.search(query=), 1,000 vectors of 384 dims",
    "store_postgres_put": "PostgresStore.put",
    "store_postgres_get": "PostgresStore.get (1,000 items)",
    "store_postgres_search": "PostgresStore.search, filtered (1,000 items)",
    "store_postgres_vector_search": "PostgresStore.search(query=), 1,000 vectors of 384 dims",
}
STORE_KINDS = ("sqlite", "postgres")
UNITS = {
    "task": "µs/task",
    "replayed task": "µs/replayed task",
    "superstep": "µs/superstep",
    "run": "µs/run",
    "import": "ms",
    "op": "µs/call",
}


@dataclass(frozen=True)
class Case:
    workload: str
    n: int
    libs: tuple[str, ...]


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


@dataclass
class Outcome:
    samples: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: bool = False

    def median(self, key: str) -> float | None:
        values = [s[key] for s in self.samples if s.get(key) is not None]
        return statistics.median(values) if values else None

    def display_value(self) -> float | None:
        """The figure shown in the table: µs per unit, or ms for the import."""
        if not self.samples:
            return None
        return statistics.median(sample_value(s) for s in self.samples)

    def by_round(self) -> dict[int, float]:
        return {s["round"]: sample_value(s) for s in self.samples}


def sample_value(sample: dict[str, Any]) -> float:
    """One round's figure: µs per unit, or ms for the import."""
    if sample.get("per") == "import":
        return float(sample["seconds"]) * 1000
    return float(sample["us_per_unit"])


def paired_ratio(top: Outcome | None, bottom: Outcome | None) -> float | None:
    """The median over rounds of ``top / bottom`` within each round. A round
    runs the two back to back, so a slow phase of the machine slows both
    sides of that round's ratio, where it would move one side's median and
    not the other's (the same 300 short runs took 257 to 372 µs each from
    one round to the next on a shared 2-core VM)."""
    if top is None or bottom is None:
        return None
    a, b = top.by_round(), bottom.by_round()
    ratios = [a[r] / b[r] for r in a.keys() & b.keys() if b[r]]
    return statistics.median(ratios) if ratios else None


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
    env = {**os.environ, "BENCH_LIB": lib}
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


def fmt_value(outcome: Outcome | None) -> str:
    if outcome is None or outcome.skipped:
        return "not run"
    value = outcome.display_value()
    if value is None:
        return f"failed: {outcome.errors[0]}" if outcome.errors else "n/a"
    text = f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    if outcome.errors:
        text += f" ({len(outcome.errors)} failed: {outcome.errors[0]})"
    return text


def fmt_mem(outcome: Outcome | None) -> str:
    if outcome is None:
        return "—"
    value = outcome.median("peak_rss_delta_mb")
    return "—" if value is None else f"{value:,.1f}"


def ratio_of(results: dict[tuple[str, int, str], Outcome], case: Case) -> float | None:
    return paired_ratio(
        results.get((case.workload, case.n, "langgraph")),
        results.get((case.workload, case.n, "pregelkit")),
    )


def build_rows(cases: list[Case], results: dict[tuple[str, int, str], Outcome]) -> list[list[str]]:
    rows = []
    for case in cases:
        pk = results.get((case.workload, case.n, "pregelkit"))
        lg = results.get((case.workload, case.n, "langgraph")) if "langgraph" in case.libs else None
        ratio = ratio_of(results, case) if lg is not None else None
        unit_key = next(
            (o.samples[0].get("per") for o in (pk, lg) if o is not None and o.samples),
            "import" if case.workload == "import" else "task",
        )
        target = RATIO_TARGETS.get(case.workload)
        if case.workload == "import":
            pk_ms = pk.display_value() if pk else None
            target_text = f"pregelkit < {IMPORT_TARGET_MS:.0f} ms"
            met = "—" if pk_ms is None else ("yes" if pk_ms < IMPORT_TARGET_MS else "**no**")
        elif target is not None and "langgraph" in case.libs:
            target_text = f"≥ {target:g}{TIMES}"
            met = "—" if ratio is None else ("yes" if ratio >= target else "**no**")
        else:
            target_text, met = "—", "—"
        lg_text = fmt_value(lg) if "langgraph" in case.libs else "not run"
        rows.append(
            [
                LABELS.get(case.workload, case.workload),
                f"{case.n:,}" if case.n else "—",
                UNITS.get(str(unit_key), str(unit_key)),
                fmt_value(pk),
                lg_text,
                "—" if ratio is None else f"{ratio:,.1f}{TIMES}",
                target_text,
                met,
                fmt_mem(pk),
                fmt_mem(lg) if "langgraph" in case.libs else "—",
            ]
        )
    return rows


HEADER = [
    "workload",
    "N",
    "unit",
    "pregelkit",
    "langgraph",
    "ratio (lg/pk)",
    "target",
    "met?",
    "pk peak RSS Δ (MB)",
    "lg peak RSS Δ (MB)",
]


def extra_checks(
    cases: list[Case], results: dict[tuple[str, int, str], Outcome]
) -> list[list[str]]:
    """pregelkit-only targets: scaling with N, and SQLite durability overhead."""
    rows: list[list[str]] = []
    for w in ("fanout", "chain"):
        ns = sorted(c.n for c in cases if c.workload == w)
        if len(ns) < 2:
            continue
        rows.append(
            _ratio_row(
                f"{LABELS[w]}: per-task time at N={ns[-1]:,} / at N={ns[0]:,}",
                results.get((w, ns[-1], "pregelkit")),
                results.get((w, ns[0], "pregelkit")),
                SCALING_TARGET,
                at_least=False,
            )
        )
    for case in cases:
        if case.workload != "chain_sqlite_default":
            continue
        rows.append(
            _ratio_row(
                f"pregelkit chain + SqliteSaver / chain + InMemorySaver (default durability), "
                f"N={case.n:,}",
                results.get(("chain_sqlite_default", case.n, "pregelkit")),
                results.get(("chain_memory", case.n, "pregelkit")),
                SQLITE_TARGET,
                at_least=False,
            )
        )
    rows += _dask_check(cases, results)
    pk_import = results.get(("import", 0, "pregelkit"))
    ms = pk_import.display_value() if pk_import else None
    fastest = min((s["seconds"] for s in pk_import.samples), default=None) if pk_import else None
    rows.append(
        [
            "import `pregelkit.func` in a fresh interpreter (median; fastest round)",
            "—" if ms is None or fastest is None else f"{ms:.1f} ms; {fastest * 1000:.1f} ms",
            f"< {IMPORT_TARGET_MS:g} ms",
            "—" if ms is None else ("yes" if ms < IMPORT_TARGET_MS else "**no**"),
        ]
    )
    return rows


def _dask_check(cases: list[Case], results: dict[tuple[str, int, str], Outcome]) -> list[list[str]]:
    return [
        _ratio_row(
            f"CPU-bound fan-out of {case.n:,}: default executor / DaskExecutor (2 processes)",
            results.get(("cpu_fanout", case.n, "pregelkit")),
            results.get(("cpu_fanout_dask", case.n, "pregelkit")),
            DASK_TARGET,
            at_least=True,
        )
        for case in cases
        if case.workload == "cpu_fanout_dask"
    ]


def _ratio_row(
    label: str, top: Outcome | None, bottom: Outcome | None, limit: float, *, at_least: bool
) -> list[str]:
    """A check row: ``top / bottom`` against ``limit`` (a floor or a ceiling)."""
    value = paired_ratio(top, bottom)
    met = value is not None and (value >= limit if at_least else value <= limit)
    return [
        label,
        "—" if value is None else f"{value:.2f}{TIMES}",
        f"{'≥' if at_least else '≤'} {limit:g}{TIMES}",
        "—" if value is None else ("yes" if met else "**no**"),
    ]


def text_table(header: list[str], rows: list[list[str]]) -> str:
    def clip(cell: str) -> str:
        return cell if len(cell) <= 60 else cell[:57] + "..."

    rows = [[clip(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(out)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def machine_info() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "load": load,
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical ({usable} usable)",
        "ram": ram,
        "os": f"{platform.system()} {platform.release()}",
    }


def pregelkit_revision() -> str:
    """The checked-out commit, read-only, and whether src/ has uncommitted edits."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha} (with uncommitted changes in src/)" if dirty else sha


def samples_table(results: dict[tuple[str, int, str], Outcome]) -> str:
    rows = []
    for (w, n, lib), o in results.items():
        if o.skipped:
            continue
        values = []
        for s in o.samples:
            v = s["seconds"] * 1000 if s.get("per") == "import" else s["us_per_unit"]
            values.append(f"{v:,.1f}")
        values += ["failed"] * len(o.errors)
        rows.append([LABELS.get(w, w), f"{n:,}" if n else "—", lib, ", ".join(values)])
    return md_table(["workload", "N", "library", "per-round values (same unit as above)"], rows)


def lib_info(results: dict[tuple[str, int, str], Outcome], lib: str) -> tuple[str, str]:
    for (_, _, name), outcome in results.items():
        if name == lib and outcome.samples:
            return outcome.samples[0].get("version", "?"), outcome.samples[0].get("python", "?")
    return "not run", "?"


def latency_rows(
    cases: list[Case], results: dict[tuple[str, int, str], Outcome]
) -> list[list[str]]:
    """p50/p99 of single runs for the short-run workloads (median over rounds)."""
    rows = []
    for case in cases:
        if case.workload not in SHORT_RUNS:
            continue
        for lib in case.libs:
            outcome = results.get((case.workload, case.n, lib))
            p50 = outcome.median("p50_us") if outcome else None
            p99 = outcome.median("p99_us") if outcome else None
            rows.append(
                [
                    LABELS.get(case.workload, case.workload),
                    lib,
                    "—" if p50 is None else f"{p50:,.0f}",
                    "—" if p99 is None else f"{p99:,.0f}",
                ]
            )
    return rows


def write_markdown(
    path: Path,
    args: argparse.Namespace,
    cases: list[Case],
    results: dict[tuple[str, int, str], Outcome],
    elapsed: float,
) -> None:
    info = machine_info()
    revision = pregelkit_revision()
    pk_version, pk_python = lib_info(results, "pregelkit")
    lg_version, lg_python = lib_info(results, "langgraph")
    failures = [
        f"- {LABELS.get(w, w)}, N={n:,}, {lib}: {len(o.errors)} of "
        f"{len(o.errors) + len(o.samples)} runs failed: `{o.errors[0]}`"
        for (w, n, lib), o in results.items()
        if o.errors
    ]
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"""# Benchmarks

pregelkit against LangGraph {lg_version} on the same workloads, written once in
`benchmarks/workloads.py` and run on each library by name. Generated by
`benchmarks/run.py` on {today}; the whole run took {elapsed / 60:.1f} minutes.

## Results

Median of {args.rounds} rounds. Times are wall-clock per task (or per superstep
for the Pregel chain, per replayed task for the resume); lower is better.
**ratio** is LangGraph's time divided by pregelkit's, within each round,
median over rounds (see Method): higher is better for pregelkit. "not run"
means the size is skipped on that library (LangGraph takes minutes at 100k
tasks). Peak RSS Δ is how much the process's peak resident set
grew during the timed run (see Method).

{md_table(HEADER, build_rows(cases, results))}

### Short runs: latency per run

{md_table(["workload", "library", "p50 µs", "p99 µs"], latency_rows(cases, results))}

### pregelkit-only targets

{md_table(["check", "value", "target", "met?"], extra_checks(cases, results))}
"""
    if failures:
        text += "\n### Failures\n\n" + "\n".join(failures) + "\n"
    text += f"""
## Machine

| | |
|---|---|
| CPU | {info["cpu"]} |
| cores | {info["cores"]} |
| RAM | {info["ram"]} |
| OS | {info["os"]} |
| load average (1, 5, 15 min) at start / end | {args.load_at_start} / {info["load"]} |
| Python (pregelkit venv) | {pk_python} |
| Python (LangGraph venv) | {lg_python} |
| pregelkit | {pk_version}, commit {revision} |
| langgraph | {lg_version} |

## Workloads

- **fan-out**: one entrypoint starts N trivial tasks and sums their results,
  `sum(f.result() for f in [t(i) for i in range(n)])`; no checkpointer.
- **chain**: N sequential task calls, each on the previous result
  (`x = inc(x).result()`); no checkpointer.
- **chain + InMemorySaver**: the chain with an `InMemorySaver`, default durability.
- **chain + SqliteSaver**: the chain with `SqliteSaver.from_conn_string(<temp file>)`,
  at the default durability and with `invoke(..., durability="sync")`. The
  two libraries' `"sync"` do different work: pregelkit's saves each task's
  result before the run goes on (one SQLite commit per task: the guarantee
  of `docs/storage.md`, "When the database fails"), LangGraph's saves task
  results in the background, as its `"async"` does, and waits only for the
  checkpoint at the end of each step (a functional chain is one step). So
  the `"sync"` row is reported without a target; the default-durability row,
  where both save task results in the background, carries the 10{TIMES} target.
- **resume replay**: an entrypoint (with an `InMemorySaver`) runs N sequential tasks
  and then calls `interrupt()`; the first invoke (untimed) stops there, the timed
  invoke resumes with `Command(resume=...)`, replaying the N saved results (the
  workload checks that no task runs again).
- **async fan-out**: `async def` tasks gathered with `asyncio.gather` in an async
  entrypoint, run with `ainvoke`.
- **Pregel chain**: the low-level API: N nodes
  `NodeBuilder().subscribe_only("c{{i}}").do(lambda x: x + 1).write_to("c{{i+1}}")`
  over `LastValue` channels, no checkpointer, so N supersteps; time per superstep.
- **cached tasks**: a fan-out of N tasks with a `CachePolicy` and an entrypoint
  `InMemoryCache`; the first run fills the cache (untimed), the timed run hits it
  for every task (checked).
- **short runs**: N runs of an entrypoint that calls one task, each `invoke`
  on a new thread (so each run starts from an empty checkpoint and ends with its
  saver calls done), with an `InMemorySaver`, a `SqliteSaver` (default
  durability), an `AsyncSqliteSaver` through `ainvoke`, or a `PostgresSaver`
  on one connection to a local PostgreSQL server (`BENCH_PG_DSN`, else a
  throwaway server started for the run; each library's tables are emptied
  first); time per run, and the median and 99th percentile of single runs.
  This is the cost a request handler pays per request.
- **CPU-bound fan-out** (pregelkit only): N tasks of pure-Python arithmetic
  (about 0.1 s of CPU each), gathered by one entrypoint, on the default
  executor (threads: one core at a time) and with `DaskExecutor` on a
  `LocalCluster` of 2 worker processes (started and warmed up untimed); the
  check row is their ratio. See [scale-out](scale-out.md#task-bodies-on-dask).
- **import**: wall time of `import <lib>.func` in a bare fresh interpreter
  (`python -c`, `time.perf_counter` around the import), median of
  {args.import_repeats} interpreters per round. Bytecode caching is on (the
  environment's `PYTHONDONTWRITEBYTECODE` is dropped for these interpreters) and one
  untimed import first writes the `.pyc` files, as on a user's machine.

## Method

- Every measurement runs in a fresh subprocess (`benchmarks/workloads.py`), so
  imports, caches and memory never carry over between workloads or libraries.
- pregelkit and LangGraph are installed in two separate virtual environments.
- In each process the workload is built, warmed up once on a tiny input (8 tasks)
  so lazy imports and first-call paths are not timed, then timed once with
  `time.perf_counter` (the CPU-bound fan-outs `CPU_PASSES` times, the
  median kept: one pass is a second, which another process's burst moves
  by tens of percent); results are checked for correctness.
- Each round runs every workload on both libraries back to back, alternating which
  goes first. Times are the median over rounds. A ratio, in the table and
  in the checks, is the median over rounds of each round's ratio: the two
  sides of a round ran a few seconds apart, while rounds run minutes apart
  and this shared machine's speed moves by a third between them, which a
  ratio of two medians would take from one side and not the other.
- Memory: `ru_maxrss` from `resource.getrusage` (the process's peak RSS), read just
  before and just after the timed run; the column is the difference, i.e. the extra
  peak memory the timed run needed over what build and warm-up had already used.
  (tracemalloc is not used: it would slow both libraries down.)
- A failing run (exception, crash or timeout after {args.timeout:.0f} s) is
  reported as `failed: <error>`; a case that times out is not retried in later
  rounds.

## All samples

Per-round values behind the medians, in run order. On a small or busy machine a single
round can be off by 2-3x; the targets are checked on the medians.

{samples_table(results)}

## Short runs: where a run's time goes

Counted with callgrind (`valgrind --tool=callgrind --separate-threads=yes`,
instructions of all threads, 250 runs minus 50 runs, per run), which a
loaded machine does not disturb as it does wall-clock time:

| short run (one task, new thread) | 805b5d0 | f954b57 | change |
|---|---|---|---|
| InMemorySaver, `invoke` | 1,318k | 1,302k | -1.2% |
| SqliteSaver, `invoke` | 2,115k | 2,067k | -2.3% |
| AsyncSqliteSaver, `ainvoke` | 2,417k | 2,298k | -4.9% |

What changed: checkpoint timestamps no longer build an aware `datetime` (3
per run, ~11k instructions each), a lone task run inline no longer makes the
`threading.Event` its step would wait on (its `Condition` raises three
`AttributeError`s), async runs no longer make and cancel a task and a timer
each to poll their thread's cancel mark (one timer per event loop reads the
marks of all its runs), and the SQL savers build the metadata's JSON copy
without a call per value.

Since `f954b57`, timed as wall-clock time per run in 10-16 pairs of fresh
processes, old and new code alternating (callgrind's counts of two
identical runs differ by up to 3%, more than these changes):
InMemorySaver 3-4.5% less, SqliteSaver 4.5% less, AsyncSqliteSaver
unchanged. What changed: the callback of a finished task no longer builds
the `threading.Event` its step would wait on just to set it (the change
above spared only the wait), a SqliteSaver group holds its rows back and
writes each statement once with all its rows, and the checkpoints' two JSON
columns use one C encoder built once (`JSONEncoder.encode` builds one per
call).

Since `124e197`, the save lane makes a run's cache saves after its group
of saver calls instead of inside it, a SQLite group that lost its
transaction refuses the calls that follow, and a SQLite saver records
which thread holds its connection (to refuse, rather than wait forever
for, a sync call on the thread of a paused async block). Measured the same
way against `124e197`, 16-24 pairs: short SqliteSaver runs 1.009 (new /
old, median of pairs), short InMemorySaver runs 0.996, chain +
InMemorySaver 0.996: no change a pair can tell from noise.

Where a SqliteSaver run's ~2.1M instructions go: the engine's share is
what the InMemorySaver run costs (~1.3M, of which ~80k is the garbage
collector's young-generation passes); the saver adds ~0.75M, of which the
`sqlite3` module's `execute`/`executemany` are ~0.47M (SQLite itself ~0.23M).
A run makes one write transaction (the saves queued at its end are one
group): `BEGIN IMMEDIATE`, 12 rows in 4 calls (one per table), `COMMIT`, after a read of the
thread's cancel mark and a read transaction for its (absent) checkpoint.
The commit appends ~15 pages of 4 KiB to the WAL (writes 4.2, attempts 3.3,
the blobs' key index 3.3, the checkpoints' key index 2.4, checkpoints 1.7,
blobs 1.2, the header page 0.7): each insert into a nearly full leaf
rebalances it with its siblings. Wall-clock time adds what instructions do
not show: ~40 system calls per run (two `pwrite`s per WAL page, the thread
lock's `open`/`fcntl`/`close`, WAL-index locks) and waits for the GIL,
which every SQLite call releases: a thread that wakes while a run is inside
one takes the GIL, and the run waits for it on the way back. The executor's
poller looked every 0.5 ms while runs came one after another and cost a
short SQLite run 10-15% that way (811 -> 736 µs per run, median of 8 A/B
process pairs); it now backs off to every 2 ms while the callers take their
work themselves. The attempt-start saver still looks every 2 ms while runs
record attempts. On a loaded 2-core machine `BEGIN IMMEDIATE` and `COMMIT`
take ~55 µs at the median and milliseconds at the 99th percentile.

How far 10{TIMES} is for a short run on SQLite: `python
benchmarks/sqlite_floor.py` records the SQLite calls of each run (10 since a
group writes each statement once, 14 before) and replays them with plain
`sqlite3` (the same SQL, rows, transactions and settings, no pregelkit
code): 162 µs per run, against 753 µs for the whole run in the same process
(2026-11-27, median of 5 rounds; 216 against 834 before the group change, on
a faster moment of this machine). LangGraph's run takes ~5,000 µs, so
10{TIMES} leaves ~500 µs, of which SQLite's own work takes a third made
alone, and nearer 60% inside a run (below); the engine (what an
InMemorySaver run costs, ~260-400 µs as the machine's speed goes) and the
saver's Python (encoding two checkpoints, ~45 µs, and the calls around each
statement) must fit in the rest, where they now take ~590 µs. No single call
dominates: the next steps are structural, not a hot spot. The largest is the
commit's ~15 WAL pages (30 `pwrite`s), most of them from inserting under a
new thread id into the b-trees keyed by thread id first, where an insert
lands in a nearly full leaf and rebalances it. Thread keys that grow with
time would not change much: the same replay with thread ids renamed to
increasing numbers writes 11.9 pages per run instead of 15.0 and takes ~15%
less of SQLite's time, so a schema keyed that way (with a migration of every
existing database) was not made.

Inside a run, SQLite's statements take two to three times as long as the
same statements made alone (an insert 13-17 µs against ~6 µs, `BEGIN
IMMEDIATE` 10-13 µs against ~6 µs, timed around each call): between them
the engine's Python work evicts SQLite's code and pages from the CPU's
caches. Timed that way in 2,000 runs, a run's SQLite calls take ~290-330
µs, the commit ~90-115 µs of it (its ~30 `pwrite`s). Writing each
statement of a group once (above) is what came of this; the rest was
measured and left:

- Handing the end of a run's saves to a pool thread, so that SQLite runs
  on the other core with warm caches: slower (650-900 -> 980-1,030 µs per
  run), the hand-off costs more than the caches give.
- One read transaction for the cancel mark and the checkpoint: ~10 µs
  (~2% of a run), for a saver call that reads both; not made.
- Keeping the thread lock's descriptors open between runs (unlocking with
  `F_UNLCK` instead of closing): 5.5 -> 3.4 µs per run timed alone, under
  1% of a run; left out, because a kept descriptor is shared with forked
  children and keeps locking a deleted and recreated lock file's old inode.

## Recording attempts (timelines)

Every task attempt of a run with a checkpointer is recorded for timelines
(`Pregel.get_timeline`). Without a checkpointer (the fan-out and chain rows
above) nothing is recorded: a run pays one call to ask whether anything
traces it, a task one test. With one, `python benchmarks/attempts_ab.py`
counts the instructions (callgrind) of each workload with recording on and
off, per task, start-up excluded. Wall-clock A/B runs of a few percent drown
in a shared machine's noise; instruction counts do not depend on what else
runs. Five A/B pairs per workload (N = 400 tasks, 300 on SQLite), median:

| workload | without (instr/task) | with | overhead, median | each pair | at most |
|---|---|---|---|---|---|
| chain + InMemorySaver | 203,314 | 205,900 | 1.3% | 0.3%, 0.7%, 1.3%, 2.7%, 2.8% | 5% |
| fan-out + InMemorySaver | 229,360 | 239,383 | 4.4% | 2.7%, 4.2%, 4.4%, 5.9%, 7.5% | 5% |
| chain + SqliteSaver (sync) | 334,013 | 378,307 | 13.3% | 12.0%, 12.7%, 13.3%, 13.4%, 13.4% | 15% |

Measured 2026-11-26 on the 2-core machine below. The pairs of a workload
differ because the threads that wait on a clock (the executor's hand-off,
the cancel-mark watcher) run as often as wall time, which valgrind
stretches, allows; the fan-out, with the most threads, differs most. An
attempt costs its start (a 6-field tuple and a clock read, in the thread
that runs it), its end (a 15-field row, built and taken by the task's own
`put_writes` in one call) and the row in the saver; on SQLite the task's
commit writes a second table (one more b-tree page in the WAL), most of its
share. A start is saved on its own only when the attempt still runs 2 ms
after it began, so quick tasks pay no extra commit.
`python benchmarks/attempts_overhead.py` times the run's side alone in CPU
time (~0.7 µs per attempt).

## Reproduce

```bash
pip install nox
nox -s bench                 # full run; rewrites docs/benchmarks.md
nox -s bench -- --quick      # smoke run: small N, one round, writes nothing
nox -s bench -- --rounds 3   # any benchmarks/run.py option goes after --
```

The session installs pregelkit (`pip install -e .`) into one venv and
`langgraph=={lg_version}` with `langgraph-checkpoint-sqlite` into another, then runs
`python benchmarks/run.py --pregelkit-python <venv1> --langgraph-python <venv2>`.
The PostgreSQL workloads use the server `BENCH_PG_DSN` names (a database they may
empty); without it, a throwaway server is started where PostgreSQL is installed
(`--no-postgres-server` skips them instead).
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


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

    results: dict[tuple[str, int, str], Outcome] = {}
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
                    if res.get("per") == "import":
                        shown = f"{res['seconds'] * 1000:.1f} ms"
                    else:
                        shown = f"{res['us_per_unit']:.1f} µs/{res['per']}"
                print(
                    f"[round {rnd + 1}/{args.rounds}] {case.workload:13} n={case.n:<7} "
                    f"{lib:9} {shown}  ({took:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    elapsed = time.perf_counter() - started

    print()
    print(text_table(HEADER, build_rows(cases, results)))
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
