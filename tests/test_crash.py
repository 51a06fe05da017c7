"""Crash safety: a durable workflow killed with SIGKILL again and again.

The workflow (tests/crash_workflow.py) runs in a subprocess: 1000 chained
task calls, then a fan-out of 1000 calls. Each test kills it at seeded random
moments, resumes it each time, and checks against the task execution log and
the saver's contents:

(a) the final result is right;
(b) no task whose result was saved before a kill runs again after it ("saved"
    is read from the saver after the kill, with the process dead: the
    ``__return__`` writes of the thread's checkpoints);
(c) with ``durability="sync"`` a kill costs at most the tasks in flight: an
    execution logged but not saved at a kill is a task that was running
    (or returning) when the process died. In the chain, one (the entrypoint
    calls the next step only once ``.result()`` returned, which with "sync"
    is after the save). In the fan-out, at most ``WORKERS + 1``: the pool's
    worker threads (``PREGELKIT_MAX_WORKERS``, set for the subprocess) plus
    the entrypoint's own thread, which runs a not-yet-started call itself
    when it waits on its future; each thread saves a task's result before it
    takes another task. Every re-run comes from such an execution;
(d) the database is consistent afterwards (``get_state``, ``list()``, and
    for SQLite ``PRAGMA integrity_check``).

The last tests run two processes on one thread: the second fails with
``ThreadBusyError``, or waits with ``wait_for_thread``; the execution log
shows no two runs of the thread overlapping.

The ``*_async_api`` tests run the same workflow with ``async def`` tasks and
``ainvoke`` on the async savers (``crash_workflow.py --async``), durability
"sync" only, with fewer kills. There the fan-out's calls are asyncio tasks on
one event loop, not bounded by ``PREGELKIT_MAX_WORKERS``: the leaves (which
await nothing) all run, in call order, as soon as the entrypoint awaits, and
each then waits for its own save, which the saver commits in that same order
(one worker thread for SQLite; one connection taken in FIFO order by an
``asyncio.Lock`` for PostgreSQL). So (c) becomes: a kill loses at most one
step, never steps and leaves together, and the leaves it loses are any number
(up to every leaf the attempt ran) but always the *last* ones it ran: the
leaves it saved are a prefix, in log order, of the leaves it ran.

Seeds: ``PREGELKIT_CRASH_SEED`` overrides the fixed seed (printed on failure).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "crash_workflow.py"
_spec = importlib.util.spec_from_file_location("crash_workflow", SCRIPT)
assert _spec is not None and _spec.loader is not None
cw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cw)

SEQ = 1000
FAN = 1000
SEED = 7  # the workflow's input
WORKERS = 8  # PREGELKIT_MAX_WORKERS of the subprocess: bounds the fan-out's tasks in flight
RUN_SEED = int(os.environ.get("PREGELKIT_CRASH_SEED", "20240611"))
ATTEMPT_TIMEOUT = 60.0
RETURN = "__return__"

Task = tuple[str, int]  # ("step" | "leaf", index)


# --- running the workflow ---------------------------------------------------


@dataclasses.dataclass
class Attempt:
    pid: int
    trigger: tuple[str, float]
    killed: bool
    returncode: int
    seconds: float
    how: str = ""  # input / resume / done, from the log's begin line
    executed: list[Task] = dataclasses.field(default_factory=list)
    saved_after: set[Task] = dataclasses.field(default_factory=set)
    stdout: str = ""
    stderr: str = ""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PREGELKIT_MAX_WORKERS"] = str(WORKERS)
    src = str(HERE.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def _command(db: str, thread: str, log: Path, durability: str, *extra: str) -> list[str]:
    return [
        sys.executable, str(SCRIPT), "--db", db, "--thread", thread, "--log", str(log),
        "--durability", durability, "--seq", str(SEQ), "--fan", str(FAN), "--seed", str(SEED),
        *extra,
    ]  # fmt: skip


def _parse(lines: list[str]) -> list[tuple[str, ...]]:
    return [tuple(line.split()) for line in lines if line]


class LogTail:
    """Reads the lines appended to the log since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.partial = b""

    def read(self) -> list[tuple[str, ...]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *done, self.partial = data.split(b"\n")
        return _parse([d.decode() for d in done])


def run_until(
    cmd: list[str],
    log: Path,
    out_dir: Path,
    trigger: tuple[str, float],
    logged_leaves: set[int],
    leaves_left: int = FAN,
) -> Attempt:
    """Run one attempt; SIGKILL it when ``trigger`` fires:
    ``("start", s)``: ``s`` seconds after the start, or at its first task
    execution if that comes first; ``("step", n)``/``("leaf", n)``: once this
    attempt has logged ``n`` step/leaf executions (or, if fewer remain, as the
    chain/the fan-out ends); ``("all_leaves", 0)``: once every leaf has been
    logged by some attempt (the run is about to finish); ``("never", 0)``: let
    it finish. For the async API, whose leaves all run in one go and then save
    one by one, with ``leaves_left`` the leaves not saved before this attempt:
    ``("leaf_part", f)``: once this attempt has logged ``f * leaves_left``
    leaves (while they run); ``("saving", s)``: ``s`` seconds after it logged
    the last of them (while they save)."""
    tail = LogTail(log)
    out, err = out_dir / "stdout", out_dir / "stderr"
    start = time.monotonic()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=_env())
    kind, arg = trigger
    counts: Counter[str] = Counter()
    executed: list[Task] = []
    how = ""
    fire = False
    all_leaves_at: float | None = None  # when this attempt logged its leaves_left-th leaf
    try:
        while proc.poll() is None:
            for rec in tail.read():
                if rec[0] in ("step", "leaf"):
                    executed.append((rec[0], int(rec[1])))
                    counts[rec[0]] += 1
                    if rec[0] == "leaf":
                        logged_leaves.add(int(rec[1]))
                elif rec[0] == "begin":
                    how = rec[2]
            elapsed = time.monotonic() - start
            if all_leaves_at is None and counts["leaf"] >= leaves_left:
                all_leaves_at = elapsed
            if kind == "start":
                fire = elapsed >= arg or bool(executed)
            elif kind == "step":  # (or at the first leaf, if the chain ends first)
                fire = counts["step"] >= arg or counts["leaf"] > 0
            elif kind == "leaf":  # (or at the last leaf, if fewer remain)
                fire = counts["leaf"] >= arg or len(logged_leaves) >= FAN
            elif kind == "all_leaves":
                fire = len(logged_leaves) >= FAN
            elif kind == "leaf_part":
                fire = counts["leaf"] >= max(1, arg * leaves_left)
            elif kind == "saving":
                fire = all_leaves_at is not None and elapsed - all_leaves_at >= arg
            if fire:
                proc.send_signal(signal.SIGKILL)
                break
            if elapsed > ATTEMPT_TIMEOUT:
                proc.kill()
                proc.wait()
                pytest.fail(f"attempt {proc.pid} ran over {ATTEMPT_TIMEOUT}s: {err.read_text()}")
            time.sleep(0.0005)
        proc.wait(timeout=ATTEMPT_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seconds = time.monotonic() - start
    for rec in tail.read():  # what it logged between the last poll and its death
        if rec[0] in ("step", "leaf"):
            executed.append((rec[0], int(rec[1])))
            if rec[0] == "leaf":
                logged_leaves.add(int(rec[1]))
        elif rec[0] == "begin":
            how = rec[2]
    return Attempt(
        pid=proc.pid,
        trigger=trigger,
        killed=proc.returncode == -signal.SIGKILL,
        returncode=proc.returncode,
        seconds=seconds,
        how=how,
        executed=executed,
        stdout=out.read_text(),
        stderr=err.read_text(),
    )


# --- reading the saver ------------------------------------------------------


@contextmanager
def open_saver(db: str) -> Iterator[Any]:
    with cw.open_saver(db) as saver:
        yield saver


def saved_tasks(db: str, thread: str) -> tuple[set[Task], dict[str, Task]]:
    """The task calls whose results the saver holds for ``thread`` (``__return__``
    writes of any of its checkpoints), and which task id each was saved under.
    Checks each saved value against the plain-Python computation."""
    xs = cw.chain(SEED, SEQ)
    tasks: set[Task] = set()
    ids: dict[str, Task] = {}
    with open_saver(db) as saver:
        for tup in saver.list({"configurable": {"thread_id": thread}}):
            for task_id, channel, value in tup.pending_writes or ():
                if channel != RETURN:
                    continue
                if "step" in value:
                    task: Task = ("step", value["step"])
                    assert value["x"] == xs[value["step"]], f"wrong saved result {value}"
                else:
                    task = ("leaf", value["leaf"])
                    assert value["v"] == cw.leaf_value(value["leaf"], xs[-1]), (
                        f"wrong saved result {value}"
                    )
                assert ids.setdefault(task_id, task) == task, f"task id {task_id} saved twice"
                tasks.add(task)
    assert len(ids) == len(tasks), "one task call saved under two task ids"
    return tasks, ids


# --- the crash test ---------------------------------------------------------


def kill_plan(rng: random.Random) -> list[tuple[str, float]]:
    """The triggers of the attempts to kill, in order (15; at least 10 must land).

    While steps remain: kills after a random number of steps (6 * 120 < SEQ
    leaves room for the overshoot of polling the log, so they land in the
    chain; if one does not, it lands at the first leaf), and kills at a random
    moment of start-up (before the saver opens, before or after the input
    checkpoint, or at the latest at the first task). Then kills after a random
    number of leaves (5 * 80 < FAN: they land in the fan-out), and one as the
    last leaf is logged (results still being saved, or the final checkpoint, or
    already exited: then it does not count)."""
    chain_kills: list[tuple[str, float]] = [("step", rng.randint(1, 120)) for _ in range(6)]
    chain_kills += [("start", rng.uniform(0.0, 0.2)) for _ in range(3)]
    rng.shuffle(chain_kills)
    fan_kills: list[tuple[str, float]] = [("leaf", rng.randint(1, 80)) for _ in range(5)]
    return [*chain_kills, *fan_kills, ("all_leaves", 0)]


def async_kill_plan(rng: random.Random) -> list[tuple[str, float]]:
    """The triggers for the async API (8; at least 6 must land): three kills
    after a random number of steps and one at start-up, shuffled, as in
    ``kill_plan``; then four in the fan-out. The event loop runs the leaves
    not yet saved all in one go (~50-100 ms for 1000; SQLite's worker thread
    saves a few meanwhile, PostgreSQL none), then their saves take ~0.1 s for
    1000: two kills after a random part of the leaves ran, two at most 30 ms
    into the saving (each leaves most leaves unsaved: the next saving lasts
    longer than that)."""
    chain_kills: list[tuple[str, float]] = [("step", rng.randint(1, 120)) for _ in range(3)]
    chain_kills.append(("start", rng.uniform(0.0, 0.2)))
    rng.shuffle(chain_kills)
    fan_kills: list[tuple[str, float]] = []
    for _ in range(2):
        fan_kills += [("leaf_part", rng.uniform(0.05, 1.0)), ("saving", rng.uniform(0.0, 0.03))]
    return [*chain_kills, *fan_kills]


def crash_until_done(
    db: str, thread: str, tmp_path: Path, durability: str, seed: int, *, api: str = "sync"
) -> None:
    rng = random.Random(seed)
    log = tmp_path / "exec.log"
    log.touch()
    is_async = api == "async"
    cmd = _command(db, thread, log, durability, "--wait", *(["--async"] if is_async else []))
    plan = async_kill_plan(rng) if is_async else kill_plan(rng)
    min_kills, min_fan_kills = (6, 1) if is_async else (10, 2)
    attempts: list[Attempt] = []
    logged_leaves: set[int] = set()
    started = time.monotonic()
    for trigger in [*plan, ("never", 0)]:
        saved = attempts[-1].saved_after if attempts else set()
        leaves_left = FAN - sum(name == "leaf" for name, _ in saved)
        attempt = run_until(cmd, log, tmp_path, trigger, logged_leaves, leaves_left)
        attempt.saved_after, _ = saved_tasks(db, thread)
        attempts.append(attempt)
        if not attempt.killed:
            assert attempt.returncode == 0, (
                f"attempt {attempt.pid} failed (rc {attempt.returncode}):\n{attempt.stderr}"
            )
            break
    total = time.monotonic() - started
    final = attempts[-1]
    assert not final.killed and final.returncode == 0, "the workflow never completed"
    context = f"(seed {seed}; {_summary(attempts, total)})"
    print(f"\n{api} api, {durability} {thread}: {context}")

    # every line in the log is accounted for: the log is the execution record
    per_pid: dict[int, list[Task]] = {}
    for rec in _parse(log.read_text().splitlines()):
        if rec[0] in ("step", "leaf"):
            per_pid.setdefault(int(rec[2]), []).append((rec[0], int(rec[1])))
    assert set(per_pid) <= {a.pid for a in attempts}, context
    for a in attempts:
        assert per_pid.get(a.pid, []) == a.executed, f"log of {a.pid} misread {context}"

    killed = [a for a in attempts if a.killed]
    assert len(killed) >= min_kills, f"only {len(killed)} kills landed {context}"
    assert any(("step", SEQ - 1) not in a.executed and any(t[0] == "step" for t in a.executed)
               for a in killed), f"no kill landed in the chain {context}"  # fmt: skip
    assert sum(any(t[0] == "leaf" for t in a.executed) for a in killed) >= min_fan_kills, (
        f"fewer than {min_fan_kills} kills landed in the fan-out {context}"
    )

    # (a) the result
    want = cw.expected(SEED, SEQ, FAN)
    assert json.loads(final.stdout) == want, context

    # (b) nothing saved before a kill runs again after it
    everything = {("step", i) for i in range(SEQ)} | {("leaf", i) for i in range(FAN)}
    saved_before: set[Task] = set()
    for a in attempts:
        dup = [t for t, n in Counter(a.executed).items() if n > 1]
        assert not dup, f"attempt {a.pid} ran {dup[:5]} more than once {context}"
        again = sorted(saved_before.intersection(a.executed))
        assert not again, (
            f"attempt {a.pid} re-ran {len(again)} tasks whose results were saved before "
            f"the last kill, e.g. {again[:5]} {context}"
        )
        assert saved_before <= a.saved_after, f"saved results vanished {context}"
        saved_before = a.saved_after
    assert saved_before == everything, (
        f"{len(everything - saved_before)} task results missing at the end {context}"
    )
    runs = Counter(t for a in attempts for t in a.executed)
    assert set(runs) == everything, context
    reruns = sum(n - 1 for n in runs.values())

    # results are saved in order: in the chain, where each call waits for the one
    # before, the steps an attempt saved are a prefix of the steps it ran
    for a in killed:
        steps = [t for t in a.executed if t[0] == "step"]
        flags = [t in a.saved_after for t in steps]
        assert flags == sorted(flags, reverse=True), (
            f"attempt {a.pid} saved a step after one it lost: "
            f"{[t for t, ok in zip(steps, flags) if not ok][:3]} lost {context}"
        )

    # (c) with "sync", a kill loses only the tasks in flight
    lost = [set(a.executed) - a.saved_after for a in killed]
    assert sum(map(len, lost)) >= reruns, context  # every re-run comes from a lost execution
    if durability == "sync" and is_async:
        for a, gone in zip(killed, lost):
            lost_steps = sorted(i for name, i in gone if name == "step")
            assert len(lost_steps) <= 1, f"kill of {a.pid} lost steps {lost_steps} {context}"
            ran_leaves = [t for t in a.executed if t[0] == "leaf"]
            assert not (lost_steps and ran_leaves), (
                f"kill of {a.pid} lost {lost_steps} after running leaves {context}"
            )
            # the leaves in flight are those it ran but has not saved yet: the last ones
            flags = [t in a.saved_after for t in ran_leaves]
            assert flags == sorted(flags, reverse=True), (
                f"attempt {a.pid} saved a leaf after one it lost: "
                f"{[t for t, ok in zip(ran_leaves, flags) if not ok][:3]} lost {context}"
            )
    elif durability == "sync":
        for a, gone in zip(killed, lost):
            lost_steps = sorted(i for name, i in gone if name == "step")
            lost_leaves = sorted(i for name, i in gone if name == "leaf")
            assert len(lost_steps) <= 1, f"kill of {a.pid} lost steps {lost_steps} {context}"
            assert len(lost_leaves) <= WORKERS + 1, (
                f"kill of {a.pid} lost {len(lost_leaves)} leaves, more than {WORKERS} workers "
                f"+ the entrypoint thread could run at once: {lost_leaves} {context}"
            )
            assert not (lost_steps and lost_leaves), (
                f"kill of {a.pid} lost {lost_steps} and {lost_leaves} {context}"
            )
        assert reruns <= len(killed) * (WORKERS + 1), context

    # (d) the database is consistent
    check_consistent(db, thread, want, len(runs))
    if is_async:
        asyncio.run(acheck_consistent(db, thread, want))


def check_consistent(db: str, thread: str, want: dict[str, int], n_tasks: int) -> None:
    if not cw.is_postgres(db):
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    config = {"configurable": {"thread_id": thread}}
    ran: list[str] = []
    with open_saver(db) as saver:
        workflow = cw.make_workflow(saver, ran.append)
        state = workflow.get_state(config)
        assert state.values == want
        assert state.next == ()
        history = list(saver.list(config))
        assert [t.metadata["step"] for t in history] == [0, -1], "checkpoints: input, loop"
        parent = history[0].parent_config
        assert parent is not None
        assert parent["configurable"]["checkpoint_id"] == history[1].checkpoint["id"]
        assert len(list(saver.list(None))) == 2
        assert sum(w[1] == RETURN for w in history[1].pending_writes or ()) == n_tasks
        for tup in history:  # each checkpoint loads on its own
            again = saver.get_tuple(tup.config)
            assert again is not None and again.checkpoint["id"] == tup.checkpoint["id"]
        states = list(workflow.get_state_history(config))
        assert [s.config for s in states] == [t.config for t in history]
        # resuming the finished thread runs nothing
        workflow.invoke(None, config, durability="sync")
        assert ran == []
        assert workflow.get_state(config).values == want


async def acheck_consistent(db: str, thread: str, want: dict[str, int]) -> None:
    """What the async API sees of the finished thread: the result, and a resume
    that runs nothing."""
    config = {"configurable": {"thread_id": thread}}
    ran: list[str] = []
    async with cw.open_async_saver(db) as saver:
        workflow = cw.make_async_workflow(saver, ran.append)
        state = await workflow.aget_state(config)
        assert state.values == want
        assert state.next == ()
        assert await workflow.ainvoke(None, config, durability="sync") == want
        assert ran == []
        assert len([t async for t in saver.alist(config)]) == 2


def _summary(attempts: list[Attempt], total: float) -> str:
    killed = [a for a in attempts if a.killed]
    phases = Counter(_phase(a) for a in killed)
    lost = [len(set(a.executed) - a.saved_after) for a in killed]
    return (
        f"{len(attempts)} attempts in {total:.1f}s, {len(killed)} kills "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(phases.items()))}); "
        f"executions: {sum(len(a.executed) for a in attempts)}; "
        f"lost per kill: {lost}"
    )


def _phase(a: Attempt) -> str:
    """Where a kill landed, judged from what the attempt logged."""
    if not a.how:
        return "start-up"
    if not a.executed:
        return f"before tasks ({a.how})"
    name = a.executed[-1][0]
    return "chain" if name == "step" else "fan-out"


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_crash_sqlite(tmp_path: Path, durability: str) -> None:
    seed = RUN_SEED + (1 if durability == "sync" else 2)
    crash_until_done(str(tmp_path / "state.db"), "crash", tmp_path, durability, seed)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_crash_postgres(
    tmp_path: Path, postgres_database: Callable[[str], str], durability: str
) -> None:
    dsn = postgres_database(f"pregelkit_crash_{durability}")
    seed = RUN_SEED + (3 if durability == "sync" else 4)
    crash_until_done(dsn, "crash", tmp_path, durability, seed)


def test_crash_sqlite_async_api(tmp_path: Path) -> None:
    seed = RUN_SEED + 5
    crash_until_done(str(tmp_path / "state.db"), "crash", tmp_path, "sync", seed, api="async")


def test_crash_postgres_async_api(tmp_path: Path, postgres_database: Callable[[str], str]) -> None:
    dsn = postgres_database("pregelkit_crash_async_api")
    seed = RUN_SEED + 6
    crash_until_done(dsn, "crash", tmp_path, "sync", seed, api="async")


# --- two runs of one thread ---------------------------------------------------

BUSY_SEQ, BUSY_FAN, HOLD_AT = 12, 6, 4
BUSY_TIMEOUT = 20.0  # B's start-up and failure; far more than it takes, even on a busy machine


def _wait_for(what: str, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


def two_runs_of_one_thread(db: str, tmp_path: Path) -> None:
    """A holds the thread (its step HOLD_AT waits on a file); B resumes it without
    waiting: ThreadBusyError. C and D resume it with ``wait_for_thread``: they
    wait; A is killed; one of them takes the thread over and finishes it, the
    other waits for that one and finds the thread done. No two runs overlap."""
    thread = "busy thread"
    log, hold = tmp_path / "exec.log", tmp_path / "hold"
    log.touch()
    hold.touch()
    base = [
        sys.executable, str(SCRIPT), "--db", db, "--thread", thread, "--log", str(log),
        "--durability", "sync", "--seq", str(BUSY_SEQ), "--fan", str(BUSY_FAN),
        "--seed", str(SEED), "--sleep", "0.02", "--hold-at", str(HOLD_AT),
        "--hold-file", str(hold),
    ]  # fmt: skip
    want = cw.expected(SEED, BUSY_SEQ, BUSY_FAN)

    def records() -> list[tuple[str, ...]]:
        return _parse(log.read_text().splitlines())

    def logged(*rec: str) -> bool:
        return rec in records()

    def spawn(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*base, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )

    procs: list[subprocess.Popen[str]] = []
    try:
        a = spawn()
        procs.append(a)
        _wait_for("A's first steps", lambda: logged("step", str(HOLD_AT - 1), str(a.pid)))

        b = spawn()
        procs.append(b)
        try:
            b_out, b_err = b.communicate(timeout=BUSY_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"B neither failed nor finished in {BUSY_TIMEOUT}s while A held the thread: "
                f"it is running the thread too (it waits at step {HOLD_AT}, like A)"
            )
        assert a.poll() is None, "A ended before B tried the thread: the test proves nothing"
        assert b.returncode == cw.BUSY_EXIT, f"B: rc {b.returncode}\n{b_out}\n{b_err}"
        assert "ThreadBusyError" in b_err
        assert f"thread {thread!r} is being run by another process" in b_err, b_err
        assert "wait_for_thread" in b_err, b_err
        assert b_out == ""

        c, d = spawn("--wait"), spawn("--wait")
        procs += [c, d]
        for pid in (c.pid, d.pid):
            _wait_for(f"{pid} to begin", partial(logged, "begin", str(pid), "resume"))
        time.sleep(0.3)  # both are in lock_thread now, waiting
        assert a.poll() is None and c.poll() is None and d.poll() is None
        before_kill = records()
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=ATTEMPT_TIMEOUT)
        hold.unlink()  # after the kill: A never runs step HOLD_AT
        outs = {p.pid: p.communicate(timeout=ATTEMPT_TIMEOUT) for p in (c, d)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    for p in (c, d):
        out, err = outs[p.pid]
        assert p.returncode == 0, f"waiting run {p.pid} failed (rc {p.returncode}):\n{err}"
        assert json.loads(out) == want

    recs = records()
    tasks = [(r[0], int(r[1]), int(r[2])) for r in recs if r[0] in ("step", "leaf")]
    # while A held the thread, only A ran tasks (B, C and D only began)
    assert {r[2] for r in before_kill if r[0] in ("step", "leaf")} == {str(a.pid)}
    b_pid = _pid_of(before_kill, "busy")
    assert ("begin", str(b_pid), "resume") in before_kill
    assert all(r[0] not in ("step", "leaf") or r[2] != str(b_pid) for r in recs)
    # runs never interleave: each process's task executions form one block
    blocks = [pid for i, (_, _, pid) in enumerate(tasks) if i == 0 or tasks[i - 1][2] != pid]
    assert len(blocks) == len(set(blocks)) == 2, f"runs interleaved: {blocks}"
    assert blocks[0] == a.pid
    taker = blocks[1]
    other = d.pid if taker == c.pid else c.pid
    by_pid = {pid: [(name, i) for name, i, p in tasks if p == pid] for pid in blocks}
    assert by_pid[a.pid] == [("step", i) for i in range(HOLD_AT)]
    # A saved each step before starting the next ("sync"): the taker runs the rest only
    assert sorted(by_pid[taker]) == sorted(
        [("step", i) for i in range(HOLD_AT, BUSY_SEQ)] + [("leaf", i) for i in range(BUSY_FAN)]
    )
    # the other waiter (it began while A ran) got the thread only after the taker's
    # last task, found it finished and ran nothing
    last_task = max(i for i, r in enumerate(recs) if r[0] in ("step", "leaf"))
    assert recs.index(("end", str(other))) > last_task
    check_consistent(db, thread, want, BUSY_SEQ + BUSY_FAN)


def _pid_of(recs: list[tuple[str, ...]], kind: str) -> int:
    found = [int(r[1]) for r in recs if r[0] == kind]
    assert len(found) == 1, f"{kind} lines: {found}"
    return found[0]


def test_two_runs_of_one_thread_sqlite(tmp_path: Path) -> None:
    two_runs_of_one_thread(str(tmp_path / "state.db"), tmp_path)


def test_two_runs_of_one_thread_postgres(
    tmp_path: Path, postgres_database: Callable[[str], str]
) -> None:
    two_runs_of_one_thread(postgres_database("pregelkit_crash_busy"), tmp_path)
