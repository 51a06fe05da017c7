"""What the caller gets: a run's raw events shaped as ``stream`` chunks or as
the value ``invoke`` returns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pregelkit._internal._constants import INTERRUPT
from pregelkit.pregel._plan.io import print_debug
from pregelkit.types import GraphOutput, Interrupt, StreamMode

__all__ = ["DONE", "SKIP", "InvokeResult", "Raw", "StreamShape"]

DONE = "__pregelkit_done__"
"""The mode of a run's last raw event: its payload is the run's interrupts."""

Raw = tuple[tuple[str, ...], str, Any]
"""A raw event: namespace, mode, payload."""


class StreamShape:
    """Which modes a run emits and how each event reaches a ``stream`` caller."""

    __slots__ = (
        "modes",
        "plain",
        "print_modes",
        "printing",
        "requested",
        "single",
        "subgraphs",
        "v2",
    )

    def __init__(
        self,
        stream_mode: StreamMode | Sequence[StreamMode],
        debug: bool,
        subgraphs: bool = False,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        version: str = "v1",
    ) -> None:
        if version not in ("v1", "v2"):
            raise ValueError(f"version must be 'v1' or 'v2', got {version!r}")
        if isinstance(stream_mode, str):
            modes = {stream_mode}
            self.single = True
        else:
            modes = set(stream_mode)
            self.single = False
        self.requested = frozenset(modes)
        # modes printed as they happen (LangGraph's print_mode); emitted even
        # when not streamed
        self.print_modes = frozenset([print_mode] if isinstance(print_mode, str) else print_mode)
        modes |= self.print_modes
        # debug=True without asking for the debug stream: print its events
        self.printing = debug and "debug" not in modes
        if self.printing:
            modes.add("debug")
        self.modes = frozenset(modes)
        self.subgraphs = subgraphs
        self.v2 = version == "v2"
        # nothing to print, nothing to reshape: the common case takes the short path
        self.plain = not (self.print_modes or self.v2)

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
        if not self.plain:
            if mode in self.print_modes:
                print_chunk(ns, mode, payload, self.subgraphs)
                if mode not in self.requested:
                    return SKIP
            if self.v2:
                return stream_part(ns, mode, payload)
        if self.subgraphs:
            return (ns, payload) if self.single else (ns, mode, payload)
        return payload if self.single else (mode, payload)


def stream_part(ns: tuple[str, ...], mode: str, payload: Any) -> dict[str, Any]:
    """A ``version="v2"`` chunk: a dict saying its mode (``type``), namespace
    and data; a ``values`` chunk carries the run's interrupts apart from the
    data."""
    if mode != "values":
        return {"type": mode, "ns": ns, "data": payload}
    interrupts: tuple[Interrupt, ...] = ()
    if isinstance(payload, dict) and INTERRUPT in payload:
        payload = dict(payload)
        interrupts = tuple(payload.pop(INTERRUPT))
    return {"type": mode, "ns": ns, "data": payload, "interrupts": interrupts}


def print_chunk(ns: tuple[str, ...], mode: str, payload: Any, subgraphs: bool) -> None:
    """A ``print_mode`` line: the mode in bold, the subgraph's namespace in
    yellow when subgraphs stream, then the payload's repr."""
    parts = [f"\033[1m[{mode}]\033[0m"]
    if subgraphs and ns:
        parts.append(f"\033[1;33m[graph={ns}]\033[0m")
    parts.append(repr(payload))
    print(" ".join(parts))


SKIP: Any = object()
"""What ``StreamShape.chunk`` returns for an event the caller does not see."""


class InvokeResult:
    """What ``invoke``/``ainvoke`` return, gathered from a run's raw events: the
    last values (plus any interrupts), or every chunk of another stream mode
    (``(mode, chunk)`` pairs for a list of modes, as ``stream`` gives them);
    with ``version="v2"``, a ``GraphOutput`` or the v2 chunks."""

    __slots__ = ("chunks", "interrupts", "latest", "shape", "values_mode")

    def __init__(self, stream_mode: str, shape: StreamShape) -> None:
        self.values_mode = stream_mode == "values"
        self.shape = shape
        self.latest: Any = None
        self.chunks: list[Any] = []
        self.interrupts: list[Interrupt] = []

    def add(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        shape = self.shape
        if mode == DONE:
            self.interrupts = payload
        elif shape.printing and mode == "debug":
            print_debug(payload)
        elif not shape.plain:
            chunk = shape.chunk(ns, mode, payload)
            if chunk is SKIP:
                return
            if not shape.v2:
                self._add(mode, payload)
            elif self.values_mode:
                # as LangGraph's v2 invoke: the data of the last values chunk
                self.latest = chunk["data"]
            else:
                self.chunks.append(chunk)
        else:
            self._add(mode, payload)

    def _add(self, mode: str, payload: Any) -> None:
        if not self.values_mode:
            self.chunks.append(payload if self.shape.single else (mode, payload))
        elif not (isinstance(payload, dict) and INTERRUPT in payload and len(payload) == 1):
            self.latest = payload

    def value(self) -> Any:
        if not self.values_mode:
            return self.chunks
        if self.shape.v2:
            return GraphOutput(value=self.latest, interrupts=tuple(self.interrupts))
        if not self.interrupts:
            return self.latest
        if isinstance(self.latest, dict):
            return {**self.latest, INTERRUPT: list(self.interrupts)}
        return {INTERRUPT: list(self.interrupts)}
