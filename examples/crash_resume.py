"""Crash and resume: a process killed mid-run picks up where it died.

A child process runs a five-step pipeline on a SQLite checkpoint file. The
parent kills it with SIGKILL (no cleanup, no ``finally``, no atexit) while
step 3 is running. The child runs with ``durability="sync"``, so every
finished task's result is committed before the run goes on (the default,
``"async"``, saves in the background and may lose the last few milliseconds
of work in a crash). Then the parent resumes the same thread with
``invoke(None, config)``: steps 0 to 2 finished before the crash, their
results were saved as they finished, so they are not run again; step 3
starts over, and step 4 runs for the first time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task

CONFIG = {"configurable": {"thread_id": "pipeline-1"}}
SLOW_STEP = 3
in_child = False


@task
def step(i: int) -> int:
    print(f"running step {i}", flush=True)
    if in_child and i == SLOW_STEP:
        time.sleep(60)  # the parent kills the child during this sleep
    return i * 10


@entrypoint()
def pipeline(steps: int) -> list[int]:
    return [step(i).result() for i in range(steps)]


def child(db: str) -> None:
    global in_child
    in_child = True
    with SqliteSaver.from_conn_string(db) as saver:
        app = pipeline.copy(checkpointer=saver)
        # "sync": each result is committed to the file before the run goes on
        app.invoke(5, CONFIG, durability="sync")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "pipeline.sqlite")
        print("child process: starting the pipeline")
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", db], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                print(f"  child: {line.rstrip()}")
                if line.startswith(f"running step {SLOW_STEP}"):
                    os.kill(proc.pid, signal.SIGKILL)
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
        print(f"child killed by SIGKILL (exit status {proc.returncode})")

        print("this process: resuming the same thread")
        with SqliteSaver.from_conn_string(db) as saver:
            app = pipeline.copy(checkpointer=saver)
            # the saved run still holds its input; the step that crashed is retried
            result = app.invoke(None, CONFIG)
        print(f"result: {result}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(sys.argv[sys.argv.index("--child") + 1])
    else:
        main()
