"""OpenTelemetry spans: a run span, a task span per attempt with retries and
interrupts as events, and user spans nesting under the task that opened them
(threads and asyncio tasks alike). Run in subprocesses: a tracer provider is
process-wide and set once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    user = trace.get_tracer("user")

    from pregelkit.checkpoint.memory import InMemorySaver
    from pregelkit.func import entrypoint, task
    from pregelkit.cache.memory import InMemoryCache
    from pregelkit.types import CachePolicy, Command, RetryPolicy, interrupt

    mode = sys.argv[1]
    failures = {"left": 1}
    policy = RetryPolicy(max_attempts=2, initial_interval=0.001, retry_on=ValueError)

    def traced_step(x):  # a user span inside the task; the first attempt fails
        with user.start_as_current_span("inside-flaky"):
            if failures["left"]:
                failures["left"] -= 1
                raise ValueError("boom")
        return x + 1

    if mode == "sync":
        @task(retry_policy=policy)
        def flaky(x):
            return traced_step(x)

        @task(cache_policy=CachePolicy())
        def same(x):
            return x

        @entrypoint(checkpointer=InMemorySaver(), cache=InMemoryCache())
        def wf(x):
            y = flaky(x).result()
            y += same(0).result() + same(0).result()
            return y + interrupt("more?")
        config = {"configurable": {"thread_id": "t"}}
        wf.invoke(1, config)
        wf.invoke(Command(resume=1), config)
    else:
        @task(retry_policy=policy)
        async def flaky(x):
            return traced_step(x)

        @task(cache_policy=CachePolicy())
        async def same(x):
            return x

        @entrypoint(checkpointer=InMemorySaver(), cache=InMemoryCache())
        async def wf(x):
            y = await flaky(x)
            y += await same(0) + await same(0)
            return y + interrupt("more?")
        config = {"configurable": {"thread_id": "t"}}
        asyncio.run(wf.ainvoke(1, config))
        asyncio.run(wf.ainvoke(Command(resume=1), config))

    out = []
    for s in exporter.get_finished_spans():
        out.append({
            "name": s.name, "id": s.context.span_id,
            "parent": s.parent.span_id if s.parent else None,
            "attrs": dict(s.attributes), "events": [e.name for e in s.events],
        })
    print(json.dumps(out))
    """
)


def _spans(mode: str, tmp_path: Path) -> list[dict]:
    script = tmp_path / "traced.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(spans: list[dict]) -> None:
    runs = [s for s in spans if s["name"] == "pregelkit.run"]
    tasks = [s for s in spans if s["name"] == "pregelkit.task"]
    assert len(runs) == 2
    run_ids = {r["id"] for r in runs}
    assert {t["parent"] for t in tasks} <= run_ids
    first = runs[0]
    assert "pregelkit.interrupt" in first["events"]
    flaky = sorted(
        (t for t in tasks if t["attrs"]["pregelkit.task"] == "flaky"),
        key=lambda t: t["attrs"]["pregelkit.attempt"],
    )
    # attempt 1 failed and was retried; the resume replays flaky (attempt 0)
    assert [(t["attrs"]["pregelkit.attempt"], t["attrs"]["pregelkit.outcome"]) for t in flaky] == [
        (0, "replayed"),
        (1, "error"),
        (2, "ok"),
    ]
    assert "pregelkit.retry" in flaky[1]["events"]
    same = [t["attrs"] for t in tasks if t["attrs"]["pregelkit.task"] == "same"]
    assert sorted((a["pregelkit.outcome"], a["pregelkit.cached"]) for a in same) == [
        ("cached", True),
        ("ok", False),
        ("replayed", False),
        ("replayed", False),
    ]
    wf = [t for t in tasks if t["attrs"]["pregelkit.task"] == "wf"]
    assert [t["attrs"]["pregelkit.outcome"] for t in wf] == ["interrupted", "ok"]
    assert all(t["attrs"]["pregelkit.thread_id"] == "t" for t in tasks)
    inner = [s for s in spans if s["name"] == "inside-flaky"]
    assert len(inner) == 2
    assert {s["parent"] for s in inner} == {t["id"] for t in flaky[1:]}


def test_sync_spans(tmp_path: Path) -> None:
    _check(_spans("sync", tmp_path))


def test_async_spans(tmp_path: Path) -> None:
    _check(_spans("async", tmp_path))


def test_no_provider_no_opentelemetry_import() -> None:
    code = (
        "import sys, pregelkit, pregelkit.func\n"
        "from pregelkit.checkpoint.memory import InMemorySaver\n"
        "from pregelkit.func import entrypoint\n"
        "@entrypoint(checkpointer=InMemorySaver())\n"
        "def wf(x):\n    return x\n"
        "wf.invoke(1, {'configurable': {'thread_id': 't'}})\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
