"""Durable waits on workers (SQLite and PostgreSQL): a long wait suspends
the run and frees its slot, a worker resumes it when it is due (a wake
time passed, a message sent, a child ended), and an ``invoke`` run whose
process died while it waited is taken over by a worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pregelkit import durable
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.runs import handle_of_thread
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import ChildWorkflowError, ThreadStateError
from pregelkit.func import entrypoint, task
from pregelkit.testing import FakeClock
from pregelkit.worker import Worker

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _until(condition: Any, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(connection string, saver) of an empty queue database."""
    if request.param == "sqlite":
        url = str(tmp_path / "q.db")
        with SqliteSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver
    else:
        url = request.getfixturevalue("postgres_database")("pregelkit_durable_workers")
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver


class Serving:
    """A worker serving in a thread of this process until the test ends."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _status(saver: BaseCheckpointSaver[Any], thread: str) -> str | None:
    handle = handle_of_thread(saver, thread)
    return None if handle is None else handle.status()


def test_a_sleep_suspends_the_run_and_a_worker_resumes_it_when_due(
    db: tuple[str, Any],
) -> None:
    _, saver = db
    ran: list[str] = []

    @task
    def note(what: str) -> str:
        ran.append(what)
        return what

    @entrypoint(checkpointer=saver)
    def napper(x: int) -> int:
        note("before").result()
        durable.sleep(3600)
        note("after").result()
        return x + 1

    @entrypoint(checkpointer=saver)
    def quick(x: int) -> int:
        return x * 2

    with FakeClock(skip_sleeps=False) as clock:
        handle = napper.submit(1, _config("nap"))
        serving = Serving(Worker([napper, quick], saver, concurrency=1, lease_seconds=5))
        try:
            _until(lambda: handle.status() == "sleeping")
            wait = durable.waiting(napper, _config("nap"))
            assert wait is not None and (wait.status, wait.kind) == ("sleeping", "sleep")
            # the sleeper holds no slot: a run queued now runs on the one slot
            assert quick.submit(4, _config("q")).result(timeout=30) == 8
            assert handle.status() == "sleeping"
            clock.advance(3601)
            assert handle.result(timeout=30) == 2
        finally:
            serving.stop()
    assert ran == ["before", "after"]


def test_a_message_wakes_a_waiting_run(db: tuple[str, Any]) -> None:
    _, saver = db

    @entrypoint(checkpointer=saver)
    def approver(claim: str) -> str:
        return f"{claim}: {durable.recv(topic='decision')}"

    handle = approver.submit("c1", _config("ap"))
    serving = Serving(Worker([approver], saver, concurrency=1, lease_seconds=5))
    try:
        _until(lambda: handle.status() == "waiting")
        wait = durable.waiting(approver, _config("ap"))
        assert wait is not None and (wait.kind, wait.topic, wait.due_at) == (
            "recv",
            "decision",
            None,
        )
        durable.send(saver, "ap", "approved", topic="decision")
        assert handle.result(timeout=30) == "c1: approved"
    finally:
        serving.stop()


def test_a_recv_timeout_on_a_worker_gives_none(db: tuple[str, Any]) -> None:
    _, saver = db

    @entrypoint(checkpointer=saver)
    def patient(x: int) -> Any:
        return durable.recv(timeout=1.5)

    handle = patient.submit(0, _config("pt"))
    serving = Serving(Worker([patient], saver, concurrency=1, lease_seconds=5))
    try:
        assert handle.result(timeout=30) is None
    finally:
        serving.stop()


def test_children_on_workers_and_a_failed_one(db: tuple[str, Any]) -> None:
    _, saver = db

    @entrypoint(checkpointer=saver)
    def shipment(parcel: str) -> str:
        if parcel == "lost":
            raise LookupError("no such parcel")
        return f"{parcel} shipped"

    @entrypoint(checkpointer=saver)
    def order(parcels: list[str]) -> list[str]:
        handles = [shipment.submit(p) for p in parcels]
        out = []
        for h in handles:
            try:
                out.append(h.result())
            except ChildWorkflowError as exc:
                out.append(f"failed: {exc.error}")
        return out

    handle = order.submit(["a", "lost", "b"], _config("ord"))
    serving = Serving(Worker([order, shipment], saver, concurrency=2, lease_seconds=5))
    try:
        assert handle.result(timeout=60) == [
            "a shipped",
            "failed: LookupError: no such parcel",
            "b shipped",
        ]
    finally:
        serving.stop()


@pytest.mark.parametrize("slow_saves", [False, True])
def test_an_invoke_run_whose_process_died_while_it_slept_is_resumed_by_a_worker(
    db: tuple[str, Any], tmp_path: Path, slow_saves: bool
) -> None:
    """With ``slow_saves`` the task's writes reach the database half a
    second late (``durability="async"`` saves them in the background): the
    sleep's queue row must not be saved before them, or the worker resumes
    from before the task and runs it again."""
    url, saver = db
    log = tmp_path / "log"
    script = tmp_path / "sleeper.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from pregelkit import durable
            from pregelkit.checkpoint.postgres import PostgresSaver
            from pregelkit.checkpoint.sqlite import SqliteSaver
            from pregelkit.func import entrypoint, task
            from pregelkit.pregel._api import waits

            waits.PARK_LEASE = 1.0  # the worker may take over a second after the death

            @task
            def note(what):
                with open({str(log)!r}, "a") as f:
                    f.write(what + "\\n")
                return what

            url = sys.argv[1]
            opened = (PostgresSaver if url.startswith("postgres") else SqliteSaver)
            with opened.from_conn_string(url) as saver:
                if {slow_saves!r}:
                    import time
                    put_writes = saver.put_writes

                    def slow(*args, **kwargs):
                        time.sleep(0.5)
                        return put_writes(*args, **kwargs)

                    saver.put_writes = slow

                @entrypoint(checkpointer=saver)
                def sleeper(x):
                    note("before").result()
                    durable.sleep(2.5)
                    note("after").result()
                    return x * 3

                if __name__ == "__main__":
                    sleeper.invoke(7, {{"configurable": {{"thread_id": "inv"}}}})
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, str(script), url], env=env)
    _until(lambda: _status(saver, "inv") == "sleeping")
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)

    @task
    def note(what: str) -> str:
        with open(log, "a") as f:
            f.write(what + "\n")
        return what

    @entrypoint(checkpointer=saver)
    def sleeper(x: int) -> int:
        note("before").result()
        durable.sleep(2.5)
        note("after").result()
        return x * 3

    worker = Worker([sleeper], saver, concurrency=1, lease_seconds=5)
    assert worker.run_until_idle() == 1
    assert sleeper.get_state(_config("inv")).values == 21
    assert log.read_text().split() == ["before", "after"]


def test_a_run_sleeping_in_the_queue_is_not_raced_by_an_invoke(db: tuple[str, Any]) -> None:
    """A worker takes no thread lock to resume a suspended run, so a run
    started here meanwhile would race it: refused, with what to do; after
    cancel and uncancel, ``invoke(None)`` resumes it here."""
    _, saver = db

    @entrypoint(checkpointer=saver)
    def dozer(x: int) -> int:
        durable.sleep(3600)
        return x + 1

    with FakeClock(skip_sleeps=False) as clock:
        handle = dozer.submit(1, _config("dz"))
        worker = Worker([dozer], saver, concurrency=1, lease_seconds=5)
        serving = Serving(worker)
        try:
            _until(lambda: handle.status() == "sleeping")
        finally:
            serving.stop()
        with pytest.raises(ThreadStateError, match=r"sleeping in the run queue.*uncancel"):
            dozer.invoke(5, _config("dz"))
        with pytest.raises(ThreadStateError, match="sleeping in the run queue"):
            dozer.invoke(None, _config("dz"))
        dozer.cancel(_config("dz"))
        assert handle.status() == "cancelled"
        dozer.uncancel(_config("dz"))
        clock.advance(3600)
        assert dozer.invoke(None, _config("dz")) == 2


def test_two_tasks_sleeping_together_wake_at_the_earlier_time(db: tuple[str, Any]) -> None:
    """The longer sleep suspended the run first, the shorter one's record
    was then refused, and the run slept for the longer: the short task
    ended an hour late (about 2 runs in 3)."""
    _, saver = db
    ran: list[str] = []

    @task
    def nap(seconds: int) -> int:
        durable.sleep(seconds)
        ran.append(str(seconds))
        return seconds

    @entrypoint(checkpointer=saver)
    def two(x: int) -> list[int]:
        long, short = nap(3600), nap(60)
        return [long.result(), short.result()]

    with FakeClock(skip_sleeps=False) as clock:
        handle = two.submit(1, _config("two"))
        serving = Serving(Worker([two], saver, concurrency=1, lease_seconds=5))
        try:
            _until(lambda: handle.status() == "sleeping")
            wait = durable.waiting(two, _config("two"))
            assert wait is not None and wait.due_at is not None
            assert wait.due_at.timestamp() == pytest.approx(clock.now() + 60, abs=1)
            clock.advance(61)
            _until(lambda: ran == ["60"])
            _until(lambda: handle.status() == "sleeping")
            clock.advance(3600)
            assert handle.result(timeout=30) == [3600, 60]
        finally:
            serving.stop()
    assert ran == ["60", "3600"]


def test_cancelling_a_parent_on_a_worker_cancels_its_children_and_theirs(
    db: tuple[str, Any],
) -> None:
    """Queued, waiting and grandchildren runs were left in the queue when
    their parent on a worker was cancelled; a detached child is kept."""
    _, saver = db

    @entrypoint(checkpointer=saver)
    def leaf(x: int) -> int:
        return x

    @entrypoint(checkpointer=saver)
    def kid(x: int) -> Any:
        leaf.submit(x)
        return durable.recv(topic="never")

    @entrypoint(checkpointer=saver)
    def parent(x: int) -> Any:
        waited = kid.submit(1)
        kid.submit(2, config=_config("kept"), detach=True)
        return waited.result()

    handle = parent.submit(0, _config("par"))
    # leaf is not served: its run stays queued until cancelled
    serving = Serving(Worker([parent, kid], saver, concurrency=2, lease_seconds=5))
    try:
        _until(lambda: handle.status() == "waiting")
        _until(lambda: _status(saver, "kept") == "waiting")
        children = [handle_of_thread(saver, t) for t in _threads(saver) if t.startswith("par/")]
        _until(lambda: sorted(str(c and c.status()) for c in children) == ["queued", "waiting"])
        assert handle.cancel() == "cancelled"
        assert sorted(str(c and c.status()) for c in children) == ["cancelled", "cancelled"]
        assert _status(saver, "kept") == "waiting"
    finally:
        serving.stop()


def _threads(saver: BaseCheckpointSaver[Any]) -> set[str]:
    return {t.config["configurable"]["thread_id"] for t in saver.list(None)} | {
        r.thread_id for r in _runs(saver)
    }


def _runs(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    from pregelkit.checkpoint.runs import list_runs

    return list_runs(saver, limit=1000)


def test_a_worker_finishes_a_dead_invoke_parent_whose_child_was_mid_sleep(
    db: tuple[str, Any], tmp_path: Path
) -> None:
    """The parent ran by ``invoke``, its child in the same process, both
    waiting (the child asleep, the parent for it) when the process is
    killed: a worker resumes the parent and hands the child to the queue
    (never runs it beside a worker that takes its parked row); each step
    runs once."""
    url, saver = db
    log = tmp_path / "log"
    script = tmp_path / "family.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from pregelkit import durable
            from pregelkit.checkpoint.postgres import PostgresSaver
            from pregelkit.checkpoint.sqlite import SqliteSaver
            from pregelkit.func import entrypoint, task
            from pregelkit.pregel._api import waits

            waits.PARK_LEASE = 1.0

            @task
            def note(what):
                with open({str(log)!r}, "a") as f:
                    f.write(what + "\\n")
                return what

            def build(saver):
                @entrypoint(checkpointer=saver)
                def kid(x):
                    note("kid-before").result()
                    durable.sleep(2.5)
                    note("kid-after").result()
                    return x * 10

                @entrypoint(checkpointer=saver)
                def mom(x):
                    note("mom-before").result()
                    value = kid.submit(x).result()
                    note("mom-after").result()
                    return value + 1

                return mom, kid

            if __name__ == "__main__":
                url = sys.argv[1]
                opened = PostgresSaver if url.startswith("postgres") else SqliteSaver
                with opened.from_conn_string(url) as saver:
                    mom, _ = build(saver)
                    mom.invoke(4, {{"configurable": {{"thread_id": "fam"}}}}, durability="sync")
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, str(script), url], env=env)
    _until(lambda: log.exists() and "kid-before" in log.read_text().split())
    _until(lambda: _status(saver, "fam") == "waiting")
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    sys.path.insert(0, str(tmp_path))
    try:
        import family  # type: ignore[import-not-found]

        family.LOG = str(log)
        mom, kid = family.build(saver)
        worker = Worker([mom, kid], saver, concurrency=2, lease_seconds=5)
        serving = Serving(worker)
        try:
            _until(lambda: mom.get_state(_config("fam")).values == 41, 60)
        finally:
            serving.stop()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("family", None)
    ran = log.read_text().split()
    assert sorted(ran) == sorted(["mom-before", "kid-before", "kid-after", "mom-after"])
