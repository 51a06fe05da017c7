"""The write path: how a node's output becomes ``(channel, value)`` writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from pregelkit._internal._constants import TASKS
from pregelkit.types import Command, Send

__all__ = ["PASSTHROUGH", "SKIP_WRITE", "ChannelWrite", "ChannelWriteEntry"]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


PASSTHROUGH: Final[Any] = _Marker("PASSTHROUGH")
"""Write the node's output itself."""
SKIP_WRITE: Final[Any] = _Marker("SKIP_WRITE")
"""A mapper returning this writes nothing."""


class ChannelWriteEntry:
    """Write to ``channel``: a fixed ``value``, or ``mapper(output)``, or the output."""

    __slots__ = ("channel", "mapper", "skip_none", "value")

    def __init__(
        self,
        channel: str,
        value: Any = PASSTHROUGH,
        skip_none: bool = False,
        mapper: Callable[[Any], Any] | None = None,
    ) -> None:
        self.channel = channel
        self.value = value
        self.skip_none = skip_none
        self.mapper = mapper

    def __repr__(self) -> str:
        return f"ChannelWriteEntry(channel={self.channel!r})"


class ChannelWrite:
    """A node's writers, compiled to one loop over entries."""

    __slots__ = ("entries",)

    def __init__(self, entries: Sequence[ChannelWriteEntry | Send]) -> None:
        self.entries = tuple(entries)

    @property
    def channels(self) -> list[str]:
        return [e.channel for e in self.entries if isinstance(e, ChannelWriteEntry)]

    def writes_for(self, output: Any) -> list[tuple[str, Any]]:
        """The writes this node makes for ``output``."""
        writes: list[tuple[str, Any]] = []
        for e in self.entries:
            if isinstance(e, Send):
                writes.append((TASKS, e))
                continue
            if e.mapper is not None:
                value = e.mapper(output)
            elif e.value is PASSTHROUGH:
                value = output
            else:
                value = e.value
            if value is SKIP_WRITE or (e.skip_none and value is None):
                continue
            writes.append((e.channel, value))
        return writes


def control_writes(output: Any) -> list[tuple[str, Any]] | None:
    """Writes for a node that returned a ``Command`` or ``Send``s, else None."""
    if isinstance(output, Command):
        if output.graph == Command.PARENT:
            return None
        writes = list(output._update_as_tuples())
        gotos = output.goto if isinstance(output.goto, (list, tuple)) else [output.goto]
        for g in gotos:
            if isinstance(g, Send):
                writes.append((TASKS, g))
            elif isinstance(g, str) and g:
                raise ValueError(
                    f"Command(goto={g!r}) needs a graph with edges; in a Pregel graph use "
                    f"Send({g!r}, arg) to run a node"
                )
        return writes
    if isinstance(output, Send):
        return [(TASKS, output)]
    if isinstance(output, (list, tuple)) and output and all(isinstance(s, Send) for s in output):
        return [(TASKS, s) for s in output]
    return None
