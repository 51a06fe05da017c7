"""Drawing a Pregel graph: nodes, and the channels that connect them, as Mermaid."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pregelkit._internal._constants import TASKS

if TYPE_CHECKING:
    from pregelkit.pregel.main import Pregel

__all__ = ["DrawableGraph"]


def _ident(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


@dataclass
class DrawableGraph:
    """Nodes and channels, with an edge from each writer to each channel and
    from each channel to the nodes it triggers."""

    nodes: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    edges: list[tuple[str, str, bool]] = field(default_factory=list)
    """(source, target, whether the target is a channel)"""

    @classmethod
    def from_pregel(cls, graph: Pregel) -> DrawableGraph:
        g = cls()
        g.nodes = list(graph.nodes)
        g.channels = [c for c in graph.channels if c != TASKS]
        for name, node in graph.nodes.items():
            for trigger in node.triggers:
                g.edges.append((trigger, name, False))
            for writer in node.flat_writers:
                for chan in writer.channels:
                    g.edges.append((name, chan, True))
        return g

    def draw_mermaid(self) -> str:
        """Mermaid flowchart source: nodes as boxes, channels as rounded boxes."""
        lines = ["graph TD"]
        for chan in self.channels:
            lines.append(f"    ch_{_ident(chan)}([{chan}])")
        for node in self.nodes:
            lines.append(f"    n_{_ident(node)}[{node}]")
        for src, dst, to_channel in self.edges:
            if to_channel:
                lines.append(f"    n_{_ident(src)} --> ch_{_ident(dst)}")
            else:
                lines.append(f"    ch_{_ident(src)} -.-> n_{_ident(dst)}")
        return "\n".join(lines) + "\n"
