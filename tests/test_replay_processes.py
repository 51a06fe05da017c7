"""Replay across processes: code edited between runs, clocks that disagree.

Each run is a fresh interpreter on one SQLite file, as a deployment would be:
the workflow module is written as v1, run to an interrupt, rewritten as v2
and resumed by a new process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

HEADER = """
import json, sys
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, patched, task
from pregelkit.types import interrupt

LOG = sys.argv[1]

def log(name, x):
    with open(LOG, "a") as f:
        f.write(f"{name}:{x}\\n")

@task
def reserve(x):
    log("reserve", x)
    return f"reserved-{x}"

@task
def charge(x):
    log("charge", x)
    return f"charged-{x}"

@task
def charge_v2(x):
    log("charge_v2", x)
    return f"charged-v2-{x}"
"""

V1 = """
def body(x):
    return [reserve(x).result(), charge(x).result()]
"""

V2_SWAPPED = """
def body(x):
    return [charge(x).result(), reserve(x).result()]
"""

V2_PATCHED = """
def body(x):
    if patched("pricing-v2"):
        return [reserve(x).result(), charge_v2(x).result()]
    return [reserve(x).result(), charge(x).result()]
"""

FOOTER = """
def make(saver):
    @entrypoint(checkpointer=saver)
    def order(x):
        got = body(x)
        answer = interrupt("ship?")
        return {"got": got, "answer": answer}
    return order
"""

RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[3])
import shop
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import NondeterminismError
from pregelkit.types import Command

db, thread, _, action = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with SqliteSaver.from_conn_string(db) as saver:
    wf = shop.make(saver)
    cfg = {"configurable": {"thread_id": thread}}
    try:
        if action == "start":
            out = wf.invoke(int(sys.argv[5]), cfg)
            print(json.dumps({"interrupted": "__interrupt__" in out}))
        else:
            print(json.dumps({"result": wf.invoke(Command(resume="yes"), cfg)}))
    except NondeterminismError as exc:
        print(json.dumps({"nondeterminism": str(exc), "position": exc.position}))
"""


class Deployment:
    """One SQLite file, one module directory, one execution log."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "app"
        self.dir.mkdir()
        self.db = str(tmp / "state.db")
        self.log = tmp / "ran.log"
        self.log.write_text("")
        self.runner = tmp / "run.py"
        self.runner.write_text(RUNNER)

    def deploy(self, body: str) -> None:
        source = HEADER.replace("LOG = sys.argv[1]", f"LOG = {str(self.log)!r}")
        (self.dir / "shop.py").write_text(textwrap.dedent(source + body + FOOTER))
        for cached in (self.dir / "__pycache__").glob("*"):
            cached.unlink()

    def run(self, thread: str, action: str, *args: str) -> dict[str, object]:
        proc = subprocess.run(
            [sys.executable, str(self.runner), self.db, thread, str(self.dir), action, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    def ran(self) -> list[str]:
        return self.log.read_text().split()


def test_edited_code_between_interrupt_and_resume_is_refused(tmp_path: Path) -> None:
    app = Deployment(tmp_path)
    app.deploy(V1)
    assert app.run("order-1", "start", "7") == {"interrupted": True}
    assert app.ran() == ["reserve:7", "charge:7"]
    app.deploy(V2_SWAPPED)
    refused = app.run("order-1", "resume")
    assert refused["position"] == 0
    assert "'reserve'" in str(refused["nondeterminism"])
    assert "'charge'" in str(refused["nondeterminism"])
    assert app.ran() == ["reserve:7", "charge:7"]  # nothing ran again
    # the refused resume changed nothing: v1 finishes the thread
    app.deploy(V1)
    done = app.run("order-1", "resume")
    assert done == {"result": {"got": ["reserved-7", "charged-7"], "answer": "yes"}}
    assert app.ran() == ["reserve:7", "charge:7"]


def test_patched_upgrade_while_threads_are_in_flight(tmp_path: Path) -> None:
    app = Deployment(tmp_path)
    app.deploy(V1)
    app.run("old", "start", "1")
    app.deploy(V2_PATCHED)
    app.run("new", "start", "2")
    old = app.run("old", "resume")
    new = app.run("new", "resume")
    assert old == {"result": {"got": ["reserved-1", "charged-1"], "answer": "yes"}}
    assert new == {"result": {"got": ["reserved-2", "charged-v2-2"], "answer": "yes"}}
    assert app.ran() == ["reserve:1", "charge:1", "reserve:2", "charge_v2:2"]


CLOCK = """
import sys, time
skew_ns = int(float(sys.argv[3]) * 1e9)
real = time.time_ns
time.time_ns = lambda: real() + skew_ns
time.time = lambda: (real() + skew_ns) / 1e9
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task

@task
def step(x):
    return x + 1

with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    @entrypoint(checkpointer=saver)
    def counter(x, previous=None):
        return step((previous or 0) + x).result()

    cfg = {"configurable": {"thread_id": sys.argv[2]}}
    print(counter.invoke(1, cfg))
"""


def test_checkpoint_ids_follow_the_thread_not_the_clock(tmp_path: Path) -> None:
    """A process whose clock runs an hour ahead, then ones an hour and a day
    behind, all continue one thread: every new checkpoint sorts last."""
    script = tmp_path / "clock.py"
    script.write_text(CLOCK)
    db = str(tmp_path / "state.db")
    outputs = []
    for skew in ("3600", "0", "-3600", "-86400", "0"):
        proc = subprocess.run(
            [sys.executable, str(script), db, "c", skew],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(int(proc.stdout.strip()))
    # each run sees the previous one's result: the latest checkpoint is found
    assert outputs == [2, 4, 6, 8, 10]
    from pregelkit.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(db) as saver:
        history = list(saver.list({"configurable": {"thread_id": "c"}}))
        ids = [t.checkpoint["id"] for t in history]
        steps = [t.metadata["step"] for t in history]
    assert ids == sorted(ids, reverse=True)
    assert steps == sorted(steps, reverse=True)
