"""What the caller gets: a run's raw events shaped as ``stream`` chunks or as
the value ``invoke`` returns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pregelkit._internal._constants import INTERRUPT
from pregelkit.pregel._io import print_debug
from pregelkit.types import Interrupt, StreamMode

__all__ = ["DONE", "SKIP", "InvokeResult", "Raw", "StreamShape"]

DONE = "__pregelkit_done__"
"""The mode of a run's last raw event: its payload is the run's interrupts."""

Raw = tuple[tuple[str, ...], str, Any]
"""A raw event: namespace, mode, payload."""


class StreamShape:
    """Which modes a run emits and how each event reaches a ``stream`` caller."""

    __slots__ = ("modes", "printing", "single", "subgraphs")

    def __init__(
        self,
        stream_mode: StreamMode | Sequence[StreamMode],
        debug: bool,
        subgraphs: bool = False,
    ) -> None:
        if isinstance(stream_mode, str):
            modes = {stream_mode}
            self.single = True
        else:
            modes = set(stream_mode)
            self.single = False
        # debug=True without asking for the debug stream: print its events
        self.printing = debug and "debug" not in modes
        if self.printing:
            modes.add("debug")
        self.modes = frozenset(modes)
        self.subgraphs = subgraphs

    def chunks(self, events: Iterable[Raw]) -> Iterator[Any]:
        """``stream`` chunks from raw events."""
        for ns, mode, payload in events:
            chunk = self.chunk(ns, mode, payload)
            if chunk is not SKIP:
                yield chunk

    def chunk(self, ns: tuple[str, ...], mode: str, payload: Any) -> Any:
        if mode == DONE:
            return SKIP
        if self.printing and mode == "debug":
            print_debug(payload)
            return SKIP
        if self.subgraphs:
            return (ns, payload) if self.single else (ns, mode, payload)
        return payload if self.single else (mode, payload)


SKIP: Any = object()
"""What ``StreamShape.chunk`` returns for an event the caller does not see."""


class InvokeResult:
    """What ``invoke``/``ainvoke`` return, gathered from a run's raw events: the
    last values (plus any interrupts), or every chunk of another stream mode."""

    __slots__ = ("chunks", "interrupts", "latest", "printing", "values_mode")

    def __init__(self, stream_mode: str, printing: bool) -> None:
        self.values_mode = stream_mode == "values"
        self.printing = printing
        self.latest: Any = None
        self.chunks: list[Any] = []
        self.interrupts: list[Interrupt] = []

    def add(self, mode: str, payload: Any) -> None:
        if mode == DONE:
            self.interrupts = payload
        elif self.printing and mode == "debug":
            print_debug(payload)
        elif not self.values_mode:
            self.chunks.append(payload)
        elif not (isinstance(payload, dict) and INTERRUPT in payload and len(payload) == 1):
            self.latest = payload

    def value(self) -> Any:
        if not self.values_mode:
            return self.chunks
        if not self.interrupts:
            return self.latest
        if isinstance(self.latest, dict):
            return {**self.latest, INTERRUPT: list(self.interrupts)}
        return {INTERRUPT: list(self.interrupts)}
