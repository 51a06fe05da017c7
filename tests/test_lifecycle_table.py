"""The lifecycle table of docs/guides/lifecycle.md is what the code does:
every cell, through the Python API and through the command line, on SQLite
and on PostgreSQL (``queue_db``). A cell the code disagrees with fails the
test, naming the cell and what happened instead."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lifecycle_harness import ACTIONS, OUTCOMES, STATES, Harness, read_table
from pregelkit.cli import main


def test_the_table_has_a_cell_for_every_state_and_action() -> None:
    table = read_table()
    assert tuple(table) == STATES
    for state, row in table.items():
        assert tuple(row) == ACTIONS, state
        for action, outcomes in row.items():
            assert set(outcomes) <= OUTCOMES, (state, action, outcomes)


@pytest.mark.parametrize("interface", ["api", "cli"])
def test_every_cell_of_the_table(
    interface: str, queue_db: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    url, saver = queue_db
    harness = Harness(url, saver, lambda: capfd.readouterr())
    side = 0 if interface == "api" else 1
    wrong = []
    final: dict[str, tuple[str, str | None]] = {}
    for state, row in read_table().items():
        for action, outcomes in row.items():
            if action == "Ctrl-C":
                continue  # tests/test_lifecycle_cli.py sends SIGINT to a real run
            thread = f"t{len(final)}"  # no state in it: errors must name the state
            harness.make(state, thread)
            with harness.hold(state, thread):
                before = harness.status(thread)
                assert before == state, (thread, before)
                run_before = harness.run_id(thread)
                result = harness.act(interface, action, thread)
                why = harness.disagreement(outcomes[side], state, thread, result, run_before)
                final[thread] = (state, harness.status(thread))
            if why is not None:
                wrong.append(f"{state} x {action} ({interface}: {outcomes[side]}): {why}")
    assert not wrong, "the table and the code disagree:\n" + "\n".join(wrong)
    # `pregelkit threads` itself lists the statuses the cells were judged by
    # (those of the running thread are held no more)
    assert main(["threads", "--db", url, "--json"]) == 0
    listed = {r["thread_id"]: r["status"] for r in json.loads(capfd.readouterr().out)}
    for thread, (state, status) in final.items():
        if state != "running":
            assert listed.get(thread) == status, (thread, listed.get(thread), status)


def test_a_run_here_is_refused_while_a_worker_holds_or_waits_for_the_thread(
    queue_db: tuple[str, Any], arun: Any
) -> None:
    """A worker's run holds no thread lock (its lease fences it): a run
    started outside the queue meanwhile is refused, not run beside it."""
    from pregelkit.checkpoint import _runqueue
    from pregelkit.checkpoint.runs import RunHandle
    from pregelkit.errors import ThreadBusyError, ThreadStateError

    url, saver = queue_db
    harness = Harness(url, saver, lambda: ("", ""))
    cfg = harness.cfg("w")
    harness.wf.submit(1, cfg)
    with pytest.raises(ThreadStateError, match="it is queued"):
        harness.wf.invoke(1, cfg)
    with pytest.raises(ThreadStateError, match="it is queued"):
        arun(harness.wf.ainvoke(None, cfg))
    # a worker claims it: the run row is running while its lease holds it
    claimed = saver.run_queue(lambda d: _runqueue.claim(d, "w-1", ["flow"], 1, 30.0), "claim")
    assert [c.thread_id for c in claimed] == ["w"]
    with pytest.raises(ThreadBusyError, match="A worker runs its queued run"):
        harness.wf.invoke(None, cfg)
    with pytest.raises(ThreadBusyError, match="A worker runs its queued run"):
        arun(harness.wf.ainvoke(1, cfg))
    RunHandle(saver, claimed[0].run_id, "w").cancel()
