"""The Pregel engine: nodes, channels, supersteps."""

from pregelkit.pregel._graph.nodes import NodeBuilder, PregelNode
from pregelkit.pregel.main import Pregel

__all__ = ["NodeBuilder", "Pregel", "PregelNode"]
