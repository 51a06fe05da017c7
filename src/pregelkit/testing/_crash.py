"""``check_crash_safety``: kill a workflow at every save point, resume it, and
check what the resume did.

A save point is one commit of the run's saver: a checkpoint (``put``) or a
task's writes (``put_writes``: its result, its interrupt or error, or a call
record). The checker first runs the workflow once, to count them (N); then
for each k in 1..N it runs the workflow twice more in a fresh process,
killed with SIGKILL right *before* the k-th save starts and right *after*
it commits; then one more process resumes all those threads. A resume must
end with the uncrashed run's result, must not run again a task whose result
was committed, and must not repeat an ``effect()`` that a committed save
came after (in the task that made it, or in a call that task made later).

The processes import the workflow by module and name (see ``_locate``), so
what they run is the code on disk, as after a real crash.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pregelkit.testing._crashreport import Crash, findings, load_log, result_of

__all__ = ["CrashReport", "CrashSafetyError", "check_crash_safety"]

DURABILITIES = ("sync", "async", "exit")
INSIDE = "PREGELKIT_CRASH_CHECK_PROCESS"
"""Set in the checker's processes: a module that calls the checker at import
(a script without a ``__main__`` guard) would start checkers without end."""


class CrashSafetyError(AssertionError):
    """A resume after a crash did something the uncrashed run did not: each
    entry of ``failures`` names the save point and what differed."""

    def __init__(self, failures: list[str], report: CrashReport) -> None:
        self.failures = failures
        self.report = report
        shown = "\n\n".join(failures[:10])
        more = f"\n\n... and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(
            f"{len(failures)} crash point(s) of {report.crash_points} went wrong:\n\n{shown}{more}"
        )


@dataclass
class CrashReport:
    """What ``check_crash_safety`` ran: save points per durability mode, the
    crash points tried (two per save point), the processes and the time."""

    save_points: dict[str, int] = field(default_factory=dict)
    crash_points: int = 0
    processes: int = 0
    seconds: float = 0.0
    effects: Counter[str] = field(default_factory=Counter)
    """``effect()`` counts of the uncrashed run(s)."""

    def __str__(self) -> str:
        modes = ", ".join(f"{d}: {n}" for d, n in self.save_points.items())
        return (
            f"save points ({modes}); {self.crash_points} crash points, "
            f"{self.processes} processes, {self.seconds:.1f} s"
        )


def check_crash_safety(
    wf: Any,
    input: Any,
    *,
    config: dict[str, Any] | None = None,
    saver: str = "sqlite",
    durability: str | None = None,
) -> CrashReport:
    """Kill ``wf`` (run on ``input``) at every save point, resume it, and raise
    ``CrashSafetyError`` if a resume ended otherwise than the uncrashed run,
    ran a task whose result was saved, or repeated a saved ``effect()``.

    ``wf`` must be defined at the top level of a module (or of the script
    being run). ``saver``: ``"sqlite"`` (a file in a temporary directory) or
    a PostgreSQL URL (threads of their own are made there). ``durability``:
    one of ``"sync"``, ``"async"``, ``"exit"``; ``None`` checks all three.
    ``input`` and ``config`` go to the processes pickled; the thread id is
    the checker's own.
    """
    if os.environ.get(INSIDE):
        raise RuntimeError(
            "check_crash_safety was called in one of its own processes, while they import "
            "the workflow's module: call it from a test, or under "
            '`if __name__ == "__main__":` in a script'
        )
    modes = _modes(durability)
    target = _locate(wf)
    report = CrashReport()
    started = time.perf_counter()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pregelkit-crash-") as tmp:
        work = Path(tmp)
        store = str(work / "state.db") if saver == "sqlite" else _postgres_url(saver)
        _write_spec(work / "spec", target, input, config, store)
        with _Runs(work, report) as runs:
            for mode in modes:
                failures += _check_mode(runs, mode)
    report.seconds = time.perf_counter() - started
    if failures:
        raise CrashSafetyError(failures, report)
    return report


def _modes(durability: str | None) -> tuple[str, ...]:
    if durability is None:
        return DURABILITIES
    if durability not in DURABILITIES:
        raise ValueError(f"durability must be one of {DURABILITIES} or None, got {durability!r}")
    return (durability,)


def _postgres_url(saver: str) -> str:
    if not saver.startswith(("postgres://", "postgresql://")):
        raise ValueError(f'saver must be "sqlite" or a postgresql:// URL, got {saver!r}')
    return saver


class _Runs:
    """The job server (``_crash_child.serve``) and the jobs it runs, each on a
    thread and a log of its own."""

    def __init__(self, work: Path, report: CrashReport) -> None:
        self.work, self.report = work, report
        self.token = uuid.uuid4().hex[:8]
        self.timeout = 300.0
        self.server = subprocess.Popen(
            [sys.executable, "-m", "pregelkit.testing._crash_child", str(work / "spec"), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(work / "server.err", "w"),  # noqa: SIM115 - closed with the directory
            text=True,
            env=dict(
                os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **{INSIDE: "1"}
            ),
        )

    def __enter__(self) -> _Runs:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()

    def thread(self, mode: str, name: str) -> tuple[str, str]:
        return f"crash-check-{self.token}-{mode}-{name}", str(self.work / f"{mode}-{name}.log")

    def run(self, *args: str) -> int:
        """One job (see ``_crash_child.job``); its exit code."""
        self.report.processes += 1
        server = self.server
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write(" ".join(args) + "\n")
            server.stdin.flush()
        except BrokenPipeError:
            pass  # the server is gone: said below
        ready, _, _ = select.select([server.stdout], [], [], self.timeout)
        answer = server.stdout.readline() if ready else ""
        if not answer.strip():
            server.kill()
            server.wait()
            why = (self.work / "server.err").read_text().strip() or "no error output"
            raise RuntimeError(
                f"the crash checker's process stopped or hung ({self.timeout:.0f} s) "
                f"on job {' '.join(args[:2])}: {why}"
            )
        return int(answer)

    def stderr(self, log: str) -> str:
        try:
            return Path(log + ".err").read_text().strip()
        except FileNotFoundError:
            return ""


def _check_mode(runs: _Runs, mode: str) -> list[str]:
    thread, log = runs.thread(mode, "uncrashed")
    started = time.perf_counter()
    code = runs.run("run", mode, thread, log)
    if code != 0:
        raise RuntimeError(
            f"the uncrashed run (durability={mode!r}) failed in its process "
            f"(exit {code}):\n{runs.stderr(log)}"
        )
    runs.timeout = max(60.0, 20 * (time.perf_counter() - started))
    baseline = load_log(log)
    runs.report.save_points[mode] = len(baseline.saves)
    runs.report.effects.update(e["effect"] for e in baseline.effects)
    failures: list[str] = []
    crashed: list[Crash] = []
    for k in range(1, len(baseline.saves) + 1):
        for when in ("before", "after"):
            runs.report.crash_points += 1
            thread, log = runs.thread(mode, f"{when}{k}")
            code = runs.run("run", mode, thread, log, when, str(k))
            crash = Crash(mode, when, k, len(baseline.saves), thread, log)
            if code == -signal.SIGKILL:
                crashed.append(crash)
                continue
            made = len(load_log(log).saves)
            failures.append(
                f"{crash.title()}: the run never got there: it made {made} save(s) "
                f"(exit {code}), the uncrashed run {len(baseline.saves)}; the workflow "
                f"does not save the same way twice (is it deterministic?)"
                f"\n{runs.stderr(log)}".rstrip()
            )
    expected = result_of(baseline)
    for crash in crashed:
        code = runs.run("resume", mode, crash.thread, crash.resume_log)
        if code != 0:
            failures.append(
                f"{crash.title()}: the resume's process failed (exit {code}):\n"
                f"{runs.stderr(crash.resume_log)}"
            )
            continue
        failures += findings(crash, baseline, expected)
    return failures


def _write_spec(
    path: Path,
    target: dict[str, str],
    input: Any,
    config: dict[str, Any] | None,
    store: str,
) -> None:
    spec = dict(
        target,
        input=input,
        config=config,
        saver=store,
        sys_path=[p for p in sys.path if p],
    )
    try:
        data = pickle.dumps(spec)
    except Exception as exc:
        raise TypeError(
            "check_crash_safety sends the input and the config to fresh processes, "
            f"pickled, and they do not pickle: {exc}"
        ) from exc
    path.write_bytes(data)


def _locate(wf: Any) -> dict[str, str]:
    """Where a fresh process finds ``wf``: ``{"module", "name"}``, or
    ``{"path", "name"}`` for the ``__main__`` of a script (loaded under
    another name, so its ``if __name__ == "__main__":`` block does not run)."""
    if not hasattr(wf, "nodes") or not hasattr(wf, "copy"):
        raise TypeError(
            "check_crash_safety takes a workflow (an @entrypoint or a compiled graph), "
            f"got {type(wf).__name__}"
        )
    wrapped = getattr(wf, "__wrapped__", None)
    first = sys.modules.get(getattr(wrapped, "__module__", "") or "")
    # a script's own globals last: `wf = ...` there may only be a second name
    modules = sorted(
        list(sys.modules.values()),
        key=lambda m: (m is not first, getattr(m, "__name__", "") == "__main__"),
    )
    for module in modules:
        name = _name_in(module, wf)
        if name is None:
            continue
        if module.__name__ != "__main__":
            return {"module": module.__name__, "name": name}
        path = getattr(module, "__file__", None)
        if path:
            return {"path": os.path.abspath(path), "name": name}
        raise ValueError(
            f"check_crash_safety runs {name!r} in fresh processes, which import it, but it "
            "is defined in a __main__ without a file (an interactive session or python -c): "
            "define it in a module and import it from there"
        )
    where = getattr(wrapped, "__qualname__", None) or getattr(wf, "name", repr(wf))
    raise ValueError(
        f"check_crash_safety runs the workflow {where!r} in fresh processes, which import "
        "it by module and name, and it is not a top-level name of any module (defined "
        "inside a function?): define it at the top level of a module and pass that"
    )


def _name_in(module: ModuleType | None, wf: Any) -> str | None:
    found = getattr(module, "__dict__", None)
    if not isinstance(found, dict):
        return None
    for name, value in list(found.items()):
        if value is wf and isinstance(name, str) and not name.startswith("__"):
            return name
    return None
