"""``Send(node, arg, timeout=...)``: one pushed task's own bound, over its node's.

The runs that could hang go through test_timeouts' subprocess harness (a
wall-clock guard around a fresh interpreter), as every timeout test does.
"""

from __future__ import annotations

import pickle
from datetime import timedelta
from pathlib import Path

import pytest

from pregelkit.checkpoint.serde.base import SerdeError
from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer
from pregelkit.types import Send, TimeoutPolicy
from test_timeouts import LIMIT, run

GRAPH = """
from pregelkit.channels.topic import Topic
from pregelkit.types import Send
def work(seconds):
    time.sleep(seconds)
    return seconds
async def awork(seconds):
    await asyncio.sleep(seconds)
    return seconds
def fan(n):
    # the slow item gets its own short bound; the quick one the node's
    return [Send("work", 0.0), Send("work", 60.0, timeout=0.5)]
def graph(fn, node_timeout):
    builder = NodeBuilder().do(fn).write_to("out")
    if node_timeout is not None:
        builder = builder.timeout(node_timeout)
    nodes = {"fan": NodeBuilder().subscribe_only("a").do(fan), "work": builder}
    return Pregel(nodes=nodes, channels={"a": LastValue(int), "out": Topic(float)},
                  input_channels="a", output_channels="out")
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_send_timeout_bounds_that_task_only(tmp_path: Path, mode: str) -> None:
    """The node has no timeout; the one Send that carries one is stopped at
    it, and the error names the node and the Send's limit."""
    out = run(
        GRAPH
        + f"""
fn = awork if "{mode}" == "async" else work
g = graph(fn, None)
if "{mode}" == "async":
    report(**atimed(g.ainvoke(1)))
else:
    report(**timed(lambda: g.invoke(1)))
""",
        tmp_path,
    )
    assert out["node"] == "work" and out["kind"] == "run" and out["timeout"] == 0.5
    assert out["seconds"] < LIMIT


def test_send_timeout_overrides_the_node_timeout(tmp_path: Path) -> None:
    """A Send's longer bound lets its task finish where the node's would stop it."""
    out = run(
        """
from pregelkit.channels.topic import Topic
from pregelkit.types import Send
def work(seconds):
    time.sleep(seconds)
    return seconds
nodes = {
    "fan": NodeBuilder().subscribe_only("a").do(lambda n: [Send("work", 0.4, timeout=30)]),
    "work": NodeBuilder().do(work).write_to("out").timeout(0.1),
}
g = Pregel(nodes=nodes, channels={"a": LastValue(int), "out": Topic(float)},
           input_channels="a", output_channels="out")
report(**timed(lambda: g.invoke(1)))
""",
        tmp_path,
    )
    assert out["result"] == [0.4]


def test_send_timeout_is_coerced_and_part_of_equality() -> None:
    assert Send("w", 1, timeout=2).timeout == TimeoutPolicy(run_timeout=2.0)
    assert Send("w", 1, timeout=timedelta(seconds=3)).timeout == TimeoutPolicy(run_timeout=3.0)
    assert Send("w", 1) != Send("w", 1, timeout=2)
    assert hash(Send("w", 1, timeout=2)) == hash(Send("w", 1, timeout=2.0))
    assert repr(Send("w", 1)) == "Send(node='w', arg=1)"
    assert "timeout=TimeoutPolicy(run_timeout=2.0" in repr(Send("w", 1, timeout=2))
    with pytest.raises(TypeError, match=r"Send\(timeout=\.\.\.\)"):
        Send("w", 1, timeout="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        Send("w", 1, timeout=-1)


def test_send_timeout_round_trips_through_the_serializer() -> None:
    serde = JsonPlusSerializer()
    packet = Send("w", {"x": 1}, timeout=TimeoutPolicy(run_timeout=1, idle_timeout=2))
    assert serde.loads_typed(serde.dumps_typed(packet)) == packet
    assert serde.loads_typed(serde.dumps_typed(Send("w", 1))).timeout is None


def test_a_stored_timeout_policy_is_checked_when_loaded() -> None:
    """The loader rebuilds a policy from stored data without calling its
    constructor; a tampered negative limit must still be refused."""
    import struct

    serde = JsonPlusSerializer()
    kind, data = serde.dumps_typed(Send("w", 1, timeout=1.0))
    tampered = data.replace(b"G" + struct.pack(">d", 1.0), b"G" + struct.pack(">d", -1.0))
    assert tampered != data
    with pytest.raises(SerdeError, match="run_timeout must be a positive"):
        serde.loads_typed((kind, tampered))


def test_a_send_stored_before_timeout_existed_loads_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old_state = (None, {"arg": 7, "node": "w"})  # what a two-slot Send pickled as
    monkeypatch.setattr(Send, "__getstate__", lambda self: old_state, raising=False)
    data = pickle.dumps(Send("w", 7), protocol=5)
    monkeypatch.undo()
    loaded = JsonPlusSerializer().loads_typed(("pickle", data))
    assert loaded == Send("w", 7) and loaded.timeout is None
