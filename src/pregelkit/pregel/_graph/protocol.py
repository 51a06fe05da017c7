"""The graph as the engine sees it, without importing the graph class.

``PregelProtocol`` is what a node needs to know to run a graph as a step: a
node may run a whole graph as one of its steps (a subgraph), and the node
module must recognise one without importing the graph class, which itself
builds nodes. ``RunGraph`` is what a run reads off its graph: the run core,
its drivers and drawing see ``Pregel`` through it, never ``main``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pregelkit.channels.base import BaseChannel
    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.pregel._graph.nodes import PregelNode
    from pregelkit.types import CachePolicy, RetryPolicy

__all__ = ["PlanGraph", "PregelProtocol", "RunGraph"]


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


class PlanGraph(Protocol):
    """What planning reads off a graph (a run's, or the state API's): its
    nodes, their order, and which nodes each channel triggers."""

    @property
    def nodes(self) -> Mapping[str, PregelNode]: ...
    @property
    def node_order(self) -> Mapping[str, int]: ...
    @property
    def trigger_to_nodes(self) -> Mapping[str, Sequence[str]]: ...


class RunGraph(PlanGraph, Protocol):
    """A graph as the run core, its drivers and drawing see it.

    The engine runs a ``Pregel`` without importing it: ``main`` imports the
    engine, so the engine naming ``main.Pregel``, even for types only, would
    make the two one knot. This is everything a run reads off its graph.
    """

    @property
    def channels(self) -> Mapping[str, BaseChannel[Any, Any, Any]]: ...
    @property
    def input_channels(self) -> str | Sequence[str]: ...
    @property
    def output_channels(self) -> str | Sequence[str]: ...
    @property
    def stream_channels_asis(self) -> str | Sequence[str]: ...
    @property
    def retry_policy(self) -> Sequence[RetryPolicy]: ...
    @property
    def cache_policy(self) -> CachePolicy[Any] | None: ...
    @property
    def step_timeout(self) -> float | None: ...
    @property
    def interrupt_before_nodes(self) -> Sequence[str] | str: ...
    @property
    def interrupt_after_nodes(self) -> Sequence[str] | str: ...
    @property
    def checkpointer(self) -> BaseCheckpointSaver[Any] | bool | None: ...
    @property
    def store(self) -> Any: ...
    @property
    def cache(self) -> Any: ...
    def _saver(self) -> BaseCheckpointSaver[Any] | None: ...
