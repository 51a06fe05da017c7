"""``max_concurrency`` caps how many task bodies run at once, whether the
caller streams or not, and never leaves a run waiting for a slot it holds
itself. The runs go in a subprocess, so a hang fails the test, not the suite."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

GUARD = 120  # seconds

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, threading, time
    from pregelkit.channels import LastValue
    from pregelkit.func import entrypoint, task
    from pregelkit.pregel import NodeBuilder, Pregel

    how, limit = sys.argv[1], int(sys.argv[2])
    lock = threading.Lock()
    now = peak = 0

    def enter():
        global now, peak
        with lock:
            now += 1
            peak = max(peak, now)

    def leave():
        global now
        with lock:
            now -= 1

    @task
    async def acall(i):
        enter()
        await asyncio.sleep(0.03)
        leave()
        return i

    @task
    def call(i):
        enter()
        time.sleep(0.03)
        leave()
        return i

    @entrypoint()
    async def amain(n):
        return sum(await asyncio.gather(*[acall(i) for i in range(n)]))

    @entrypoint()
    def main(n):
        futures = [call(i) for i in range(n)]
        return sum(f.result() for f in futures)

    def node(x):
        enter()
        time.sleep(0.03)
        leave()
        return x

    nodes = {
        f"n{i}": NodeBuilder().subscribe_only("a").do(node).write_to(f"o{i}") for i in range(6)
    }
    channels = {"a": LastValue(int), **{f"o{i}": LastValue(int) for i in range(6)}}
    graph = Pregel(nodes=nodes, channels=channels, input_channels="a", output_channels="o0")

    config = {"max_concurrency": limit}

    async def run_async():
        if how == "ainvoke":
            return await amain.ainvoke(6, config)
        if how == "astream":
            return [c async for c in amain.astream(6, config)][-1]["amain"]
        return (await graph.ainvoke(1, config)) * 15

    if how == "invoke":
        out = main.invoke(6, config)
    elif how == "stream":
        out = list(main.stream(6, config))[-1]["main"]
    elif how == "pregel":
        out = graph.invoke(1, config) * 15
    else:
        out = asyncio.run(run_async())
    print(json.dumps([out, peak]))
    """
)


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream", "pregel", "apregel"])
@pytest.mark.parametrize("limit", [1, 2])
def test_max_concurrency_caps_the_bodies_running_at_once(how: str, limit: int) -> None:
    """Six calls gathered by one entrypoint (``asyncio.gather`` in async: before,
    ``astream`` with a limit of 1 hung there, the entrypoint holding the only
    slot while its calls waited for it), or six Pregel nodes of one step:
    never more than ``limit`` at once, and all of them run."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, how, str(limit)],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert proc.returncode == 0, proc.stderr
    out, peak = json.loads(proc.stdout)
    assert out == 15
    assert peak == limit
