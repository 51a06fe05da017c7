"""A second Ctrl-C during ``stream`` walks away from the sync task still
running (``RunStop.walk_away``): the run raises at once instead of
waiting, the thread lock is free, and what the task finishes afterwards is
never saved, so the resume runs it again. Async: cancelling the run's task
(twice, as the CLI does on two Ctrl-Cs) leaves the same.

Each script signals itself once the task has started, and again until the
run returns, so nothing depends on the clock but a generous guard."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GUARD = 120

SCRIPT = """
import asyncio, json, os, signal, sys, threading, time
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task

LOG, DB, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
started, release = threading.Event(), threading.Event()

def note(line):
    with open(LOG, "a") as f:
        f.write(line + "\\n")

@task
def fetch(x):
    note("start")
    started.set()
    release.wait(60)  # finishes only when the test lets it, after the stop
    note("end")
    return x * 2

running = threading.Event()

def on_sigint(signum, frame):
    if running.is_set():  # Ctrl-C reaches the run only
        raise KeyboardInterrupt

def ctrl_c_until_stopped():
    # Ctrl-C again and again until the run has returned: the first stops it,
    # the second walks away from fetch
    started.wait(60)
    while running.is_set():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)

CFG = {"configurable": {"thread_id": "t"}}
with SqliteSaver.from_conn_string(DB) as saver:
    @entrypoint(checkpointer=saver)
    def flow(x):
        return fetch(x).result() + 1

    @entrypoint(checkpointer=saver)
    async def aflow(x):
        return await fetch(x) + 1

    async def cancel_twice():
        run = asyncio.create_task(aflow.ainvoke(5, CFG))
        while not started.is_set():
            await asyncio.sleep(0.01)
        run.cancel()
        await asyncio.sleep(0.3)
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            note("stopped")

    if MODE == "sync":
        signal.signal(signal.SIGINT, on_sigint)
        running.set()
        threading.Thread(target=ctrl_c_until_stopped, daemon=True).start()
        try:
            # streamed: tasks run on workers (invoke may run a lone call in
            # this thread, where the first Ctrl-C already ends it)
            for _ in flow.stream(5, CFG):
                pass
        except KeyboardInterrupt:
            note("stopped")
        finally:
            running.clear()
    else:
        # not asyncio.run: it would wait for fetch's thread before returning
        loop = asyncio.new_event_loop()
        loop.run_until_complete(cancel_twice())
    # the walked-away task ends now; its result must not be saved
    release.set()
    deadline = time.monotonic() + 60
    while "end" not in open(LOG).read() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    with saver.lock_thread("t"):  # free: no run holds it
        pass
    state = (flow if MODE == "sync" else aflow).get_state(CFG)
    writes = [w for w in saver.get_tuple(CFG).pending_writes or [] if w[1] == "__return__"]
    print(json.dumps({"writes": len(writes), "next": list(state.next)}))
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_second_ctrl_c_walks_away_and_saves_nothing_late(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "flow.py"
    script.write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "log"
    done = subprocess.run(
        [sys.executable, str(script), str(log), str(tmp_path / "db"), mode],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 0, done.stderr
    # stopped before the task ended: invoke did not wait for it
    assert log.read_text().splitlines() == ["start", "stopped", "end"], done.stderr
    assert '"writes": 0' in done.stdout, done.stdout
