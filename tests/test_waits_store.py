"""The storage of durable waits (``checkpoint._waits``, migration 6) on SQLite
and PostgreSQL: runs that sleep or wait keep their row and are claimed once
due, messages are taken exactly once and sent once per sender, what a run
waits for makes it due in its own transaction (a send, a child's end), and
an ``invoke`` run parks its wait under a lease only its death lets a worker
take over."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import pytest

from pregelkit.checkpoint import _runqueue, _waits
from pregelkit.checkpoint.runs import RunHandle, submit_run
from pregelkit.errors import LeaseLostError

NOW = 1_000_000.0
NONE = ("null", b"")


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def run(saver: Any, make: Any, *args: Any, **kwargs: Any) -> Any:
    return saver.run_queue(lambda d: make(d, *args, **kwargs), make.__name__)


def claim(saver: Any, now: float, limit: int = 10, workflow: str = "w") -> list[Any]:
    return list(run(saver, _runqueue.claim, "me", [workflow], limit, 30, now=now))


def running(saver: Any, thread: str) -> tuple[RunHandle, _runqueue.Claimed]:
    handle = submit_run(saver, "w", 1, cfg(thread))
    (claimed,) = claim(saver, NOW)
    assert claimed.thread_id == thread
    return handle, claimed


def lease(c: _runqueue.Claimed) -> tuple[str, int]:
    return c.run_id, c.fence


def test_a_sleeping_run_is_its_threads_run_and_is_claimed_once_due(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    handle, first = running(saver, "t")
    assert run(saver, _waits.suspend, lease(first), "sleeping", "sleep", NOW + 60, None, now=NOW)
    record = handle.record()
    assert (record.status, record.due_at, record.wait_kind, record.worker) == (
        "sleeping",
        NOW + 60,
        "sleep",
        None,
    )
    # the thread's active run: submitting again returns it
    assert submit_run(saver, "w", 2, cfg("t")) == handle
    assert claim(saver, NOW + 59) == []
    (again,) = claim(saver, NOW + 60)
    assert (again.run_id, again.fence, again.attempts) == (first.run_id, 2, 2)
    record = handle.record()
    assert (record.status, record.due_at, record.wait_kind) == ("running", None, None)
    # the old lease can no longer suspend it
    assert not run(saver, _waits.suspend, lease(first), "sleeping", "sleep", NOW, None, now=NOW)
    run(saver, _runqueue.finish, lease(again), "done", ("int", b"3"), None)
    assert handle.result(timeout=5) == 3


def test_a_send_wakes_the_run_waiting_on_its_topic_once_per_sender(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    handle, first = running(saver, "t")
    run(saver, _waits.suspend, lease(first), "waiting", "recv", None, "orders", now=NOW)
    assert handle.record().wait_topic == "orders"
    # another topic, or another thread, wakes nothing
    assert run(saver, _waits.send, "t", "other", ("json", b"1"), None, now=NOW)
    assert run(saver, _waits.send, "nobody-yet", "orders", ("json", b"2"), None, now=NOW)
    assert claim(saver, NOW + 1e6) == []
    assert run(saver, _waits.send, "t", "orders", ("json", b"3"), "s-1", now=NOW + 5)
    assert not run(saver, _waits.send, "t", "orders", ("json", b"3"), "s-1", now=NOW + 6)
    assert handle.record().due_at == NOW + 5
    (woken,) = claim(saver, NOW + 5)
    key = "recv-1"
    assert run(saver, _waits.take, "t", "orders", key, now=NOW) == ("json", b"3")
    assert run(saver, _waits.take, "t", "orders", key, now=NOW) == ("json", b"3")  # a replay
    assert run(saver, _waits.take, "t", "orders", "recv-2", now=NOW) is None  # sent once
    # the thread that did not exist finds its message when it does
    assert run(saver, _waits.take, "nobody-yet", "orders", "k", now=NOW) == ("json", b"2")
    assert woken.run_id == first.run_id


def test_a_wait_that_starts_after_what_it_waits_for_came_is_due_at_once(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    handle, first = running(saver, "t")
    run(saver, _waits.send, "t", "", ("json", b"1"), None, now=NOW)
    run(saver, _waits.suspend, lease(first), "waiting", "recv", NOW + 99, "", now=NOW + 1)
    assert handle.record().due_at == NOW + 1
    # a child that already ended
    child = submit_run(saver, "w", 1, cfg("child"), parent_thread="p")
    (c,) = claim(saver, NOW + 1, limit=1)  # the woken parent-to-be first (due earliest)
    assert c.run_id == first.run_id
    (c,) = claim(saver, NOW + 1)
    assert c.run_id == child.run_id and c.parent_thread == "p"
    run(saver, _runqueue.finish, lease(c), "done", None, None, child=("p", "child"), now=NOW)
    parent, p = running(saver, "p")
    run(saver, _waits.suspend, lease(p), "waiting", "child", None, "child", now=NOW + 2)
    assert parent.record().due_at == NOW + 2


@pytest.mark.parametrize("end", ["finish", "finish_and_claim", "cancel"])
def test_a_childs_end_wakes_its_parent(queue_db: tuple[str, Any], end: str) -> None:
    _, saver = queue_db
    parent, p = running(saver, "p")
    child = submit_run(saver, "w", 1, cfg("p/child/0"), parent_thread="p")
    run(saver, _waits.suspend, lease(p), "waiting", "child", None, "p/child/0", now=NOW)
    assert parent.record().due_at is None
    if end == "cancel":
        assert child.cancel() == "cancelled"
    else:
        (c,) = claim(saver, NOW)
        ending = partial(getattr(_runqueue, end), lease=lease(c), status="done", result=None)
        extra = {"worker_id": "me", "workflows": ["w"], "lease_seconds": 30}
        kwargs = extra if end == "finish_and_claim" else {}
        saver.run_queue(
            lambda d: ending(d, error=None, child=("p", "p/child/0"), now=NOW + 7, **kwargs),
            "end",
        )
    record = parent.record()
    if end == "finish_and_claim" and record.status == "running":
        return  # woken and claimed by the end that woke it (SQLite: the claim comes after)
    assert record.due_at is not None and record.due_at >= NOW
    (woken,) = claim(saver, record.due_at)
    assert woken.run_id == p.run_id


def test_a_run_without_a_parent_ends_in_the_statements_it_did(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    _, c = running(saver, "t")
    plan = _runqueue.finish_and_claim(
        _runqueue.SQLITE if "sqlite" in type(saver).__name__.lower() else _runqueue.POSTGRES,
        lease(c),
        "done",
        None,
        None,
        worker_id="me",
        workflows=["w"],
        lease_seconds=30,
    )
    postgres = "Postgres" in type(saver).__name__
    statements = [next(plan)]
    answers = [[(1, *[None] * 12)]] if postgres else [(c.run_id,), []]
    with pytest.raises(StopIteration):
        for answer in answers:
            statements.append(plan.send(answer))
    assert len(statements) == len(answers)


def test_messages_are_taken_exactly_once_by_concurrent_takers(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    count = 40
    for i in range(count):
        run(saver, _waits.send, "t", "", ("json", str(i).encode()), f"s{i}", now=NOW)
    taken: dict[str, list[int]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def taker(name: str) -> None:
        try:
            for n in range(count):
                got = run(saver, _waits.take, "t", "", f"{name}-{n}", now=NOW)
                if got is not None:
                    taken[name].append(int(got[1]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=taker, args=(name,)) for name in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(taken["a"] + taken["b"]) == list(range(count))
    # each taker's messages came in the order they were sent
    assert taken["a"] == sorted(taken["a"]) and taken["b"] == sorted(taken["b"])


def test_events_latest_wins(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    assert run(saver, _waits.get_event, "t", "k") is None
    run(saver, _waits.set_event, "t", "k", ("json", b"1"), now=NOW)
    run(saver, _waits.set_event, "t", "k", ("json", b"2"), now=NOW)
    assert run(saver, _waits.get_event, "t", "k") == ("json", b"2")
    assert run(saver, _waits.get_event, "u", "k") is None


def _park(saver: Any, run_id: str, thread: str, lease_seconds: float, **kw: Any) -> Any:
    args = {"status": "sleeping", "kind": "sleep", "due_at": NOW, "topic": None}
    args.update(kw)
    return run(
        saver,
        _waits.park,
        run_id,
        thread,
        "w",
        ("json", b"{}"),
        lease_seconds=lease_seconds,
        input=NONE,
        now=NOW,
        **args,
    )


def test_a_parked_run_is_left_to_its_process_while_its_lease_lasts(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    assert _park(saver, "r1", "t", 30) == "r1"
    handle = RunHandle(saver, "r1", "t")
    assert handle.status() == "sleeping"
    assert submit_run(saver, "w", 1, cfg("t")) == handle
    assert claim(saver, NOW + 1e6) == []  # due, but its process holds it
    assert run(saver, _waits.renew_park, "r1", 30)
    assert _park(saver, "r1", "t", 30, status="waiting", kind="recv", due_at=None, topic="")
    assert handle.record().wait_kind == "recv"
    assert run(saver, _waits.unpark, "r1")
    assert not run(saver, _waits.unpark, "r1")
    with pytest.raises(LookupError):
        handle.status()
    # a busy thread cannot park
    submit_run(saver, "w", 1, cfg("busy"))
    assert _park(saver, "r2", "busy", 30) is None


def test_a_parked_run_whose_process_died_is_resumed_by_a_worker(
    queue_db: tuple[str, Any],
) -> None:
    _, saver = queue_db
    assert _park(saver, "r1", "t", 0.05, due_at=NOW) == "r1"
    deadline = threading.Event()
    while not (found := claim(saver, NOW)):
        assert not deadline.wait(0.05)
    (taken,) = found
    assert (taken.run_id, taken.input, taken.attempts) == ("r1", NONE, 1)
    assert not run(saver, _waits.renew_park, "r1", 30)  # the process is told
    assert not run(saver, _waits.unpark, "r1")
    # a later invoke of the thread takes over a row no process holds
    run(saver, _waits.suspend, lease(taken), "waiting", "recv", None, "", now=NOW)
    assert _park(saver, "r9", "t", 30, status="waiting", kind="recv", due_at=None, topic="") == (
        "r1"
    )


def test_a_wait_does_not_make_the_claim_walk_the_waiting_runs(
    queue_db: tuple[str, Any],
) -> None:
    """10,000 sleeping and waiting runs: a claim reads the due ones through
    ``pregelkit_runs_due`` and the queued ones through ``pregelkit_runs_claim``,
    and a wake finds its waiter through ``pregelkit_runs_active``."""
    _, saver = queue_db
    postgres = "Postgres" in type(saver).__name__
    rows = [
        (f"r{i:05}", f"t{i}", "sleeping" if i % 2 else "waiting", NOW + i if i % 4 else None)
        for i in range(10_000)
    ]
    insert = (
        "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
        "input, config_type, config, due_at, wait_kind, wait_topic, created_at, updated_at) "
        "VALUES (?, ?, 'w', ?, 0, 'json', ?, 'json', ?, ?, 'recv', '', 0, 0)"
    )
    params = [(r, t, s, b"1", b"{}", due) for r, t, s, due in rows]
    # and 10,000 messages, two in three of them taken
    message = (
        "INSERT INTO pregelkit_messages (thread_id, topic, value_type, value, created_at, "
        "consumed_by) VALUES (?, '', 'json', ?, 0, ?)"
    )
    messages = [(f"t{i % 100}", b"1", f"k{i}" if i % 3 else None) for i in range(10_000)]
    if postgres:
        with saver.conn.connection() as conn, conn.cursor() as cur:
            cur.executemany(insert.replace("?", "%s"), params)
            cur.executemany(message.replace("?", "%s"), messages)
            cur.execute("ANALYZE pregelkit_runs")
            cur.execute("ANALYZE pregelkit_messages")
    else:
        saver.conn.executemany(insert, params)
        saver.conn.executemany(message, messages)
        saver.conn.execute("ANALYZE")
        saver.conn.commit()
    d = _runqueue.POSTGRES if postgres else _runqueue.SQLITE
    taking = _waits.take(d, "t1", "", "key", now=NOW)
    plans = {
        "claim": (next(_runqueue.claim(d, "me", ["w"], 4, 30, now=NOW)), "pregelkit_runs_due"),
        "wake": (next(_runqueue.wake(d, "t3", "recv", "", NOW)), "pregelkit_runs_active"),
        "taken": (next(taking), "pregelkit_messages_consumed"),
        "take": (taking.send(None), "pregelkit_messages_unconsumed"),
    }
    for name, (statement, index) in plans.items():
        plan = _explain(saver, statement)
        print(f"{d.name} {name}:\n{plan}")
        assert index in plan, plan
        if name == "claim":
            assert "pregelkit_runs_claim" in plan, plan
        assert "SCAN pregelkit_runs\n" not in plan + "\n" and "Seq Scan" not in plan, plan
    # the earliest due first, and only those due
    due = claim(saver, NOW + 2)
    assert [c.run_id for c in due] == ["r00001", "r00002"]


def _explain(saver: Any, statement: Any) -> str:
    if "Postgres" in type(saver).__name__:
        with saver.conn.connection() as conn:
            conn.execute("BEGIN")
            try:
                rows = conn.execute("EXPLAIN " + statement.sql, statement.params).fetchall()
            finally:
                conn.execute("ROLLBACK")
        return "\n".join(row[0] for row in rows)
    rows = saver.conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
    return "\n".join(str(row[-1]) for row in rows)


def test_lease_lost_ends_are_still_refused(queue_db: tuple[str, Any]) -> None:
    _, saver = queue_db
    _, c = running(saver, "t")
    with pytest.raises(LeaseLostError):
        run(saver, _runqueue.finish, (c.run_id, c.fence + 1), "done", None, None)


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_a_version_5_database_migrates_and_keeps_its_runs(
    db: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    from types import SimpleNamespace

    from pregelkit._internal._plan import drive, execute, migrate

    if db == "sqlite":
        import sqlite3

        from pregelkit.checkpoint.sqlite import SqliteSaver
        from pregelkit.checkpoint.sqlite import _sql as sql

        path = str(tmp_path / "v5.db")
        conn = sqlite3.connect(path, isolation_level=None)
        old = SimpleNamespace(**{**vars(sql), "MIGRATIONS": sql.MIGRATIONS[:5]})
        drive(migrate(old, "tables"), partial(execute, conn))  # type: ignore[arg-type]
        conn.execute(_V5_RUN, ("old", "t-old", b"1", b"{}"))
        conn.close()
        opened: Any = SqliteSaver.from_conn_string(path)
    else:
        import psycopg

        from pregelkit.checkpoint.postgres import PostgresSaver
        from pregelkit.checkpoint.postgres import _sql as sql

        dsn = request.getfixturevalue("postgres_database")("pregelkit_v5_migration")
        with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
            old = SimpleNamespace(**{**vars(sql), "MIGRATIONS": sql.MIGRATIONS[:5]})
            drive(migrate(old, "tables"), partial(execute, cur))  # type: ignore[arg-type]
            cur.execute(_V5_RUN.replace("?", "%s"), ("old", "t-old", b"1", b"{}"))
        opened = PostgresSaver.from_conn_string(dsn)
    with opened as saver:
        before = submit_run(saver, "w", 1, cfg("t"))  # on the latest version after setup
        versions = run(saver, lambda d: _fetch(d, "SELECT version FROM pregelkit_migrations"))
        assert [v for (v,) in versions] == list(range(1, len(sql.MIGRATIONS) + 1))
        # the run queued before the migration is still the thread's, and first in line
        assert submit_run(saver, "w", 1, cfg("t-old")).run_id == "old"
        (old_run, c) = claim(saver, NOW)
        assert (old_run.run_id, c.run_id) == ("old", before.run_id)
        run(saver, _waits.suspend, lease(c), "waiting", "recv", None, "", now=NOW)
        assert submit_run(saver, "w", 1, cfg("t")) == before
        run(saver, _waits.send, "t", "", ("json", b"1"), None, now=NOW)
        assert claim(saver, NOW)[0].run_id == before.run_id


_V5_RUN = (
    "INSERT INTO pregelkit_runs (run_id, thread_id, workflow, status, priority, input_type, "
    "input, config_type, config, created_at, updated_at) "
    "VALUES (?, ?, 'w', 'queued', 0, 'int', ?, 'json', ?, 0, 0)"
)


def _fetch(d: Any, sql: str) -> Any:
    rows = yield d.q(sql, (), "all")
    return rows


def test_a_worker_records_a_suspended_run_and_a_childs_end(
    queue_db: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import fleet_flows
    from pregelkit.errors import RunSuspended
    from pregelkit.worker._core import WorkerCore

    _, saver = queue_db
    core = WorkerCore([fleet_flows.chain], saver, concurrency=2, lease_seconds=30, worker_id="me")
    parent = submit_run(saver, "chain", 1, cfg("p"))
    child = submit_run(saver, "chain", 1, cfg("p/child/0"), parent_thread="p")
    claimed = run(saver, _runqueue.claim, "me", ["chain"], 2, 30, now=NOW)
    by_thread = {c.thread_id: c for c in claimed}
    for c in claimed:
        core.start(c)
    suspended = RunSuspended("waiting", "child", None, "p/child/0")
    with caplog.at_level(logging.INFO, logger="pregelkit.worker"):
        outcome = core.outcome(by_thread["p"], None, suspended)
        outcome.log()
    assert "waiting for child thread 'p/child/0'" in caplog.text
    assert outcome.plan is not None and not outcome.single
    assert saver.run_queue(outcome.plan, "suspend") is True
    assert parent.record().status == "waiting" and core.finished == 0
    # the child ends (the worker stopping: a plain finish) and wakes it
    core.stopping = True
    ended = core.outcome(by_thread["p/child/0"], 2, None)
    assert ended.plan is not None and not ended.single
    saver.run_queue(ended.plan, "finish")
    assert child.result(timeout=5) == 2
    assert parent.record().due_at is not None
    (woken,) = run(saver, _runqueue.claim, "me", ["chain"], 2, 30)
    assert woken.run_id == parent.run_id


def test_a_send_racing_a_suspend_is_never_lost(queue_db: tuple[str, Any]) -> None:
    """A run suspends to wait for a message while another connection sends
    it: whichever commits first, the run ends up due (after the claims of
    the test's next runs, which go by NOW)."""
    _, saver = queue_db
    lost = []
    for i in range(60):
        thread = f"race{i}"
        _, c = running(saver, thread)
        start = threading.Barrier(2)

        def suspend(c: Any = c, start: Any = start) -> None:
            start.wait()
            run(saver, _waits.suspend, lease(c), "waiting", "recv", None, "", now=NOW + 1)

        def send(thread: str = thread, start: Any = start) -> None:
            start.wait()
            run(saver, _waits.send, thread, "", ("json", b"1"), None, now=NOW + 1)

        threads = [threading.Thread(target=suspend), threading.Thread(target=send)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if RunHandle(saver, c.run_id, thread).record().due_at is None:
            lost.append(thread)
    assert not lost, f"wakes lost: {lost}"
