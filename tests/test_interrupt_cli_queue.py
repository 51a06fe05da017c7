"""Answering an interrupt of a thread whose runs go through the queue, from
the command line: ``submit --resume JSON --to ID`` and ``resume ... --to ID``
say which interrupt the answer is for, as ``resume`` does for a thread run
here; with several pending and no ``--to``, nothing is queued."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.cli import main
from pregelkit.cli._target import load_target
from pregelkit.worker import Worker

FLOWS = """
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt


@task
def ask(question):
    return interrupt(question)


@entrypoint()
def survey(questions):
    return [f.result() for f in [ask(q) for q in questions]]
"""


@pytest.fixture
def queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> Any:
    (tmp_path / "qflows.py").write_text(textwrap.dedent(FLOWS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "qflows", raising=False)  # each test its own file
    db = str(tmp_path / "queue.sqlite")
    graph = load_target("qflows.py:survey").graph

    class Queue:
        entry = "qflows.py:survey"

        def cli(self, *args: str) -> tuple[int, str, str]:
            code = main([*args, "--db", db])
            out, err = capfd.readouterr()
            assert "Traceback" not in err, err
            return code, out, err

        def work(self) -> None:
            with SqliteSaver.from_conn_string(db) as saver:
                Worker([graph], saver).run_until_idle()

        def pending(self) -> dict[str, str]:
            with SqliteSaver.from_conn_string(db) as saver:
                state = graph.copy(checkpointer=saver).get_state(
                    {"configurable": {"thread_id": "q1"}}
                )
                return {i.value: i.id for i in state.interrupts}

        def values(self) -> Any:
            with SqliteSaver.from_conn_string(db) as saver:
                return (
                    graph.copy(checkpointer=saver)
                    .get_state({"configurable": {"thread_id": "q1"}})
                    .values
                )

    return Queue()


def test_a_queued_answer_says_which_interrupt_it_is_for(queue: Any) -> None:
    entry = queue.entry
    code, _, err = queue.cli("submit", entry, "--input", '["name?", "age?"]', "--thread", "q1")
    assert code == 0, err
    queue.work()
    ids = queue.pending()
    assert set(ids) == {"name?", "age?"}

    code, out, err = queue.cli("submit", entry, "--resume", '"Ada"', "--thread", "q1")
    assert code == 2 and out == ""
    assert "waits at 2 interrupts" in err and "--to" in err
    code, _, err = queue.cli("resume", "q1", '"Ada"')  # resume queues too: the same rule
    assert code == 2 and "waits at 2 interrupts" in err
    assert queue.cli("runs", "--json", "--status", "queued")[1] == ""  # nothing was queued

    code, _, err = queue.cli(
        "submit", entry, "--resume", '"Ada"', "--thread", "q1", "--to", ids["name?"]
    )
    assert code == 0, err
    queue.work()
    assert queue.pending() == {"age?": ids["age?"]}

    stale = ["submit", entry, "--resume", '"Bob"', "--thread", "q1", "--to", ids["name?"]]
    code, _, err = queue.cli(*stale)
    assert code == 2 and "answered already" in err

    code, _, err = queue.cli("resume", "q1", "36")  # the one left: no --to needed
    assert code == 0, err
    queue.work()
    assert queue.values() == ["Ada", 36]


def test_the_refusal_shows_a_questions_control_characters_escaped(queue: Any) -> None:
    questions = json.dumps(["evil\x1b[31mred\nline", "plain"])
    assert queue.cli("submit", queue.entry, "--input", questions, "--thread", "q1")[0] == 0
    queue.work()
    code, _, err = queue.cli("resume", "q1", '"x"')
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "\x1b" not in err and "evil\\x1b[31mred line" in err
