"""``pregelkit serve``'s run options driven by LangGraph's own client, sync
and async, on SQLite and PostgreSQL: each ``multitask_strategy`` (enqueue by
default) with creates racing on one thread, a rollback while the run is in
a task, five enqueued runs with the middle one cancelled, a server stopped
(SIGTERM) with runs enqueued, enqueued runs created through two server
processes on one database; a run forked from an older checkpoint
(``checkpoint_id``, ``checkpoint``); a run's ``metadata`` kept."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from test_serve import Server

FLOWS = Path(__file__).with_name("serve_multitask_flows.py")
SLOW = {"naps": 30, "pause": 0.1}
"""A run that takes ~3 s, in naps a cancel stops it between."""


def _config(tmp: Path) -> Path:
    path = tmp / "pregelkit.json"
    path.write_text(json.dumps({"graphs": {g: f"{FLOWS}:{g}" for g in ("tally", "confirm")}}))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str, Path]]:
    tmp = tmp_path_factory.mktemp("multitask")
    if request.param == "sqlite":
        db = str(tmp / "serve.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_multitask")
    srv = Server(["--config", str(_config(tmp)), "--db", db, "--concurrency", "4"], tmp)
    yield srv, db, tmp
    srv.stop()


@pytest.fixture
def client(served: tuple[Server, str, Path]) -> SyncLangGraphClient:
    return get_sync_client(url=served[0].url, api_key=None)


def _until(check: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


def _log(client: SyncLangGraphClient, tid: str) -> list[str]:
    values: Any = client.threads.get_state(tid)["values"]
    return list(values["log"])


def _running(client: SyncLangGraphClient, tid: str, run_id: str) -> None:
    _until(lambda: client.runs.get(tid, run_id)["status"] == "running", "the run runs")


def _race(n: int, create: Callable[[int], Any]) -> list[Any]:
    """``create(i)`` for i in range(n) at once: each one's answer or error."""

    def one(i: int) -> Any:
        try:
            return create(i)
        except ConflictError as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_enqueue_is_the_default_and_runs_in_order(client: SyncLangGraphClient) -> None:
    # the guide's snippet (docs/guides/serve.md, "Runs and the queue")
    tid = client.threads.create()["thread_id"]
    first = client.runs.create(tid, "tally", input={"add": "a", "naps": 30, "pause": 0.1})
    rest = [client.runs.create(tid, "tally", input={"add": x}) for x in "bc"]
    assert [r["status"] for r in rest] == ["pending", "pending"]  # enqueued
    assert client.runs.join(tid, rest[-1]["run_id"]) == {"log": ["a", "b", "c"]}

    busy = client.runs.create(tid, "tally", input={"add": "d", "naps": 30, "pause": 0.1})
    after = client.runs.wait(tid, "tally", input={"add": "e"}, multitask_strategy="rollback")
    assert after == {"log": ["a", "b", "c", "e"]}  # as if "d" never ran

    history = client.threads.get_history(tid)
    at_a = next(h["checkpoint"] for h in history if h["values"] == {"log": ["a"]})
    forked = client.runs.wait(
        tid, "tally", input={"add": "fork"}, checkpoint_id=at_a["checkpoint_id"]
    )
    assert forked == {"log": ["a", "fork"]}
    # beyond the snippet
    assert first["multitask_strategy"] == "enqueue"
    listed = [r["run_id"] for r in client.runs.list(tid)]
    assert busy["run_id"] not in listed
    assert listed[2:] == [r["run_id"] for r in (*rest[::-1], first)]
    assert {r["status"] for r in client.runs.list(tid)} == {"success"}
    # a stream enqueued behind a busy run waits for it, then streams its own run
    client.runs.create(tid, "tally", input={"add": "g", "naps": 5, "pause": 0.1})
    parts = list(client.runs.stream(tid, "tally", input={"add": "s"}, stream_mode="updates"))
    assert [p.event for p in parts][-2:] == ["updates", "end"]
    assert parts[-2].data == {"tally": {"log": ["a", "fork", "g", "s"]}}


def test_racing_creates_under_each_strategy(client: SyncLangGraphClient) -> None:
    # reject: of two creates racing on an idle thread, one runs, one is refused
    tid = client.threads.create()["thread_id"]
    answers = _race(
        2,
        lambda i: client.runs.create(
            tid, "tally", input={"add": str(i), **SLOW}, multitask_strategy="reject"
        ),
    )
    refused = [a for a in answers if isinstance(a, ConflictError)]
    [accepted] = [a for a in answers if not isinstance(a, ConflictError)]
    assert len(refused) == 1 and "reject" in str(refused[0])
    client.runs.cancel(tid, accepted["run_id"], wait=True)

    # enqueue: five racing, each runs once, one at a time, in the order created
    tid = client.threads.create()["thread_id"]
    runs = _race(
        5,
        lambda i: client.runs.create(tid, "tally", input={"add": str(i), "naps": 2, "pause": 0.05}),
    )
    for run in runs:
        client.runs.join(tid, run["run_id"])
    listed = client.runs.list(tid)  # newest first
    assert len(listed) == 5 and {r["status"] for r in listed} == {"success"}
    order = [r["run_id"] for r in listed][::-1]
    by_id = {r["run_id"]: i for i, r in enumerate(runs)}
    assert _log(client, tid) == [str(by_id[run_id]) for run_id in order]

    # interrupt and rollback: three racing on a busy thread; the last one
    # queued runs, every other one was stopped (rollback: and deleted)
    for strategy in ("interrupt", "rollback"):
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "tally", input={"add": "before"})
        busy = client.runs.create(tid, "tally", input={"add": "busy", **SLOW})
        _running(client, tid, busy["run_id"])
        answers = _race(
            3,
            lambda i, s=strategy, t=tid: client.runs.create(  # type: ignore[misc]
                t, "tally", input={"add": str(i), **SLOW}, multitask_strategy=s
            ),
        )
        accepted = [a for a in answers if not isinstance(a, ConflictError)]
        assert accepted, answers
        added = {a["run_id"]: str(i) for i, a in enumerate(answers) if a in accepted}
        last = client.runs.list(tid, limit=1)[0]
        assert client.runs.join(tid, last["run_id"])["log"][0] == "before"
        assert client.runs.get(tid, last["run_id"])["status"] == "success"
        for run in [busy, *accepted]:
            if run["run_id"] == last["run_id"]:
                continue
            if strategy == "interrupt":
                assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
            else:
                with pytest.raises(NotFoundError):
                    client.runs.get(tid, run["run_id"])
        if strategy == "rollback":
            assert _log(client, tid) == ["before", added[last["run_id"]]]
            assert len(client.runs.list(tid)) == 2


def test_a_rollback_while_the_run_is_in_a_task(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "tally", input={"add": "a"})
    before = [h["checkpoint"]["checkpoint_id"] for h in client.threads.get_history(tid)]
    busy = client.runs.create(tid, "tally", input={"add": "b", **SLOW})
    # its first naps are saved: it is mid-way, in a task
    _until(
        lambda: len(client.threads.get_history(tid)) > len(before),
        "the run saved a checkpoint",
    )
    _running(client, tid, busy["run_id"])
    after = client.runs.wait(tid, "tally", input={"add": "c"}, multitask_strategy="rollback")
    assert after == {"log": ["a", "c"]}
    with pytest.raises(NotFoundError):
        client.runs.get(tid, busy["run_id"])
    history = client.threads.get_history(tid, limit=100)
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    assert set(before) <= set(ids)
    assert all(h["metadata"].get("pregelkit_run") != busy["run_id"] for h in history)
    assert all("b" not in (h["values"] or {}).get("log", []) for h in history)
    # runs.cancel(action="rollback") on a running run: the thread is as before it
    again = client.runs.create(tid, "tally", input={"add": "d", **SLOW})
    _running(client, tid, again["run_id"])
    client.runs.cancel(tid, again["run_id"], action="rollback")
    with pytest.raises(NotFoundError):
        client.runs.get(tid, again["run_id"])
    assert _log(client, tid) == ["a", "c"]
    assert client.threads.get(tid)["status"] == "idle"
    # an ended run is not rolled back: the runs after it built on it
    ended = client.runs.list(tid, limit=1)[0]
    with pytest.raises(ConflictError, match="has ended"):
        client.runs.cancel(tid, ended["run_id"], action="rollback")
    assert _log(client, tid) == ["a", "c"]


def test_a_rollback_of_an_answer_leaves_the_question_open(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    asked = client.runs.wait(tid, "confirm", input={"naps": 30})
    question = asked["__interrupt__"]
    answering = client.runs.create(tid, "confirm", command={"resume": "yes"})
    _running(client, tid, answering["run_id"])
    client.runs.cancel(tid, answering["run_id"], action="rollback")
    state = client.threads.get_state(tid)
    assert state["next"] == ["confirm"] and state["tasks"][0]["interrupts"] == question
    assert client.threads.get(tid)["status"] == "interrupted"
    assert client.runs.wait(tid, "confirm", command={"resume": "no"}) == {"answer": "no"}


def test_five_enqueued_and_the_middle_one_cancelled(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    runs = [
        client.runs.create(tid, "tally", input={"add": str(i), "naps": 3, "pause": 0.1})
        for i in range(5)
    ]
    client.runs.cancel(tid, runs[2]["run_id"])
    assert client.runs.get(tid, runs[2]["run_id"])["status"] == "interrupted"
    assert client.runs.join(tid, runs[4]["run_id"]) == {"log": ["0", "1", "3", "4"]}
    statuses = [client.runs.get(tid, r["run_id"])["status"] for r in runs]
    assert statuses == ["success", "success", "interrupted", "success", "success"]
    # the running one cancelled: the next one still starts
    runs = [client.runs.create(tid, "tally", input={"add": x, **SLOW}) for x in "xy"]
    _running(client, tid, runs[0]["run_id"])
    client.runs.cancel(tid, runs[0]["run_id"])
    assert client.runs.join(tid, runs[1]["run_id"])["log"][-1] == "y"
    assert client.runs.get(tid, runs[0]["run_id"])["status"] == "interrupted"


def test_runs_from_an_older_checkpoint_and_their_metadata(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "tally", input={"add": "a"})
    client.runs.wait(tid, "tally", input={"add": "b"})
    history = client.threads.get_history(tid)
    at_a = next(h["checkpoint"] for h in history if h["values"] == {"log": ["a"]})
    forked = client.runs.wait(
        tid, "tally", input={"add": "fork"}, checkpoint_id=at_a["checkpoint_id"]
    )
    assert forked == {"log": ["a", "fork"]}
    assert _log(client, tid) == ["a", "fork"]
    # the whole checkpoint dict, as get_history gives it, through stream
    parts = list(client.runs.stream(tid, "tally", input={"add": "again"}, checkpoint=at_a))
    assert [p.data for p in parts if p.event == "values"][-1] == {"log": ["a", "again"]}
    with pytest.raises(NotFoundError, match="has no checkpoint"):
        client.runs.create(
            tid, "tally", input={"add": "x"}, checkpoint_id="1f000000-0000-6000-8000-000000000000"
        )
    run = client.runs.create(tid, "tally", input={"add": "m"}, metadata={"who": "ann", "n": 2})
    assert run["metadata"] == {"who": "ann", "n": 2}
    client.runs.join(tid, run["run_id"])
    got = client.runs.get(tid, run["run_id"])
    assert got["metadata"] == {"who": "ann", "n": 2} and got["multitask_strategy"] == "enqueue"
    assert client.runs.list(tid, limit=1)[0]["metadata"] == {"who": "ann", "n": 2}


def test_the_async_client(served: tuple[Server, str, Path]) -> None:
    async def main() -> None:
        client = get_client(url=served[0].url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        first = await client.runs.create(tid, "tally", input={"add": "a", **SLOW})
        queued = await asyncio.gather(
            *(client.runs.create(tid, "tally", input={"add": x}, metadata={"x": x}) for x in "bc")
        )
        assert {r["status"] for r in queued} == {"pending"}
        await client.runs.cancel(tid, first["run_id"])
        for run in queued:
            await client.runs.join(tid, run["run_id"])
        state = await client.threads.get_state(tid)
        assert sorted(state["values"]["log"]) == ["b", "c"]
        got = await client.runs.get(tid, queued[0]["run_id"])
        assert got["metadata"] == {"x": queued[0]["metadata"]["x"]}
        history = await client.threads.get_history(tid)
        one = next(h["checkpoint"] for h in history if len(h["values"]["log"]) == 1)
        forked = await client.runs.wait(
            tid,
            "tally",
            input={"add": "fork"},
            checkpoint_id=one["checkpoint_id"],
            multitask_strategy="reject",
        )
        assert forked == {"log": [*one_log(history, one), "fork"]}
        busy = await client.runs.create(tid, "tally", input={"add": "z", **SLOW})
        rolled = await client.runs.wait(
            tid, "tally", input={"add": "r"}, multitask_strategy="rollback"
        )
        assert rolled["log"][-1] == "r" and "z" not in rolled["log"]
        with pytest.raises(NotFoundError):
            await client.runs.get(tid, busy["run_id"])

    asyncio.run(main())


def one_log(history: list[Any], checkpoint: dict[str, Any]) -> list[str]:
    [found] = [h for h in history if h["checkpoint"] == checkpoint]
    return list(found["values"]["log"])


def test_enqueued_runs_outlive_a_sigterm_and_span_two_servers(
    served: tuple[Server, str, Path],
) -> None:
    _, db, tmp = served
    args = ["--config", str(_config(tmp)), "--db", db, "--concurrency", "2"]
    one = Server(args, tmp)
    client = get_sync_client(url=one.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    runs = [client.runs.create(tid, "tally", input={"add": "a", **SLOW})]
    runs += [client.runs.create(tid, "tally", input={"add": x}) for x in "bc"]
    # and a fork, handed back mid-way too: it goes on from its own checkpoints
    ft = client.threads.create()["thread_id"]
    for x in "xy":
        client.runs.wait(ft, "tally", input={"add": x})
    at_x = client.threads.get_history(ft)[-2]["checkpoint"]["checkpoint_id"]
    fork = client.runs.create(ft, "tally", input={"add": "fork", **SLOW}, checkpoint_id=at_x)
    _running(client, tid, runs[0]["run_id"])
    _running(client, ft, fork["run_id"])
    one.stop()  # SIGTERM: the running runs go back to the queue, the others stay pending
    two = Server(args, tmp)
    other = Server([*args, "--no-workers"], tmp)
    try:
        client = get_sync_client(url=two.url, api_key=None)
        elsewhere = get_sync_client(url=other.url, api_key=None)
        runs += [elsewhere.runs.create(tid, "tally", input={"add": "d"})]
        runs += [client.runs.create(tid, "tally", input={"add": "e"})]
        assert elsewhere.runs.join(tid, runs[-1]["run_id"]) == {"log": ["a", "b", "c", "d", "e"]}
        assert {client.runs.get(tid, r["run_id"])["status"] for r in runs} == {"success"}
        assert client.runs.join(ft, fork["run_id"]) == {"log": ["x", "fork"]}
    finally:
        other.stop()
        two.stop()


def test_interrupt_before_and_after_the_entrypoint(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "tally", input={"add": "a"})
    # a functional-API workflow has one node, its entrypoint ("*": every node)
    for stop in (["tally"], "*"):
        before = _log(client, tid)
        stopped = client.runs.wait(tid, "tally", input={"add": "b"}, interrupt_before=stop)
        assert stopped is None  # the entrypoint has not run: no output yet
        assert client.threads.get(tid)["status"] == "idle"
        state = client.threads.get_state(tid)
        assert state["next"] == ["tally"] and state["values"] == {"log": before}
        assert client.runs.wait(tid, "tally", input=None) == {"log": [*before, "b"]}
    # after it: the node ran, and nothing is left to run
    done = client.runs.wait(tid, "tally", input={"add": "c"}, interrupt_after=["tally"])
    assert done["log"][-1] == "c" and client.threads.get_state(tid)["next"] == []
    with pytest.raises(UnprocessableEntityError, match="tasks are not nodes"):
        client.runs.create(tid, "tally", input={"add": "x"}, interrupt_before=["nap"])


def test_interrupt_before_through_the_async_client_and_a_stream(
    served: tuple[Server, str, Path],
) -> None:
    async def main() -> None:
        client = get_client(url=served[0].url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        parts = [
            p
            async for p in client.runs.stream(
                tid, "tally", input={"add": "a"}, interrupt_before="*", stream_mode="updates"
            )
        ]
        assert parts[-1].event == "end"
        assert (await client.threads.get_state(tid))["next"] == ["tally"]
        assert await client.runs.wait(tid, "tally", input=None) == {"log": ["a"]}

    asyncio.run(main())


def test_a_cancel_through_the_library_stops_the_running_run_not_the_enqueued_one(
    served: tuple[Server, str, Path], client: SyncLangGraphClient
) -> None:
    """``cancel_thread_runs`` (what ``wf.cancel(config)`` does besides
    marking the thread) finds the thread's running run, not the newer
    enqueued one, which no worker holds; and the thread is ``busy`` while
    a run of it runs, whatever waits behind it."""
    from pregelkit.checkpoint.runs import cancel_thread_runs
    from pregelkit.cli._db import open_database

    _, db, _ = served
    tid = client.threads.create()["thread_id"]
    busy = client.runs.create(tid, "tally", input={"add": "a", **SLOW})
    behind = client.runs.create(tid, "tally", input={"add": "b"})
    _running(client, tid, busy["run_id"])
    assert client.runs.get(tid, behind["run_id"])["status"] == "pending"
    assert client.threads.get(tid)["status"] == "busy"
    with open_database(db, create=False) as opened:
        assert cancel_thread_runs(opened.saver, tid) is True
    _until(
        lambda: client.runs.get(tid, busy["run_id"])["status"] == "interrupted",
        "the running run is cancelled",
    )
    assert client.runs.join(tid, behind["run_id"]) == {"log": ["b"]}
