"""The special channel names savers see in writes, where LangGraph's
``langgraph.checkpoint.serde.types`` has them: a saver or a test that imports
``TASKS`` from here names the same channel the engine writes."""

from __future__ import annotations

from pregelkit._internal._constants import ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS

__all__ = ["ERROR", "INTERRUPT", "RESUME", "SCHEDULED", "TASKS"]
