"""LangGraph's import path for ``ChannelWriteEntry``.

LangGraph's Pregel guide imports it from ``langgraph.pregel._write``, so code
migrated by renaming the package imports it from here; the class itself
lives with the other writers in ``_graph/writes.py``.
"""

from pregelkit.pregel._graph.writes import ChannelWrite, ChannelWriteEntry

__all__ = ["ChannelWrite", "ChannelWriteEntry"]
