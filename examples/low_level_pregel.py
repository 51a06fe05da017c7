"""The engine underneath: nodes, channels and supersteps with ``Pregel``.

Part 1 is the first example of the design documents (seed 000): ``node1``
reads ``a`` and writes ``b``; writing ``b`` triggers ``node2`` in the next
superstep, which writes ``c``.

Part 2 extends it into a loop with state that persists: ``count`` subscribes
to its own output channel, so it runs again every superstep until it writes
nothing; a ``BinaryOperatorAggregate`` channel sums every value written to it.
With a checkpointer, each superstep leaves a checkpoint: ``get_state`` and
``get_state_history`` read them back.
"""

from __future__ import annotations

import operator
import tempfile
from pathlib import Path

from pregelkit.channels import BinaryOperatorAggregate, EphemeralValue, LastValue
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel._write import ChannelWriteEntry


def part1() -> None:
    node1 = NodeBuilder().subscribe_only("a").do(lambda x: x + x).write_to("b")
    node2 = NodeBuilder().subscribe_to("b").do(lambda x: x["b"] + x["b"]).write_to("c")
    app = Pregel(
        nodes={"node1": node1, "node2": node2},
        channels={
            "a": EphemeralValue(str),
            "b": LastValue(str),
            "c": EphemeralValue(str),
        },
        input_channels=["a"],
        output_channels=["b", "c"],
    )
    print(app.invoke({"a": "foo"}))
    for update in app.stream({"a": "foo"}, stream_mode="updates"):
        print(f"  superstep update: {update}")


def part2() -> None:
    count = (
        NodeBuilder()
        .subscribe_only("n")
        .do(lambda n: n + 1 if n < 5 else None)
        # skip_none: returning None writes nothing, so nothing triggers the next step
        .write_to(
            ChannelWriteEntry("n", skip_none=True), ChannelWriteEntry("total", skip_none=True)
        )
    )
    report = NodeBuilder().subscribe_only("total").do(lambda t: f"total so far: {t}")
    app = Pregel(
        nodes={"count": count, "report": report.write_to("message")},
        channels={
            "n": LastValue(int),
            "total": BinaryOperatorAggregate(int, operator.add),  # sums every write
            "message": LastValue(str),
        },
        input_channels="n",
        output_channels=["n", "total", "message"],
    )
    print(app.get_graph().draw_mermaid().rstrip())

    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteSaver.from_conn_string(str(Path(tmp) / "pregel.sqlite")) as saver,
    ):
        app = app.copy(checkpointer=saver)
        config = {"configurable": {"thread_id": "counter"}}
        # "values": the output channels after each superstep (both nodes of a
        # step run in parallel; their writes are applied together)
        for values in app.stream(1, config, stream_mode="values"):
            print(f"  {values}")
        print(f"final state: {app.get_state(config).values}")
        print("checkpoints, oldest first:")
        for snapshot in reversed(list(app.get_state_history(config))):
            assert snapshot.metadata is not None
            step, source = snapshot.metadata["step"], snapshot.metadata["source"]
            print(f"  step {step:2} ({source}): next {snapshot.next}")


if __name__ == "__main__":
    print("part 1: the seed example")
    part1()
    print("part 2: a loop, a reducer, checkpoints")
    part2()
