"""check_crash_safety: kill at every save point, resume, compare (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crash_flows import asteps, email_then_steps, steps
from pregelkit.func import entrypoint
from pregelkit.testing import CrashSafetyError, check_crash_safety
from pregelkit.testing._crashreport import Crash, findings, load_log
from pregelkit.testing.pytest_plugin import crash_safety  # noqa: F401 - the fixture

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_side_effect_in_the_entrypoint_body_is_found() -> None:
    with pytest.raises(CrashSafetyError) as caught:
        check_crash_safety(email_then_steps, 3, durability="sync")
    error = caught.value
    # found wherever a save committed after the effect: after step 1's result and later
    assert len(error.failures) == 4
    assert error.report.save_points == {"sync": 6}
    first = error.failures[0]
    assert first.startswith(
        "durability='sync', SIGKILL after save point 3 of 6: "
        "the result of 'step' (call 1 of 'email_then_steps'), step 0"
    )
    assert "saved by then: [1] the checkpoint of step -1 (input)" in first
    assert "effect 'email' (in 'email_then_steps') ran again on resume" in first
    assert "move the effect into a @task" in first


@pytest.mark.parametrize("wf", [steps, asteps], ids=["sync", "async"])
def test_a_workflow_whose_effects_are_in_tasks_passes_in_every_mode(wf: Any) -> None:
    report = check_crash_safety(wf, 3)
    # the input checkpoint, three results, the entrypoint's, the last checkpoint
    assert report.save_points == {"sync": 6, "async": 6, "exit": 1}
    assert report.crash_points == 2 * 13
    assert sum(report.effects.values()) == 3 * 3


def test_the_fixture(crash_safety: Any) -> None:  # noqa: F811 - the plugin's fixture
    report = crash_safety(steps, 2, durability="exit")
    assert report.save_points == {"exit": 1}


@pytest.mark.parametrize(
    ("module", "name", "value"),
    [
        ("crash_resume", "pipeline", 5),
        ("fan_out", "best_word", ["pregel", "superstep", "channel"]),
        ("fan_out", "app", ["pregel", "superstep", "channel"]),
        ("human_in_the_loop", "write_document", ["pregel", "supersteps"]),
        ("quickstart", "report", [1, 2, 3]),
        ("retries", "fetch_and_parse", "ping"),
        ("retries", "parse_only", "not a number"),
        ("streaming", "pipeline", "durable workflows"),
        ("async_workflow", "mirror", ["https://example.com/a", "https://example.com/b"]),
        ("cached_steps", "index", ["a b", "c"]),
    ],
)
def test_the_examples_pass(
    module: str, name: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    wf = getattr(__import__(module), name)
    check_crash_safety(wf, value, durability="sync")


def test_a_workflow_defined_in_a_function_is_refused_with_the_fix() -> None:
    @entrypoint()
    def local(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="define it at the top level of a module"):
        check_crash_safety(local, 1)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="durability must be one of"):
        check_crash_safety(steps, 1, durability="never")
    with pytest.raises(ValueError, match="postgresql:// URL"):
        check_crash_safety(steps, 1, saver="mysql://x")
    with pytest.raises(TypeError, match="takes a workflow"):
        check_crash_safety(print, 1)
    with pytest.raises(TypeError, match="do not pickle"):
        check_crash_safety(steps, lambda: 1)


def test_a_task_run_again_after_its_result_was_saved_is_named(tmp_path: Path) -> None:
    # engines that do this are not at hand: the logs of one are written here
    task = "0f0e3c6a-0000-0000-0000-000000000001"
    crashed = [
        {"save": 1, "kind": "checkpoint", "step": -1, "source": "input"},
        {"start": task, "name": "charge", "step": 0},
        {"effect": "charge card", "task": task},
        {"save": 2, "kind": "writes", "task": task, "path": "~__pregel_pull, charge"}
        | {"channels": ["total"], "call": None},
    ]
    resumed = [
        {"start": task, "name": "charge", "step": 0},
        {"effect": "charge card", "task": task},
        {"out": None, "repr": "30"},
    ]
    log = tmp_path / "sync-after2.log"
    log.write_text("".join(json.dumps(e) + "\n" for e in crashed))
    Path(f"{log}.resume").write_text("".join(json.dumps(e) + "\n" for e in resumed))
    crash = Crash("sync", "after", 2, 3, "t", str(log))
    [failure] = findings(crash, load_log(str(log)), ("repr", None, "30"))
    assert failure == (
        "durability='sync', SIGKILL after save point 2 of 3: the result of 'charge', step 0\n"
        "  saved by then: [1] the checkpoint of step -1 (input), [2] the result of 'charge', "
        "step 0\n"
        "  - task 'charge' ran again on resume, though its result was committed at save point 2\n"
        "  - effect 'charge card' (in 'charge') ran again on resume, though save point 2 "
        "(the result of 'charge', step 0) had committed after it"
    )


def test_on_postgresql(postgres_dsn: str) -> None:
    # an async workflow: the PostgreSQL saver's own aput/aput_writes are the save points
    report = check_crash_safety(asteps, 2, saver=postgres_dsn, durability="async")
    assert report.save_points == {"async": 5}
    with pytest.raises(CrashSafetyError, match="effect 'email'"):
        check_crash_safety(email_then_steps, 2, saver=postgres_dsn, durability="sync")
