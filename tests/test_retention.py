"""Retention (``pregelkit.durable.prune``, ``RetentionPolicy``) on SQLite and
PostgreSQL: what a policy removes, what it never removes (a thread resumes
after any prune), dry runs, and the edges (forks, subgraph namespaces,
interrupts, two prunes at once)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.durable import PruneReport, RetentionPolicy, aprune, prune
from pregelkit.func import entrypoint, task
from pregelkit.types import Command, interrupt
from pregelkit.worker import Worker


def _config(thread: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **more}}


TABLES = (
    "pregelkit_checkpoints, pregelkit_blobs, pregelkit_writes, pregelkit_thread_control, "
    "pregelkit_attempts, pregelkit_runs, pregelkit_workers, pregelkit_messages, "
    "pregelkit_events, pregelkit_retention, pregelkit_schedules, pregelkit_schedule_slots"
)


def pg_database(make: Any, name: str) -> str:
    """A new PostgreSQL database with the saver's tables."""
    url = str(make(name))
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    return url


def open_db(request: pytest.FixtureRequest, tmp_path: Path, pg: str) -> Iterator[tuple[str, Any]]:
    """(URL, saver) of an empty database: SQLite in ``tmp_path``, or the
    PostgreSQL database ``pg`` emptied (``request.param`` says which)."""
    if request.param == "sqlite":
        url = str(tmp_path / "r.db")
        with SqliteSaver.from_conn_string(url) as saver:
            saver.setup()
            yield url, saver
        return
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES}")
    with PostgresSaver.from_conn_string(pg) as saver:
        yield pg, saver


@pytest.fixture(scope="module")
def _pg(postgres_database: Any) -> str:
    return pg_database(postgres_database, "pregelkit_retention")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    pg = request.getfixturevalue("_pg") if request.param == "postgres" else ""
    yield from open_db(request, tmp_path, pg)


def _counter(saver: Any) -> Any:
    @task
    def add(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=saver)
    def counter(inp: dict[str, Any], *, previous: int | None = None) -> int:
        total = previous or 0
        for _ in range(inp.get("steps", 1)):
            total = add(total).result()
        if inp.get("ask"):
            total += interrupt("how much more?")
        return total

    return counter


def _rows(saver: Any, thread: str) -> int:
    return len(list(saver.list(_config(thread))))


# the policy


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, "keeps everything"),
        ({"keep_checkpoints": 0}, "int >= 1"),
        ({"keep_checkpoints": True}, "int >= 1"),
        ({"keep_checkpoints": 1.5}, "int >= 1"),
        ({"max_age": -1}, "finite duration >= 0"),
        ({"max_age": float("inf")}, "finite duration >= 0"),
        ({"max_age": float("nan")}, "finite duration >= 0"),
        ({"ended_runs_max_age": timedelta(seconds=-1)}, "finite duration >= 0"),
        ({"delete_threads_after": "30d"}, "timedelta or a number of seconds"),
    ],
)
def test_a_policy_is_checked_when_made(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        RetentionPolicy(**kwargs)


def test_prune_refuses_a_saver_without_sql_and_a_non_policy(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="InMemorySaver cannot be pruned"):
        prune(InMemorySaver(), RetentionPolicy(keep_checkpoints=1))
    with SqliteSaver.from_conn_string(str(tmp_path / "x.db")) as saver:
        saver.setup()
        with pytest.raises(TypeError, match="takes a RetentionPolicy"):
            prune(saver, {"keep_checkpoints": 1})  # type: ignore[arg-type]


def _first_result(saver: Any, thread: str) -> dict[str, Any]:
    """The config of the thread's oldest checkpoint after a step (value 1)."""
    loops = [t for t in saver.list(_config(thread)) if t.metadata.get("source") == "loop"]
    return dict(loops[-1].config["configurable"])


# what goes


def test_keep_checkpoints_keeps_the_latest_n_of_each_thread(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for thread in ("a", "b"):
        for _ in range(5):
            counter.invoke({"steps": 2}, _config(thread))
    before = {t: _rows(saver, t) for t in ("a", "b")}
    dry = prune(saver, RetentionPolicy(keep_checkpoints=3), dry_run=True)
    assert {t: _rows(saver, t) for t in ("a", "b")} == before
    report = prune(saver, RetentionPolicy(keep_checkpoints=3))
    assert isinstance(report, PruneReport) and not report.dry_run
    assert report.rows == dry.rows and report.bytes == dry.bytes
    assert report.rows["checkpoints"] == sum(n - 3 for n in before.values())
    assert report.bytes["checkpoints"] > 0 and report.rows["blobs"] > 0
    assert {t: _rows(saver, t) for t in ("a", "b")} == {"a": 3, "b": 3}
    # a second prune finds nothing more to do
    assert prune(saver, RetentionPolicy(keep_checkpoints=3)).total_rows == 0
    # the same values, and the history goes on from them
    assert counter.get_state(_config("a")).values == 10
    assert counter.invoke({"steps": 1}, _config("a")) == 11
    assert "would remove" in str(dry) and "removed" in str(report)


def test_max_age_drops_older_history_but_never_the_latest(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for _ in range(4):
        counter.invoke({"steps": 1}, _config("old"))
    assert prune(saver, RetentionPolicy(max_age=3600)).rows["checkpoints"] == 0
    before = _rows(saver, "old")
    report = prune(saver, RetentionPolicy(max_age=0))
    assert report.rows["checkpoints"] == before - 1 and report.rows["attempts"] > 0
    assert _rows(saver, "old") == 1
    assert counter.invoke({"steps": 1}, _config("old")) == 5


def test_an_interrupted_thread_keeps_what_its_answer_needs(db: tuple[str, Any]) -> None:
    """A thread interrupted for a year: its history goes, its question and
    the pending writes before it stay, and the answer finishes it."""
    _, saver = db
    counter = _counter(saver)
    counter.invoke({"steps": 3}, _config("q"))
    counter.invoke({"steps": 2, "ask": True}, _config("q"))
    report = prune(
        saver,
        RetentionPolicy(
            keep_checkpoints=1, max_age=0, delete_threads_after=0, ended_runs_max_age=0
        ),
    )
    assert report.threads_deleted == 0
    assert _rows(saver, "q") == 1
    state = counter.get_state(_config("q"))
    assert [i.value for i in state.interrupts] == ["how much more?"]
    assert counter.invoke(Command(resume=100), _config("q")) == 105


def test_delete_threads_after_deletes_only_ended_threads(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    counter.invoke({"steps": 2}, _config("ended"))
    counter.invoke({"steps": 2, "ask": True}, _config("asking"))
    handle = counter.submit({"steps": 1}, _config("queued"))
    # idle for an hour: none yet
    assert prune(saver, RetentionPolicy(delete_threads_after=3600)).threads_deleted == 0
    report = prune(saver, RetentionPolicy(delete_threads_after=0))
    assert report.threads_deleted == 1
    assert _rows(saver, "ended") == 0 and _rows(saver, "asking") == 1
    assert counter.invoke(Command(resume=1), _config("asking")) == 3
    assert Worker([counter], saver).run_until_idle() == 1
    assert handle.result(timeout=30) == 1
    # a thread deleted whole starts again from nothing
    assert counter.invoke({"steps": 1}, _config("ended")) == 1


def test_ended_runs_go_and_active_ones_stay(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for i in range(3):
        counter.submit({"steps": 1}, _config(f"r{i}"))
    Worker([counter], saver).run_until_idle()
    queued = counter.submit({"steps": 1}, _config("waiting"))
    report = prune(saver, RetentionPolicy(ended_runs_max_age=0))
    assert report.rows["runs"] == 3 and report.bytes["runs"] > 0
    assert queued.status() == "queued"
    Worker([counter], saver).run_until_idle()
    assert queued.result(timeout=30) == 1


def test_a_fork_a_queued_run_starts_from_stays(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for _ in range(4):
        counter.invoke({"steps": 1}, _config("f"))
    fork = _first_result(saver, "f")
    assert counter.get_state({"configurable": fork}).values == 1
    handle = counter.submit({"steps": 10}, {"configurable": dict(fork)})
    prune(saver, RetentionPolicy(keep_checkpoints=1, max_age=0))
    kept = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("f"))}
    assert fork["checkpoint_id"] in kept and len(kept) == 2
    Worker([counter], saver).run_until_idle()
    assert handle.result(timeout=30) == 11


def test_subgraph_namespaces_keep_their_latest(db: tuple[str, Any]) -> None:
    """A thread interrupted inside a subgraph: each namespace keeps its
    latest checkpoint, and the answer resumes the subgraph where it stopped."""
    from pregelkit.channels import LastValue
    from pregelkit.pregel import NodeBuilder, Pregel

    _, saver = db

    def ask(v: str) -> str:
        return v + str(interrupt("inner question"))

    inner = Pregel(
        nodes={
            "i1": NodeBuilder().subscribe_only("x").do(lambda v: v + "-i1").write_to("y"),
            "i2": NodeBuilder().subscribe_only("y").do(ask).write_to("z"),
        },
        channels={"x": LastValue(str), "y": LastValue(str), "z": LastValue(str)},
        input_channels="x",
        output_channels="z",
        name="inner",
    )
    outer = Pregel(
        nodes={
            "pre": NodeBuilder().subscribe_only("a").do(lambda v: v + "-pre").write_to("x"),
            "sub": NodeBuilder().subscribe_only("x").do(inner).write_to("y"),
            "post": NodeBuilder().subscribe_only("y").do(lambda v: v + "-post").write_to("out"),
        },
        channels={k: LastValue(str) for k in ("a", "x", "y", "out")},
        input_channels="a",
        output_channels="out",
        checkpointer=saver,
    )
    outer.invoke("go", _config("s"))
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(None)}
    assert len(namespaces) == 2
    report = prune(saver, RetentionPolicy(keep_checkpoints=1, max_age=0, delete_threads_after=0))
    assert report.threads_deleted == 0 and report.rows["checkpoints"] > 0
    after = list(saver.list(None))
    assert {t.config["configurable"]["checkpoint_ns"] for t in after} == namespaces
    assert len(after) == len(namespaces)
    assert outer.invoke(Command(resume="!"), _config("s")) == "go-pre-i1!-post"


def test_two_prunes_at_once_remove_each_row_once(db: tuple[str, Any]) -> None:
    _, saver = db
    counter = _counter(saver)
    for t in range(12):
        for _ in range(3):
            counter.invoke({"steps": 1}, _config(f"t{t:02}"))
    total = prune(saver, RetentionPolicy(keep_checkpoints=1), dry_run=True).rows["checkpoints"]
    reports: list[PruneReport] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            reports.append(prune(saver, RetentionPolicy(keep_checkpoints=1)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    assert sum(r.rows["checkpoints"] for r in reports) == total
    for t in range(12):
        assert counter.invoke({"steps": 1}, _config(f"t{t:02}")) == 4


def _async_saver(url: str) -> Any:
    """An async saver of the database at ``url`` (its tables made already)."""
    if url.startswith("postgres"):
        from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver

        return AsyncPostgresSaver.from_conn_string(url)
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    return AsyncSqliteSaver.from_conn_string(url)


def test_aprune_on_an_async_saver(db: tuple[str, Any], arun: Any) -> None:
    url, _ = db

    async def main() -> PruneReport:
        async with _async_saver(url) as saver:
            counter = _counter(saver)
            for _ in range(3):
                await counter.ainvoke({"steps": 1}, _config("a"))
            before = len([t async for t in saver.alist(_config("a"))])
            report = await aprune(saver, RetentionPolicy(keep_checkpoints=1))
            assert report.rows["checkpoints"] == before - 1
            assert await counter.ainvoke({"steps": 1}, _config("a")) == 4
            return report

    assert arun(main()).total_rows > 0


# every kept thread resumes, whatever the policy and the thread's state

STATES = ("done", "interrupted", "queued", "fork", "failed")
_fail_once: set[str] = set()


def _flaky_counter(saver: Any) -> Any:
    @task
    def add(x: int, thread: str) -> int:
        if thread in _fail_once:
            _fail_once.discard(thread)
            raise RuntimeError("transient")
        return x + 1

    @entrypoint(checkpointer=saver)
    def flaky(inp: dict[str, Any], *, previous: int | None = None) -> int:
        total = previous or 0
        for _ in range(inp.get("steps", 1)):
            total = add(total, inp["thread"]).result()
        if inp.get("ask"):
            total += interrupt("more?")
        return total

    return flaky


def _valid(**kwargs: Any) -> RetentionPolicy | None:
    try:
        return RetentionPolicy(**kwargs)
    except ValueError:
        return None


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    states=st.lists(st.sampled_from(STATES), min_size=1, max_size=6),
    keep=st.sampled_from([None, 1, 2]),
    max_age=st.sampled_from([None, 0, 3600]),
    runs_age=st.sampled_from([None, 0]),
    threads_after=st.sampled_from([None, 0, 86400]),
    dry_run=st.booleans(),
)
def test_every_kept_thread_resumes_after_a_prune(
    db: tuple[str, Any],
    states: list[str],
    keep: int | None,
    max_age: int | None,
    runs_age: int | None,
    threads_after: int | None,
    dry_run: bool,
) -> None:
    policy = _valid(
        keep_checkpoints=keep,
        max_age=max_age,
        ended_runs_max_age=runs_age,
        delete_threads_after=threads_after,
    )
    if policy is None:
        return
    _, saver = db
    flaky = _flaky_counter(saver)
    run = str(id(states)) + str(len(_fail_once))
    expected: dict[str, Any] = {}
    handles: dict[str, Any] = {}
    for i, state in enumerate(states):
        thread = f"{run}-{i}-{state}"
        for _ in range(3):  # history
            flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
        if state == "done":
            deleted = threads_after == 0 and not dry_run
            expected[thread] = ("invoke", 1 if deleted else 4)
        elif state == "interrupted":
            flaky.invoke({"steps": 1, "ask": True, "thread": thread}, _config(thread))
            expected[thread] = ("answer", 4 + 10)
        elif state == "queued":
            handles[thread] = flaky.submit({"steps": 2, "thread": thread}, _config(thread))
            expected[thread] = ("handle", 5)
        elif state == "fork":
            fork = _first_result(saver, thread)
            handles[thread] = flaky.submit({"steps": 2, "thread": thread}, {"configurable": fork})
            expected[thread] = ("handle", 3)
        else:
            _fail_once.add(thread)
            with pytest.raises(RuntimeError, match="transient"):
                flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
            deleted = threads_after == 0 and not dry_run
            expected[thread] = ("gone", 0) if deleted else ("resume", 4)
    prune(saver, policy, dry_run=dry_run)
    Worker([flaky], saver).run_until_idle()
    for thread, (how, value) in expected.items():
        if how == "invoke":
            got = flaky.invoke({"steps": 1, "thread": thread}, _config(thread))
        elif how == "answer":
            got = flaky.invoke(Command(resume=10), _config(thread))
        elif how == "handle":
            got = handles[thread].result(timeout=30)
        elif how == "gone":
            got = _rows(saver, thread)
        else:
            got = flaky.invoke(None, _config(thread))
        assert got == value, (thread, policy)


@pytest.mark.parametrize("batch", [1, 7, 500])
def test_chunks_of_any_size_remove_what_one_chunk_would(
    db: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Chunk boundaries inside a namespace, between namespaces and between
    scans: a dry run counts what the prune then removes, whatever the sizes."""
    from pregelkit.checkpoint import _retention

    _, saver = db
    counter = _counter(saver)
    for t in range(7):
        for _ in range(2 + t):
            counter.invoke({"steps": 1}, _config(f"c{t}"))
    for r in range(3):
        counter.submit({"steps": 1}, _config(f"r{r}"))
    Worker([counter], saver).run_until_idle()
    expected = sum(2 * (2 + t) - 2 for t in range(7))
    monkeypatch.setattr(_retention, "BATCH_ROWS", batch)
    monkeypatch.setattr(_retention, "THREADS_PER_SCAN", 3)
    policy = RetentionPolicy(keep_checkpoints=2, ended_runs_max_age=0)
    dry = prune(saver, policy, dry_run=True)
    report = prune(saver, policy)
    assert dry.rows == report.rows and dry.bytes == report.bytes
    assert report.rows["checkpoints"] == expected and report.rows["runs"] == 3
    assert all(_rows(saver, f"c{t}") == 2 for t in range(7))
    assert prune(saver, policy).total_rows == 0
