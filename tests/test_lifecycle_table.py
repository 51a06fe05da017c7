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
