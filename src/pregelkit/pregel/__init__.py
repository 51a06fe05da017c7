"""The Pregel engine: nodes, channels, supersteps."""

from pregelkit.pregel._read import NodeBuilder, PregelNode
from pregelkit.pregel.main import Pregel

__all__ = ["NodeBuilder", "Pregel", "PregelNode"]
