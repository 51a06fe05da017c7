"""A Pregel graph's shape: LangGraph's node view (``nodes`` with
``__start__``/``__end__``, ``edges`` from node to node) and a Mermaid drawing
of the nodes and the channels that connect them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pregelkit._internal._constants import TASKS
from pregelkit.pregel._graph.writes import ChannelWriteEntry

if TYPE_CHECKING:
    from pregelkit.pregel._graph.protocol import RunGraph

__all__ = ["DrawableGraph", "Edge", "Node"]

START, END = "__start__", "__end__"


class Node(NamedTuple):
    """A node of the graph view (``data`` is the node, ``None`` for start and end)."""

    id: str
    name: str
    data: Any = None
    metadata: dict[str, Any] | None = None


class Edge(NamedTuple):
    """``source`` writes a channel that triggers ``target``; ``conditional``
    when the write depends on the node's output (a mapper decides it)."""

    source: str
    target: str
    data: Any = None
    conditional: bool = False


def _ident(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


@dataclass
class DrawableGraph:
    """Nodes and channels, with an edge from each writer to each channel and
    from each channel to the nodes it triggers."""

    nodes: dict[str, Node] = field(default_factory=dict)
    """The graph's nodes, then ``__start__`` and ``__end__``, by id."""
    edges: list[Edge] = field(default_factory=list)
    """Node to node: from ``__start__`` to the nodes the input triggers, from
    a node to the nodes its writes trigger, to ``__end__`` from the nodes
    that write an output channel."""
    channels: list[str] = field(default_factory=list)
    channel_edges: list[tuple[str, str, bool]] = field(default_factory=list)
    """(source, target, whether the target is a channel)"""

    @classmethod
    def from_pregel(cls, graph: RunGraph) -> DrawableGraph:
        g = cls()
        g.nodes = {name: Node(name, name, node) for name, node in graph.nodes.items()}
        g.nodes[START] = Node(START, START)
        g.nodes[END] = Node(END, END)
        g.channels = [c for c in graph.channels if c != TASKS]
        inputs = _names(graph.input_channels)
        outputs = _names(graph.output_channels)
        writes: dict[str, dict[str, bool]] = {}  # node -> channel -> conditional
        for name, node in graph.nodes.items():
            for trigger in node.triggers:
                g.channel_edges.append((trigger, name, False))
            for writer in node.flat_writers:
                for entry in writer.entries:
                    if isinstance(entry, ChannelWriteEntry):
                        chan = entry.channel
                        g.channel_edges.append((name, chan, True))
                        writes.setdefault(name, {})[chan] = entry.mapper is not None
        seen: set[tuple[str, str]] = set()

        def add(source: str, target: str, conditional: bool) -> None:
            if (source, target) not in seen:
                seen.add((source, target))
                g.edges.append(Edge(source, target, None, conditional))

        for name, node in graph.nodes.items():
            if any(t in inputs for t in node.triggers):
                add(START, name, False)
        for source, chans in writes.items():
            for name, node in graph.nodes.items():
                for chan, conditional in chans.items():
                    if chan in node.triggers:
                        add(source, name, conditional)
            for chan, conditional in chans.items():
                if chan in outputs:
                    add(source, END, conditional)
        return g

    def draw_mermaid(self) -> str:
        """Mermaid flowchart source: nodes as boxes, channels as rounded boxes."""
        lines = ["graph TD"]
        for chan in self.channels:
            lines.append(f"    ch_{_ident(chan)}([{chan}])")
        for node in self.nodes:
            if node not in (START, END):
                lines.append(f"    n_{_ident(node)}[{node}]")
        for src, dst, to_channel in self.channel_edges:
            if to_channel:
                lines.append(f"    n_{_ident(src)} --> ch_{_ident(dst)}")
            else:
                lines.append(f"    ch_{_ident(src)} -.-> n_{_ident(dst)}")
        return "\n".join(lines) + "\n"


def _names(channels: str | Any) -> set[str]:
    return {channels} if isinstance(channels, str) else set(channels)
