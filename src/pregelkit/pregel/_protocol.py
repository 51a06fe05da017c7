"""``PregelProtocol``: what a node needs to know to run a graph as a step.

A node may run a whole graph as one of its steps (a subgraph). The node
module must recognise one without importing the graph class, which itself
builds nodes: this small base class is the boundary between the two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

__all__ = ["PregelProtocol"]


class PregelProtocol(ABC):
    """A graph that can run nested inside a node, sync or async."""

    name: str

    @abstractmethod
    def invoke(self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """Run to the end and return the output."""

    @abstractmethod
    async def ainvoke(
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """The async twin of ``invoke``."""
