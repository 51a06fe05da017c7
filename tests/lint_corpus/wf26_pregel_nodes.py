"""A low-level Pregel graph: one node adds jitter to the value it passes on."""

import random

from pregelkit.channels import EphemeralValue, LastValue
from pregelkit.pregel import NodeBuilder, Pregel

double = NodeBuilder().subscribe_only("a").do(lambda x: x * 2).write_to("b")
# a replay of this superstep writes another value than the checkpoint holds
jitter = (
    NodeBuilder()
    .subscribe_only("b")
    .do(lambda x: x + random.uniform(-1, 1))  # expect: PK002
    .write_to("c")
)

app = Pregel(
    nodes={"double": double, "jitter": jitter},
    channels={"a": EphemeralValue(float), "b": LastValue(float), "c": LastValue(float)},
    input_channels=["a"],
    output_channels=["b", "c"],
)
