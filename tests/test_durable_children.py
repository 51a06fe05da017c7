"""Child workflows run in process (a parent started by ``invoke``): they
run together, a replay finds the same child, failures and cancels go
across, and a parent killed mid-child resumes it instead of starting it
again."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import ChildWorkflowError, RunCancelledError
from pregelkit.func import entrypoint
from pregelkit.pregel._api.children import ChildFailure
from pregelkit.types import Command, interrupt

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_children_run_together_and_their_results_come_back(
    saver: BaseCheckpointSaver[Any],
) -> None:
    started: list[float] = []

    @entrypoint(checkpointer=saver)
    def ship(parcel: str) -> str:
        started.append(time.monotonic())
        time.sleep(0.3)
        return f"shipped {parcel}"

    @entrypoint(checkpointer=saver)
    def order(parcels: list[str]) -> list[str]:
        handles = [ship.submit(p) for p in parcels]
        return [h.result() for h in handles]

    assert order.invoke(["a", "b", "c"], _config("o")) == ["shipped a", "shipped b", "shipped c"]
    assert max(started) - min(started) < 0.25  # all three started before the first ended
    children = sorted(
        t.config["configurable"]["thread_id"]
        for t in saver.list(None)
        if t.config["configurable"]["thread_id"].startswith("o/ship/")
    )
    assert len(set(children)) == 3


def test_async_children_in_process_run_on_the_parents_loop(
    async_saver: BaseCheckpointSaver[Any], arun: Any
) -> None:
    """An async child of an async parent runs on the parent's event loop,
    where the parent's async saver belongs: on a loop of its own (a thread
    with ``asyncio.run``) an AsyncPostgresSaver's pool and locks were
    another loop's, and a child whose saves met its parent's (several
    children waited for together) failed with 'bound to a different event
    loop' (found by test_durable_chaos)."""
    loops: list[Any] = []

    @entrypoint(checkpointer=async_saver)
    async def aship(parcel: str) -> str:
        loops.append(asyncio.get_running_loop())
        for _ in range(3):
            await durable.aset_event("at", parcel)  # saves meeting the parent's
            await asyncio.sleep(0.05)
        return f"shipped {parcel}"

    @entrypoint(checkpointer=async_saver)
    async def aorder(parcels: list[str]) -> list[str]:
        handles = [await aship.asubmit(p) for p in parcels]
        return [await h.aresult() for h in handles]

    async def main() -> tuple[Any, list[str]]:
        out = await aorder.ainvoke(["a", "b", "c", "d"], _config("ao"))
        return asyncio.get_running_loop(), out

    loop, out = arun(main())
    assert out == ["shipped a", "shipped b", "shipped c", "shipped d"]
    assert loops == [loop] * 4


def test_a_replay_finds_the_same_child_and_does_not_run_it_again() -> None:
    saver = InMemorySaver()
    runs: list[str] = []

    @entrypoint(checkpointer=saver)
    def child(x: int) -> int:
        runs.append("child")
        return x * 2

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> list[Any]:
        handle = child.submit(x)
        value = handle.result()
        answer = interrupt("go on?")
        return [handle.thread_id, value, answer]

    parent.invoke(5, _config("p"))
    thread, value, answer = parent.invoke(Command(resume="yes"), _config("p"))
    assert (value, answer) == (10, "yes")
    assert thread.startswith("p/child/")
    assert runs == ["child"]


def test_a_child_with_its_own_thread_id() -> None:
    saver = InMemorySaver()

    @entrypoint(checkpointer=saver)
    def child(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> Any:
        handle = child.submit(x, {"configurable": {"thread_id": "named-child"}})
        return [handle.thread_id, handle.result()]

    assert parent.invoke(1, _config("pp")) == ["named-child", 2]
    assert child.get_state(_config("named-child")).values == 2


def test_a_failed_child_is_a_child_workflow_error_with_its_cause() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def child(x: int) -> int:
        raise KeyError(f"parcel {x}")

    @entrypoint(checkpointer=child.checkpointer)
    def parent(x: int) -> str:
        try:
            return str(child.submit(x).result())
        except ChildWorkflowError as exc:
            assert isinstance(exc.__cause__, KeyError)
            return f"caught {exc.error}"

    assert parent.invoke(3, _config("f")) == "caught KeyError: 'parcel 3'"


def test_a_failure_read_back_on_replay_keeps_type_and_message() -> None:
    saver = InMemorySaver()

    @entrypoint(checkpointer=saver)
    def child(x: int) -> int:
        raise ValueError("bad parcel")

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> Any:
        try:
            child.submit(x).result()
        except ChildWorkflowError as exc:
            caught = (exc.error, type(exc.__cause__).__name__)
        return [caught, interrupt("again?")]

    parent.invoke(1, _config("fr"))
    out = parent.invoke(Command(resume=1), _config("fr"))
    assert out[0][0] == "ValueError: bad parcel"
    # replayed from the record: the cause is the child's type and message
    assert out[0][1] in ("ValueError", ChildFailure.__name__)


def test_cancelling_the_parent_cancels_a_waited_child_but_not_a_detached_one(
    tmp_path: Path,
) -> None:
    from pregelkit.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        steps: dict[str, int] = {"slow": 0, "free": 0}

        @entrypoint(checkpointer=saver)
        def slow(name: str) -> str:
            from pregelkit.func import task

            @task
            def tick(i: int) -> int:
                steps[name] += 1
                time.sleep(0.05)
                return i

            for i in range(200):
                tick(i).result()
            return name

        @entrypoint(checkpointer=saver)
        def parent(x: int) -> Any:
            free = slow.submit("free", detach=True)
            waited = slow.submit("slow")
            return [waited.result(), free.result()]

        out: list[Any] = []
        runner = threading.Thread(
            target=lambda: out.append(_catch(lambda: parent.invoke(0, _config("cp")))),
            daemon=True,
        )
        runner.start()
        deadline = time.monotonic() + 30
        while steps["slow"] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        parent.cancel(_config("cp"))
        runner.join(30)
        assert isinstance(out[0], RunCancelledError)
        time.sleep(0.5)
        slow_steps, free_steps = steps["slow"], steps["free"]
        time.sleep(0.5)
        assert steps["slow"] == slow_steps  # cancelled with its parent
        assert steps["free"] > free_steps  # detached: still running


def test_cancelling_an_async_parent_cancels_its_waited_child(
    async_saver: BaseCheckpointSaver[Any], arun: Any
) -> None:
    """The async twin: the parent's ``aresult`` cancels the child through
    the async saver (a sync cancel on an AsyncPostgresSaver's own loop is
    refused: SyncCallOnLoopError)."""
    from pregelkit.func import task

    ticks = [0]

    @task
    async def tick(i: int) -> int:
        ticks[0] += 1
        await asyncio.sleep(0.05)
        return i

    @entrypoint(checkpointer=async_saver)
    async def aslow(n: int) -> int:
        for i in range(n):
            await tick(i)
        return n

    @entrypoint(checkpointer=async_saver)
    async def aparent(n: int) -> Any:
        return await (await aslow.asubmit(n)).aresult()

    async def main() -> tuple[Any, int, int]:
        running = asyncio.ensure_future(aparent.ainvoke(200, _config("acp")))
        async with asyncio.timeout(30):
            while ticks[0] < 3:
                await asyncio.sleep(0.01)
        await aparent.acancel(_config("acp"))
        out = await asyncio.gather(running, return_exceptions=True)
        await asyncio.sleep(0.5)
        seen = ticks[0]
        await asyncio.sleep(0.5)
        return out[0], seen, ticks[0]

    out, seen, later = arun(main())
    assert isinstance(out, RunCancelledError), out
    assert later == seen  # cancelled with its parent


def test_a_child_parked_in_process_names_its_parent(tmp_path: Path) -> None:
    """A child run in process that parks (a long wait) names its parent in
    its queue row, as a queued child does: if its process dies and a worker
    ends the child, that end wakes the parent, parked waiting for it (it
    waited for ever: found by test_durable_chaos, an invoke caller killed
    while parent and child were parked). And the parent's parked wait for a
    child in process is due as soon as the process's lease lapses."""
    from pregelkit import durable
    from pregelkit.checkpoint.sqlite import SqliteSaver

    db = str(tmp_path / "p.db")
    with SqliteSaver.from_conn_string(db) as saver:
        saver.setup()

        @entrypoint(checkpointer=saver)
        def napper(x: int) -> int:
            durable.sleep(1.5)  # parks: past SUSPEND_AFTER
            return x + 1

        @entrypoint(checkpointer=saver)
        def parent(x: int) -> int:
            return napper.submit(x).result()

        out: list[Any] = []
        runner = threading.Thread(target=lambda: out.append(parent.invoke(1, _config("pp"))))
        runner.start()
        conn = sqlite3.connect(db)
        try:
            deadline = time.monotonic() + 30
            rows: list[Any] = []
            while not rows:
                assert time.monotonic() < deadline
                rows = conn.execute(
                    "SELECT thread_id, parent_thread FROM pregelkit_runs "
                    "WHERE thread_id LIKE 'pp/napper/%' AND status = 'sleeping'"
                ).fetchall()
                time.sleep(0.02)
            assert [parent for _, parent in rows] == ["pp"]
            # the parent's row is due once the process's lease lapses: if it
            # died after the child ended here, nothing else would wake it
            # (the child's end is in no queue row: found by test_durable_chaos)
            waits = conn.execute(
                "SELECT wait_kind, due_at IS NOT NULL, lease_until IS NOT NULL "
                "FROM pregelkit_runs WHERE thread_id = 'pp'"
            ).fetchall()
            assert waits == [("child", 1, 1)]
        finally:
            conn.close()
        runner.join(30)
        assert out == [2]


def _catch(fn: Any) -> Any:
    try:
        return fn()
    except BaseException as exc:
        return exc


def test_submit_detach_outside_a_workflow_is_refused() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def wf(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="detach=True"):
        wf.submit(1, _config("x"), detach=True)


def test_a_parent_killed_while_its_child_runs_resumes_the_child(tmp_path: Path) -> None:
    """SIGKILL while the child is half-way: the resumed parent finds the same
    child thread and resumes it; no step of the child runs twice."""
    db, log = tmp_path / "k.db", tmp_path / "log"
    script = tmp_path / "flow.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from pregelkit.checkpoint.sqlite import SqliteSaver
            from pregelkit.func import entrypoint, task

            @task
            def step(i):
                with open({str(log)!r}, "a") as f:
                    f.write(f"{{i}}\\n")
                time.sleep(0.3)
                return i

            with SqliteSaver.from_conn_string({str(db)!r}) as saver:
                @entrypoint(checkpointer=saver)
                def child(n):
                    return sum(step(i).result() for i in range(n))

                @entrypoint(checkpointer=saver)
                def parent(n):
                    return child.submit(n).result() + 1000

                config = {{"configurable": {{"thread_id": "kp"}}}}
                given = None if sys.argv[1] == "resume" else 6
                print(parent.invoke(given, config, durability="sync"), flush=True)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    first = subprocess.Popen([sys.executable, str(script), "start"], env=env)
    deadline = time.monotonic() + 60
    while not (log.exists() and len(log.read_text().split()) >= 3):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    done = subprocess.run(
        [sys.executable, str(script), "resume"], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(1000 + sum(range(6)))]
    ran = [int(x) for x in log.read_text().split()]
    # each step at most twice (the one killed mid-way), and saved ones once
    assert sorted(set(ran)) == list(range(6))
    assert len(ran) - len(set(ran)) <= 1
