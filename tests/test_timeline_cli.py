"""``pregelkit timeline`` on what real runs recorded: a retried task, a cache
hit, an interrupt and the resume that answers it, read back as text, JSON
and an HTML page (its browser behaviour: test_timeline_browser.py)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from test_cli import cli

FLOWS = """
from pathlib import Path

from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy, RetryPolicy, interrupt


@task(retry_policy=RetryPolicy(initial_interval=0.01, jitter=False, retry_on=ConnectionError))
def fetch(n):
    marker = Path(f"fetched-{n}")
    if not marker.exists():
        marker.write_text("failed once")
        raise ConnectionError(f"<b>server</b> closed the connection for {n}")
    return n * n


@task(cache_policy=CachePolicy())
def square(n):
    return n * n


@entrypoint()
def report(n):
    a = fetch(n).result()
    b = square(n).result()
    c = square(n).result()  # the same call again: a cache hit
    answer = interrupt(f"publish {a + b + c}?")
    return [a, b, c, answer]
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    return tmp_path


def test_timeline_of_real_runs(workdir: Path) -> None:
    first = cli(workdir, "run", "flows:report", "3", "--cache", "c.sqlite", "--thread", "t")
    assert first.code == 0, first.err
    resumed = cli(workdir, "resume", "t", '"yes"', "--cache", "c.sqlite")
    assert resumed.code == 0, resumed.err

    proc = cli(workdir, "timeline", "t", "--json")
    assert proc.code == 0, proc.err
    data = json.loads(proc.out)
    assert data["thread_id"] == "t" and data["running"] is False
    assert len(data["runs"]) == 2
    run1, run2 = (
        [(a["name"], a["attempt"], a["outcome"]) for a in r["attempts"]] for r in data["runs"]
    )
    assert sorted(run1) == [
        ("fetch", 1, "error"),
        ("fetch", 2, "ok"),
        ("report", 1, "interrupted"),
        ("square", 0, "cached"),
        ("square", 1, "ok"),
    ], run1
    failed = next(a for a in data["runs"][0]["attempts"] if a["outcome"] == "error")
    assert failed["error_type"] == "ConnectionError"
    assert failed["error_message"] == "<b>server</b> closed the connection for 3"
    assert sorted(run2) == [
        ("fetch", 0, "replayed"),
        ("report", 1, "ok"),
        ("square", 0, "replayed"),
        ("square", 0, "replayed"),
    ], run2

    text = cli(workdir, "timeline", "t")
    assert text.code == 0
    rows = [line for line in text.out.splitlines() if line.endswith("│")]
    assert len(rows) == sum(len(r["attempts"]) for r in data["runs"])
    assert "── run 1/2" in text.out and "── run 2/2" in text.out

    page = cli(workdir, "timeline", "t", "--html", "t.html")
    assert page.code == 0
    html = (workdir / "t.html").read_text(encoding="utf-8")
    found = re.search(r'id="timeline-data">(.*?)</script>', html)
    assert found is not None
    shown = json.loads(found.group(1))
    assert [len(r["attempts"]) for r in shown["runs"]] == [len(r["attempts"]) for r in data["runs"]]
    assert "<b>server</b>" not in html
