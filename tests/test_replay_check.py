"""The replay check (issue 31, part 2): ``pregelkit.testing.replay_check`` and
``pregelkit replay-check`` replay the threads in flight against new code,
run no task body, write nothing, and find the threads a resume would fail."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.cli import main as cli_main
from pregelkit.testing import ReplayReport, replay_check

import replay_check_flows as flows
from replay_check_flows import BODIES, build

HERE = Path(__file__).parent


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _record(saver: Any, version: int, n: int, thread: str, **flags: Any) -> None:
    wf = build(version, saver)
    try:
        wf.invoke({"n": n, **flags}, _config(thread))
    except ValueError:
        assert flags.get("fail")


def _check(version: int, saver: Any, **kw: Any) -> ReplayReport:
    BODIES.clear()
    report = replay_check(build(version), saver, **kw)
    assert BODIES == [], "a replay check ran task bodies"
    return report


def test_an_interrupted_thread_is_ok_with_the_same_code_and_mismatched_with_another(
    saver: BaseCheckpointSaver[Any],
) -> None:
    _record(saver, 1, 7, "t7")
    _record(saver, 1, 3, "t3")
    report = _check(1, saver)
    assert report.ok
    assert {(t.thread_id, t.stopped_at) for t in report.threads} == {
        ("t7", "interrupt"),
        ("t3", "interrupt"),
    }
    report = _check(2, saver)
    assert not report.ok
    [bad] = report.failures
    assert (bad.thread_id, bad.status, bad.position, bad.parent) == ("t7", "mismatch", 1, "order")
    assert bad.recorded is not None and bad.new is not None
    assert "charge" in bad.recorded and "charge" in bad.new and bad.recorded != bad.new
    assert bad.patched_fixes is True
    assert _check(3, saver).ok  # the change behind patched(): old threads keep the old path


def test_a_removed_patch_is_not_fixed_by_patched(saver: BaseCheckpointSaver[Any]) -> None:
    _record(saver, 3, 7, "new")  # started under the patch: records its marker
    assert _check(3, saver).ok
    [bad] = _check(4, saver).failures
    assert bad.recorded == "patched('triple')" and bad.patched_fixes is False


def test_a_failed_thread_stops_at_the_failed_call_and_a_dropped_call_is_a_mismatch(
    saver: BaseCheckpointSaver[Any],
) -> None:
    _record(saver, 1, 3, "failed", fail=True)
    [check] = _check(1, saver).threads
    assert check.ok and "ship" in check.stopped_at  # the frontier: the call that failed
    [bad] = _check(5, saver).failures  # returns before the recorded charge
    assert (bad.status, bad.position, bad.new) == ("mismatch", 1, "nothing (it returns before)")


def test_nested_calls_of_an_unfinished_task_are_checked(saver: BaseCheckpointSaver[Any]) -> None:
    _record(saver, 1, 3, "nested", nested=True, fail=True)
    [check] = _check(1, saver).threads
    assert check.ok and "ship" in check.stopped_at and "pack" in check.stopped_at
    [bad] = _check(6, saver).failures
    assert (bad.parent, bad.position) == ("pack", 0)


def test_finished_threads_are_skipped_and_threads_and_since_select(
    saver: BaseCheckpointSaver[Any],
) -> None:
    from pregelkit.types import Command

    _record(saver, 1, 7, "done")
    build(1, saver).invoke(Command(resume="go"), _config("done"))
    _record(saver, 1, 7, "open")
    report = _check(2, saver)
    assert [t.thread_id for t in report.threads] == ["open"] and report.skipped == 1
    assert _check(2, saver, threads=["done"]).threads == []
    assert len(_check(2, saver, since=60).threads) == 1
    time.sleep(0.01)
    assert _check(2, saver, since=0.005).threads == []


def test_async_workflows(saver: BaseCheckpointSaver[Any], arun: Any) -> None:
    for n in (3, 7):
        arun(build(1, saver, is_async=True).ainvoke({"n": n}, _config(f"a{n}")))
    BODIES.clear()
    assert replay_check(build(1, is_async=True), saver).ok
    [bad] = replay_check(build(2, is_async=True), saver).failures
    assert (bad.thread_id, bad.position) == ("a7", 1)
    assert replay_check(build(3, is_async=True), saver).ok
    assert BODIES == []


def _kill_during(url: str, thread: str, n: int, how: str, is_async: bool = False) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    args = [sys.executable, str(HERE / "replay_check_flows.py"), url, thread, str(n), how]
    done = subprocess.run(
        [*args, "async"] if is_async else args, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 9, done.stderr.decode()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_crashed_sleeping_and_waiting_threads(queue_db: tuple[str, Any], is_async: bool) -> None:
    url, saver = queue_db
    _kill_during(url, "crashed", 7, "crash", is_async)
    _kill_during(url, "sleeping", 3, "sleep", is_async)
    _kill_during(url, "waiting", 4, "recv", is_async)
    report = replay_check(build(1, is_async=is_async), saver)
    stops = {t.thread_id: t.stopped_at for t in report.threads}
    assert report.ok, report.failures
    assert "crash" in stops["crashed"] and stops["sleeping"].startswith("sleep")
    assert stops["waiting"].startswith("recv on 'go'")
    [bad] = replay_check(build(2, is_async=is_async), saver).failures
    assert bad.thread_id == "crashed"
    [bad] = replay_check(build(6, is_async=is_async), saver, threads=["sleeping"]).failures
    assert bad.position == 0


def _contents(url: str, saver: Any) -> tuple[dict[str, int], str]:
    """Rows per table and a digest of every row of every table."""
    if url.startswith("postgres"):
        with saver.conn.connection() as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'public' ORDER BY table_name"
                )
            ]
            rows = {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}
    else:
        import sqlite3

        with sqlite3.connect(url) as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            rows = {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    return {n: len(r) for n, r in rows.items()}, digest


def test_a_planted_change_among_1000_threads_writing_nothing(queue_db: tuple[str, Any]) -> None:
    """1,000 threads recorded by version 1 (900 stopped at an interrupt, 50
    failed, 50 finished); version 2 changes a call only the 10 threads with
    n % 100 == 7 made: the check names exactly them, and passes once the
    change is behind patched(). Nothing in the database changes."""
    url, saver = queue_db
    wf = build(1, saver)
    for n in range(1000):
        flags = {"fail": True} if n % 20 == 1 else {}
        try:
            wf.invoke({"n": n, **flags}, _config(f"t{n}"), durability="exit")
        except ValueError:
            pass
    from pregelkit.types import Command

    for n in range(0, 1000, 20):
        wf.invoke(Command(resume="go"), _config(f"t{n}"), durability="exit")
    before = _contents(url, saver)
    report = _check(2, saver)
    assert (len(report.threads), report.skipped) == (950, 50)
    assert sorted(t.thread_id for t in report.failures) == sorted(
        f"t{n}" for n in range(7, 1000, 100)
    )
    patched = _check(3, saver, threads=[f"t{n}" for n in range(1000)])  # by id, as the CLI
    assert patched.ok and len(patched.threads) == 950
    assert _contents(url, saver) == before
    kind = "postgres" if url.startswith("postgres") else "sqlite"
    print(
        f"\nreplay check of 1,000 threads ({kind}): listed by the saver {report.seconds:.2f} s, "
        f"by id {patched.seconds:.2f} s"
    )


def _write_flows(tmp_path: Path, version: int) -> str:
    path = tmp_path / f"order_v{version}_{uuid.uuid4().hex[:8]}.py"  # a module name of its own
    path.write_text(f"import replay_check_flows\n\norder = replay_check_flows.build({version})\n")
    return f"{path}:order"


def test_cli_exit_codes_and_json(
    queue_db: tuple[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """(--json writes to file descriptor 1 itself: capfd, not capsys.)"""
    url, saver = queue_db
    for n in (3, 7):
        _record(saver, 1, n, f"t{n}")
    assert cli_main(["replay-check", "--db", url, _write_flows(tmp_path, 1)]) == 0
    assert capfd.readouterr().out.startswith("ok: 2 thread(s) in flight checked")
    v2 = _write_flows(tmp_path, 2)
    assert cli_main(["replay-check", "--db", url, v2]) == 1
    out = capfd.readouterr().out
    assert out.startswith("t7: mismatch at call #1 of 'order'") and "patched" in out
    assert cli_main(["replay-check", "--db", url, v2, "--json"]) == 1
    doc = json.loads(capfd.readouterr().out)
    assert (doc["ok"], doc["checked"], doc["failed"]) == (False, 2, 1)
    [bad] = [t for t in doc["threads"] if t["status"] != "ok"]
    assert (bad["thread_id"], bad["position"], bad["patched_fixes"]) == ("t7", 1, True)
    assert cli_main(["replay-check", "--db", url, v2, "--thread", "t3"]) == 0
    assert cli_main(["replay-check", "--db", url, v2, "--since", "7d"]) == 1
    capfd.readouterr()
    assert cli_main(["replay-check", "--db", url, v2, "--thread", "nope", "--json"]) == 2
    assert json.loads(capfd.readouterr().out)["error"]["type"] == "unknown_thread"
    assert cli_main(["replay-check", "--db", url, _write_flows(tmp_path, 3)]) == 0


def test_importing_pregelkit_testing_does_not_load_the_engine() -> None:
    code = (
        "import sys; from pregelkit.testing import FakeClock; "
        "print('pregelkit.pregel.main' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert flows.build  # the flows module is importable from the tests' directory


def _waiting_flow(saver: Any, version: int) -> Any:
    from pregelkit.func import entrypoint

    @entrypoint(checkpointer=saver)
    def order(n: int) -> list[str]:
        steps = [flows.reserve(f"item{n}").result()]
        flows.durable.sleep(0.05)
        steps.append(flows.charge(n + (version == 2)).result())
        if version == 3:  # a new call, in code that swallows every exception, the frontier's too
            try:
                flows.ship(n).result()
            except Exception:
                steps.append("caught")
        if version == 4:
            steps.append(steps[0]["total"])  # fails: the recorded result is a str
        steps.append(flows.interrupt("ship?"))
        return steps

    return order


def test_a_due_sleep_is_replayed_past_and_a_swallowed_frontier_still_stops() -> None:
    from pregelkit.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    _waiting_flow(saver, 1).invoke(5, _config("slept"))  # slept 50 ms in place, then charged
    BODIES.clear()
    [check] = replay_check(_waiting_flow(None, 1), saver).threads
    assert (check.status, check.stopped_at) == ("ok", "interrupt")
    [bad] = replay_check(_waiting_flow(None, 2), saver).failures  # the call after the sleep
    assert (bad.status, bad.position) == ("mismatch", 2)
    [check] = replay_check(_waiting_flow(None, 3), saver).threads
    assert check.ok and "ship" in check.stopped_at  # caught by the code, reported all the same
    [bad] = replay_check(_waiting_flow(None, 4), saver).failures
    assert bad.status == "error" and bad.stopped_at.startswith("TypeError")
    assert BODIES == []


def test_a_graph_is_refused(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A graph's pending nodes are task bodies: the check refuses to run them."""
    from pregelkit.channels import LastValue
    from pregelkit.checkpoint.memory import InMemorySaver
    from pregelkit.pregel import NodeBuilder, Pregel

    app = Pregel(
        nodes={"plan": NodeBuilder().subscribe_only("request").do(str.upper).write_to("plan")},
        channels={"request": LastValue(str), "plan": LastValue(str)},
        input_channels="request",
        output_channels="plan",
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(TypeError, match="checks @entrypoint workflows"):
        replay_check(app)
    db = str(tmp_path / "app.sqlite")
    from pregelkit.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(db) as saver:
        _record(saver, 1, 3, "t3")
    graph = tmp_path / f"graph_{uuid.uuid4().hex[:8]}.py"
    graph.write_text(
        "from pregelkit.channels import LastValue\n"
        "from pregelkit.pregel import NodeBuilder, Pregel\n"
        "app = Pregel(nodes={'plan': NodeBuilder().subscribe_only('request').do(str.upper)"
        ".write_to('plan')}, channels={'request': LastValue(str), 'plan': LastValue(str)}, "
        "input_channels='request', output_channels='plan')\n"
    )
    assert cli_main(["replay-check", "--db", db, f"{graph}:app", "--json"]) == 2
    assert json.loads(capfd.readouterr().out)["error"]["type"] == "usage"


def test_a_child_the_recorded_run_waited_for_is_replayed_past(tmp_path: Path) -> None:
    from pregelkit.checkpoint.sqlite import SqliteSaver
    from pregelkit.func import entrypoint

    with SqliteSaver.from_conn_string(str(tmp_path / "kids.db")) as saver:

        @entrypoint(checkpointer=saver)
        def shipment(parcel: str) -> str:
            return f"{parcel} shipped"

        def parent(version: int) -> Any:
            @entrypoint(checkpointer=saver)
            def order(n: int) -> list[str]:
                steps = [shipment.submit(f"parcel{n}").result()]
                steps.append(flows.charge(n + (version == 2)).result())
                steps.append(flows.interrupt("ship?"))
                return steps

            return order

        parent(1).invoke(5, _config("kids"))
        BODIES.clear()
        report = replay_check(parent(1), saver)
        assert [(t.thread_id, t.stopped_at) for t in report.threads] == [("kids", "interrupt")]
        assert report.skipped == 1  # the child's thread: it ended
        [bad] = replay_check(parent(2), saver).failures  # the call after the child's result
        assert (bad.thread_id, bad.position) == ("kids", 2)
        assert BODIES == []
