"""The two servers ``serve_streams.py`` drives with the same client:
``pregelkit serve`` and LangGraph's own dev server (``langgraph dev``),
each in its own temporary directory, serving the same tiny workflows
written for each library (the code differs only in the package it imports),
with ``def`` or with ``async def``.

LangGraph's dev server lives in a virtual environment of its own (never
the one pregelkit runs in), made on first use with ``pip``; when that
fails, ``langgraph_cli`` says why, for the report.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

# What ``langgraph dev`` needs: the CLI with its in-memory runtime, and the
# LangGraph release the rest of docs/benchmarks.md compares with.
LANGGRAPH_DEV_PACKAGES = ("langgraph-cli[inmem]", "langgraph==1.2.22")
# The versions reported beside the numbers.
LANGGRAPH_DISTRIBUTIONS = ("langgraph", "langgraph-api", "langgraph-runtime-inmem", "langgraph-cli")

FLOWS = """
from {lib}.config import get_stream_writer
from {lib}.func import entrypoint, task

@task
{a}def one(x: int) -> int:
    return x + 1

@entrypoint()
{a}def quick(inputs: dict) -> dict:
    return {{"x": {result}}}

@entrypoint()
{a}def chatty(inputs: dict) -> dict:
    say = get_stream_writer()
    for i in range(int(inputs["n"])):
        say({{"i": i, "text": "token"}})
    return {{"n": inputs["n"]}}
"""


def flows(lib: str, asynchronous: bool) -> str:
    """The workflows' module for ``lib``, with ``def`` or ``async def``."""
    if asynchronous:
        return FLOWS.format(lib=lib, a="async ", result='await one(inputs["x"])')
    return FLOWS.format(lib=lib, a="", result='one(inputs["x"]).result()')


GRAPHS = {"quick": "./flows.py:quick", "chatty": "./flows.py:chatty"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ok(url: str, server: subprocess.Popen[bytes], what: str) -> None:
    """Poll ``/ok`` until the server answers; fail at once if it exited."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"{what} exited with code {server.returncode} before answering")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/ok").status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url}/ok within 120 s")


@contextlib.contextmanager
def _running(command: list[str], cwd: Path, env: dict[str, str], what: str) -> Iterator[str]:
    port = _free_port()
    log = (cwd / "server.log").open("wb")
    server = subprocess.Popen(
        [*command, "--port", str(port)], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ok(url, server, what)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@contextlib.contextmanager
def pregelkit_server(here: Path, db: str | None, concurrency: int) -> Iterator[str]:
    """``pregelkit serve`` with its workers in process, on ``db`` (a new SQLite
    file by default), serving the ``def`` workflows (its in-process workers
    run a workflow with ``invoke``: an ``async def`` one is refused)."""
    here.mkdir()
    (here / "flows.py").write_text(flows("pregelkit", asynchronous=False))
    (here / "pregelkit.json").write_text(json.dumps({"graphs": GRAPHS}))
    command = [sys.executable, "-m", "pregelkit", "serve", "--config", "pregelkit.json"]
    command += ["--db", db or str(here / "bench.sqlite"), "--concurrency", str(concurrency)]
    with _running(command, here, os.environ.copy(), "pregelkit serve") as url:
        yield url


def langgraph_cli(venv: Path) -> tuple[Path | None, str]:
    """The ``langgraph`` command of ``venv``, installed there first if missing,
    and what was installed (versions) or why it could not be."""
    binary = venv / ("Scripts" if sys.platform == "win32" else "bin") / "langgraph"
    python = binary.with_name("python")
    if not binary.exists():
        steps = [
            ("python -m venv", [sys.executable, "-m", "venv", str(venv)]),
            (
                "pip install " + " ".join(LANGGRAPH_DEV_PACKAGES),
                [str(python), "-m", "pip", "install", "--quiet", *LANGGRAPH_DEV_PACKAGES],
            ),
        ]
        for what, step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
                return None, f"`{what}` failed: {lines[-1]}"
    probe = (
        "import importlib.metadata as m; "
        f"print(', '.join(d + ' ' + m.version(d) for d in {LANGGRAPH_DISTRIBUTIONS!r}))"
    )
    versions = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if versions.returncode != 0:
        return None, f"{venv} lacks a package: {versions.stderr.strip().splitlines()[-1]}"
    return binary, versions.stdout.strip()


@contextlib.contextmanager
def langgraph_server(here: Path, binary: Path, jobs: int, asynchronous: bool) -> Iterator[str]:
    """``langgraph dev`` (in-memory runtime), no reload, no browser, its
    default logging, serving the ``def`` or the ``async def`` workflows."""
    here.mkdir()
    (here / "flows.py").write_text(flows("langgraph", asynchronous))
    (here / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": GRAPHS}))
    command = [str(binary), "dev", "--no-browser", "--no-reload", "--config", "langgraph.json"]
    command += ["--n-jobs-per-worker", str(jobs)]
    # no tracing to LangSmith, no usage report: nothing leaves the machine
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    with _running(command, here, env, "langgraph dev") as url:
        yield url
