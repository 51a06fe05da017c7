"""Where a short run's time goes: a per-phase table per saver.

    python benchmarks/anatomy.py                       # memory, sqlite, postgres
    python benchmarks/anatomy.py --savers memory sqlite --runs 400 --rounds 5
    python benchmarks/anatomy.py --alloc               # allocations (anatomy_alloc.py)
    python benchmarks/anatomy.py --flame docs/flame    # py-spy flame graphs (SVG)

A short run is one ``@entrypoint`` calling one ``@task`` on a new thread id
(as in ``short_runs.py``). The script wraps the methods a run passes
through (``PHASES``) with timers of its own, each charging a call's time
to its label minus what wrappers inside it took (exclusive time, wall and
the thread's CPU), so the labels add up to the whole run. Whatever no
wrapper covers lands in the outermost one, ``invoke`` ("unwrapped code").
Statements (``sqlite3``'s ``execute``/``executemany``, psycopg's
``execute``/``sync``) and encoding are charged to the phase they are made
in. The wrappers cost time of their own: the script measures a wrapper's
cost on an empty function and prints the run without them beside.

Rounds alternate runs without and with the wrappers, so a change in the
machine's load moves both. Each label's figure is the median over the
wrapped runs; the "sum" row is the sum of those medians, the "run" rows
medians of whole runs.

PostgreSQL: ``BENCH_PG_DSN``, or a throwaway server (``tests/_pg_server.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

SAVERS = ("memory", "sqlite", "postgres")
INHERIT = ""  # a label's phase: the phase of the label it is called under

# (phase, label, target, kind): target is "module:Qualified.name" under
# pregelkit.pregel, or "saver:name"/"serde:name" for the run's saver and its serde;
# kind: "call", "gen" (a generator, each resumption timed), "cm" (a function
# returning a context manager: its __enter__ and __exit__ timed; label
# "enter|exit").
PHASES: tuple[tuple[str, str, str, str], ...] = (
    ("other", "invoke + driver loop (unwrapped code)", "main:Pregel.invoke", "call"),
    ("build", "Pregel._start (driver, stream shape)", "main:Pregel._start", "call"),
    ("build", "PregelLoop() (the core and its parts)", "_core.loop:PregelLoop.__init__", "call"),
    ("build", "performer (executor, lane)", "_core.perform:SyncPregelLoop.__init__", "call"),
    ("build", "runner + step rules", "_core.driver:_runner", "call"),
    ("build", "runner + step rules", "_core.driver:_step_rules", "call"),
    ("open", "performer's start", "_core.perform:SyncPregelLoop.__enter__", "call"),
    ("open", "core start (setup, input, effects)", "_core.loop:PregelLoop.start", "gen"),
    ("open", "open_thread (its own code)", "saver:open_thread", "call"),
    ("open", "lock|unlock", "saver:lock_thread", "cm"),
    ("open", "gate read", "saver:get_thread_gate", "call"),
    ("open", "checkpoint read (get_tuple)", "saver:get_tuple", "call"),
    ("step", "next step (prepare tasks)", "_core.driver:_next_step", "call"),
    ("step", "runner tick", "_exec.runner:PregelRunner.tick", "gen"),
    ("step", "task attempt (run_task)", "_exec.attempt:run_task", "call"),
    ("step", "task call (runner.call: submit, wait)", "_exec.runner:PregelRunner.call", "call"),
    ("step", "entrypoint body (user code + unwrapped)", "user:main", "call"),
    ("step", "task body (user code)", "user:one", "call"),
    ("step", "a task's writes (put_writes effects)", "_core.perform:_Performer.put_writes", "call"),
    ("step", "after_tick (writes, checkpoint)", "_core.perform:_Performer.after_tick", "call"),
    ("saves", "lane (wait, drain)", "_core.lanes:SerialLane.wait", "call"),
    ("saves", "lane (wait, drain)", "_core.lanes:SerialLane._drain", "call"),
    ("saves", "grouped() begin|grouped() end", "saver:grouped", "cm"),
    ("saves", "saver.put (checkpoint)", "saver:put", "call"),
    ("saves", "saver.put_writes", "saver:put_writes", "call"),
    ("saves", "saver.put_attempts", "saver:put_attempts", "call"),
    (INHERIT, "encode (serde)", "serde:dumps_typed", "call"),
    ("end", "finish (core.finish, its saves queued)", "_core.perform:_Performer._finish", "call"),
    ("end", "executor exit", "_exec.run_executor:BackgroundExecutor.__exit__", "call"),
    ("end", "release (unwatch, lock exit)", "_core.perform:SyncPregelLoop._release", "call"),
    ("end", "output", "_core.driver:_final_output", "call"),
    ("end", "output", "_core.driver:_ended", "call"),
    ("end", "output", "_core.output:InvokeResult.value", "call"),
)
SQL_LABEL = "statements"
ORDER = ("build", "open", "step", "saves", "end", "other")


class Probe:
    """Exclusive wall (and with ``cpu``, the thread's CPU) time per (phase,
    label), a stack per thread; ``take()`` returns and resets what the last
    run spent: per key [wall ns, CPU ns, calls, calls of wrappers inside]."""

    def __init__(self, cpu: bool = False) -> None:
        self.spent: dict[tuple[str, str], list[int]] = {}
        self.local = threading.local()
        self.cpu = cpu

    def timed(self, phase: str, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        local, spent = self.local, self.spent
        wall_ns = time.perf_counter_ns
        cpu_ns = time.thread_time_ns if self.cpu else _zero

        def timer(*args: Any, **kwargs: Any) -> Any:
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            here = phase or (stack[-1][2] if stack else "other")
            frame = [0, 0, here, 0]
            stack.append(frame)
            w0, c0 = wall_ns(), cpu_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                c, w = cpu_ns() - c0, wall_ns() - w0
                stack.pop()
                slot = spent.get((here, label))
                if slot is None:
                    slot = spent[here, label] = [0, 0, 0, 0]
                slot[0] += w - frame[0]
                slot[1] += c - frame[1]
                slot[2] += 1
                slot[3] += frame[3]
                if stack:
                    parent = stack[-1]
                    parent[0] += w
                    parent[1] += c
                    parent[3] += 1

        return timer

    def timed_gen(self, phase: str, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def gen(*args: Any, **kwargs: Any) -> Iterator[Any]:
            inner = fn(*args, **kwargs)
            step = self.timed(phase, label, inner.send)
            sent = None
            try:
                while True:
                    try:
                        out = step(sent)
                    except StopIteration as stop:
                        return stop.value
                    sent = yield out
            finally:
                inner.close()

        return gen

    def timed_cm(self, phase: str, labels: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        enter_label, exit_label = labels.split("|")
        exit_phase = "end" if phase == "open" else phase

        def cm(*args: Any, **kwargs: Any) -> Any:
            return _TimedCM(
                fn(*args, **kwargs),
                self.timed(phase, enter_label, lambda c: c.__enter__()),
                self.timed(exit_phase, exit_label, lambda c, *e: c.__exit__(*e)),
            )

        return cm

    def take(self) -> dict[tuple[str, str], list[int]]:
        got = dict(self.spent)
        self.spent.clear()
        return got


def _zero() -> int:
    return 0


class _TimedCM:
    def __init__(self, inner: Any, enter: Callable[..., Any], exit_: Callable[..., Any]) -> None:
        self.inner, self.enter, self.exit = inner, enter, exit_

    def __enter__(self) -> Any:
        return self.enter(self.inner)

    def __exit__(self, *exc: Any) -> Any:
        return self.exit(self.inner, *exc)


class Installed:
    """The wrappers of one saver's runs: ``install()`` puts them in place,
    ``remove()`` puts the originals back."""

    def __init__(self, probe: Probe, saver: Any, user: dict[str, Any]) -> None:
        self.probe, self.saver, self.user = probe, saver, user
        self.undo: list[Callable[[], None]] = []

    def _resolve(self, target: str) -> tuple[Any, str]:
        where, name = target.split(":")
        if where == "saver":
            return self.saver, name
        if where == "serde":
            return self.saver.serde, name
        if where == "user":
            return self.user, name
        import importlib

        owner: Any = importlib.import_module(f"pregelkit.pregel.{where}")
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        return owner, attr

    def install(self) -> None:
        probe = self.probe
        for phase, label, target, kind in PHASES:
            owner, attr = self._resolve(target)
            if isinstance(owner, dict):
                original = owner[attr]
            else:
                original = owner.__dict__.get(attr) if isinstance(owner, type) else None
                if original is None:
                    original = getattr(owner, attr, None)
            if original is None:
                continue
            make = {"call": probe.timed, "gen": probe.timed_gen, "cm": probe.timed_cm}[kind]
            self._replace(owner, attr, original, make(phase, label, original))
        self._wrap_sql()

    def _replace(self, owner: Any, attr: str, original: Any, wrapper: Any) -> None:
        if isinstance(owner, dict):
            owner[attr] = wrapper
            self.undo.append(lambda: owner.__setitem__(attr, original))
            return
        had = isinstance(owner, type) or attr in getattr(owner, "__dict__", {})
        setattr(owner, attr, wrapper)
        self.undo.append(
            (lambda: setattr(owner, attr, original)) if had else (lambda: delattr(owner, attr))
        )
        # a module function imported by name elsewhere (run_task in retry.py)
        if not isinstance(owner, type) and hasattr(owner, "__name__"):
            for mod in list(sys.modules.values()):
                name = getattr(mod, "__name__", "")
                if name.startswith("pregelkit.") and getattr(mod, attr, None) is original:
                    setattr(mod, attr, wrapper)
                    self.undo.append(lambda mod=mod: setattr(mod, attr, original))

    def _wrap_sql(self) -> None:
        conn = getattr(self.saver, "conn", None)
        if isinstance(conn, TimedConnection):
            conn.probe = self.probe
            self.undo.append(lambda: setattr(conn, "probe", None))
        if "psycopg" in sys.modules:
            import psycopg

            for owner, attr in (
                (psycopg.Cursor, "execute"),
                (psycopg.Cursor, "executemany"),
                (psycopg.Pipeline, "sync"),
                (psycopg.Pipeline, "__exit__"),
            ):
                original = owner.__dict__[attr]
                self._replace(owner, attr, original, self.probe.timed(INHERIT, SQL_LABEL, original))

    def remove(self) -> None:
        while self.undo:
            self.undo.pop()()


import sqlite3  # noqa: E402  (after the path set-up above, with what needs it)


class TimedConnection(sqlite3.Connection):
    """A sqlite3 connection whose statements the probe times while installed."""

    probe: Probe | None = None

    def execute(self, *args: Any) -> Any:
        if self.probe is None:
            return super().execute(*args)
        return self.probe.timed(INHERIT, SQL_LABEL, super().execute)(*args)

    def executemany(self, *args: Any) -> Any:
        if self.probe is None:
            return super().executemany(*args)
        return self.probe.timed(INHERIT, SQL_LABEL, super().executemany)(*args)


@contextmanager
def saver_of(kind: str, timed: bool = True) -> Iterator[Any]:
    """The saver a short run uses, open for the block; ``timed``: SQLite's
    statements through ``TimedConnection``."""
    if kind == "memory":
        from pregelkit.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif kind == "sqlite":
        from pregelkit.checkpoint.sqlite import SqliteSaver

        with tempfile.TemporaryDirectory(prefix="anatomy-") as tmp:
            conn = sqlite3.connect(
                os.path.join(tmp, "short.db"),
                check_same_thread=False,
                isolation_level=None,
                factory=TimedConnection if timed else sqlite3.Connection,
            )
            saver = SqliteSaver(conn)
            saver.setup()
            try:
                yield saver
            finally:
                conn.close()
    else:
        from pregelkit.checkpoint.postgres import PostgresSaver

        with ExitStack() as stack:
            dsn = os.environ.get("BENCH_PG_DSN")
            if not dsn:
                from _pg_server import postgres_server

                dsn = stack.enter_context(postgres_server())
            saver = stack.enter_context(PostgresSaver.from_conn_string(dsn))
            saver.setup()
            yield saver


def short_run(saver: Any) -> tuple[Any, dict[str, Any]]:
    """The short run's entrypoint, and its two user functions in a dict the
    probe can wrap by name."""
    from pregelkit.func import entrypoint, task

    user: dict[str, Any] = {"one": lambda x: x + 1, "main": lambda x: one(x).result()}

    @task
    def one(x: int) -> int:
        return int(user["one"](x))

    @entrypoint(checkpointer=saver)
    def main(x: int) -> int:
        return int(user["main"](x))

    return main, user


class Cost:
    """What a wrapper adds to a call (ns), timed in a loop by the thread's
    CPU clock (a loaded machine's wall clock measures its other work):
    ``inside`` is charged to its own label (an empty function's recorded
    time), ``total`` to the run; the rest of ``total`` lands in the label
    of the wrapper around it. Wall and CPU alike: a part's median wall time
    is a stretch the thread was not preempted in."""

    def __init__(self, cpu: bool, n: int = 100_000) -> None:
        probe = Probe(cpu)

        def empty() -> None:
            return None

        timed = probe.timed("other", "calibration", empty)
        inside, total = [], []
        for _ in range(5):
            c0 = time.thread_time_ns()
            for _ in range(n):
                empty()
            c1 = time.thread_time_ns()
            for _ in range(n):
                timed()
            c2 = time.thread_time_ns()
            wall, cpu_spent, calls, _ = probe.take()["other", "calibration"]
            inside.append(min(wall, cpu_spent) / calls if cpu else wall / calls)
            total.append((c2 - c1 - (c1 - c0)) / n)
        self.total = (min(total),) * 2
        within = min(min(inside), min(total))  # a preempted loop's wall time can exceed it
        self.inside = (within, within if cpu else 0.0)

    def corrected(self, slot: list[int]) -> tuple[float, float]:
        """A label's (wall, CPU) ns with its wrappers' own cost taken out."""
        calls, children = slot[2], slot[3]
        return (
            slot[0] - calls * self.inside[0] - children * (self.total[0] - self.inside[0]),
            slot[1] - calls * self.inside[1] - children * (self.total[1] - self.inside[1]),
        )


def measure(kind: str, runs: int, rounds: int, cost: Cost) -> dict[str, Any]:
    with saver_of(kind) as saver:
        main, user = short_run(saver)
        probe = Probe(cost.inside[1] != 0.0)
        installed = Installed(probe, saver, user)
        prefix = uuid.uuid4().hex[:8]
        count = 0

        def one_run() -> tuple[int, int]:
            nonlocal count
            count += 1
            config = {"configurable": {"thread_id": f"{prefix}-{count}"}}
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            main.invoke(count, config)
            return time.perf_counter_ns() - w0, time.thread_time_ns() - c0

        for _ in range(50):
            one_run()
        bare: list[tuple[int, int]] = []
        wrapped: list[tuple[int, int]] = []
        parts: list[dict[tuple[str, str], list[int]]] = []
        process_cpu = [0.0, 0.0]
        for _ in range(rounds):
            p0 = time.process_time()
            bare.extend(one_run() for _ in range(runs))
            process_cpu[0] += time.process_time() - p0
            installed.install()
            p0 = time.process_time()
            try:
                for _ in range(runs):
                    wrapped.append(one_run())
                    parts.append(probe.take())
            finally:
                installed.remove()
            process_cpu[1] += time.process_time() - p0
    keys = sorted({key for part in parts for key in part}, key=_order)
    calls = statistics.median(sum(slot[2] for slot in part.values()) for part in parts)
    bare_m, wrapped_m = _medians(bare), _medians(wrapped)
    per_run = [{key: cost.corrected(slot) for key, slot in part.items()} for part in parts]
    table = {
        key: tuple(
            statistics.median(run.get(key, (0, 0))[i] for run in per_run) / 1e3 for i in (0, 1)
        )
        for key in keys
    }
    return {
        "saver": kind,
        "table": table,
        "bare": bare_m,
        "wrapped": wrapped_m,
        "process_cpu_us": [c / (runs * rounds) * 1e6 for c in process_cpu],
        "wrapper_calls": calls,
        "runs": runs * rounds,
    }


def _order(key: tuple[str, str]) -> tuple[int, int]:
    labels = [label for _, label, _, _ in PHASES]
    rank = next((i for i, lab in enumerate(labels) if key[1] in lab.split("|")), len(labels))
    return ORDER.index(key[0]), rank


def _medians(samples: list[tuple[int, int]]) -> tuple[float, float]:
    return (
        statistics.median(w for w, _ in samples) / 1e3,
        statistics.median(c for _, c in samples) / 1e3,
    )


def print_table(result: dict[str, Any], cost: Cost) -> None:
    bare_w, bare_c = result["bare"]
    wrap_w, wrap_c = result["wrapped"]
    table = result["table"]
    calls = result["wrapper_calls"]
    total_w = sum(w for w, _ in table.values())
    total_c = sum(c for _, c in table.values())
    cpu = cost.inside[1] != 0.0
    print(f"\n### {result['saver']}: {result['runs']} runs, medians, µs")
    print("(of a bare run: the share times an unwrapped run's CPU time, its thread's)")
    head = "| phase | part | wall | CPU | share | of a bare run |"
    print(head if cpu else head.replace(" CPU |", ""))
    print("|---|---|---:|---:|---:|---:|" if cpu else "|---|---|---:|---:|---:|")

    def row(phase: str, label: str, w: float, c: float) -> None:
        share = (c / total_c) if cpu else (w / total_w)
        middle = f"{w:,.1f} | {c:,.1f}" if cpu else f"{w:,.1f}"
        print(f"| {phase} | {label} | {middle} | {share:.1%} | {share * bare_c:,.0f} |")

    for phase in ORDER:
        rows = [(label, v) for (p, label), v in table.items() if p == phase]
        for label, (w, c) in rows:
            row(phase, label, w, c)
        if rows:
            row(f"**{phase}**", "", sum(v[0] for _, v in rows), sum(v[1] for _, v in rows))
    row("sum of the parts", "", total_w, total_c)
    row("run, not wrapped", "", bare_w, bare_c)
    row("run, wrapped", "", wrap_w, wrap_c)
    print(
        f"\nwrappers: {calls:.0f} calls a run, {cost.total[0] / 1e3:.2f} µs each (CPU, in a "
        f"loop), {cost.inside[0] / 1e3:.2f} µs of it inside the part, taken out of the parts "
        f"by their calls. A run's CPU (its thread): {bare_c:,.0f} µs not wrapped, "
        f"{wrap_c:,.0f} µs wrapped; process CPU per run (all threads): "
        f"{result['process_cpu_us'][0]:,.0f} µs not wrapped, "
        f"{result['process_cpu_us'][1]:,.0f} µs wrapped"
    )


FLAMES = ("short-memory", "short-sqlite", "pregel-chain")


def loop_for(what: str, seconds: float) -> None:
    """Short runs (``short-memory``, ``short-sqlite``) or invokes of a
    1,000-node Pregel chain, for ``seconds`` after a warm-up: what
    ``--flame`` records. Prints ``ready`` when the loop starts."""
    with ExitStack() as stack:
        if what == "pregel-chain":
            from workloads import WORKLOADS, Lib

            prepared = WORKLOADS["pregel_chain"][0](Lib("pregelkit"), 1000)
            prepared.warmup()

            def run(i: int) -> None:
                prepared.check(prepared.run())

        else:
            saver = stack.enter_context(saver_of(what.removeprefix("short-"), timed=False))
            main, _ = short_run(saver)
            prefix = uuid.uuid4().hex

            def run(i: int) -> None:
                main.invoke(i, {"configurable": {"thread_id": f"{prefix}-{i}"}})

        for i in range(30):
            run(-i)
        print("ready", flush=True)
        deadline, i = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            i += 1
            run(i)


def record_flames(out: Path, rate: int, seconds: float) -> None:
    """``py-spy record`` of each ``FLAMES`` loop, one SVG each in ``out``:
    py-spy attaches once the loop is warm, so imports and set-up are not in it."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out.mkdir(parents=True, exist_ok=True)
    for name in FLAMES:
        svg = out / f"{name}.svg"
        loop = subprocess.Popen(
            [sys.executable, __file__, "--loop", name, str(seconds + 30)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert loop.stdout is not None
            if loop.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the {name} loop did not start")
            cmd = [py_spy, "record", "--rate", str(rate), "--format", "flamegraph"]
            cmd += ["--nonblocking", "--duration", str(int(seconds)), "--pid", str(loop.pid)]
            subprocess.run([*cmd, "-o", str(svg)], check=True)
        finally:
            loop.kill()
            loop.wait()
        print(f"{svg}: {svg.stat().st_size / 1e3:,.0f} kB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--savers", nargs="+", choices=SAVERS, default=list(SAVERS))
    parser.add_argument("--runs", type=int, default=300, help="runs per round and per side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--cpu", action="store_true", help="also each part's thread CPU time (dearer wrappers)"
    )
    parser.add_argument("--alloc", action="store_true", help="allocations (anatomy_alloc.py)")
    parser.add_argument("--flame", type=Path, help="write py-spy flame graphs (SVG) here")
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--seconds", type=float, default=20, help="each flame graph's recording")
    parser.add_argument("--loop", nargs=2, metavar=("WHAT", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loop:
        loop_for(args.loop[0], float(args.loop[1]))
        return 0
    if args.flame:
        record_flames(args.flame, args.rate, args.seconds)
        return 0
    if args.alloc:
        from anatomy_alloc import report

        report()
        return 0
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, cores: {os.cpu_count()}")
    cost = Cost(args.cpu)
    for kind in args.savers:
        print_table(measure(kind, args.runs, args.rounds, cost), cost)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
