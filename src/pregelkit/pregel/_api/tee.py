"""``invoke`` that also hands the parts of some stream modes to a sink.

A worker runs a queued run with ``invoke`` (it needs the run's result to
record it); a run queued by ``pregelkit serve``'s ``runs.stream`` must also
have its stream parts written where another process can read them. One
run gives both: the driver emits the extra modes besides ``values``, the
parts of the asked modes go to the sink and the rest makes the result,
exactly as ``invoke`` would have made it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pregelkit.pregel._api.run_args import RunArgs
from pregelkit.pregel._core.output import DONE, InvokeResult
from pregelkit.runtime import RunControl

if TYPE_CHECKING:
    from pregelkit.pregel.main import Pregel

__all__ = ["Sink", "ainvoke_tee", "invoke_tee"]

Sink = Callable[[tuple[str, ...], str, Any], None]
"""Takes one stream part: namespace, mode, payload."""


class _Tee:
    """Routes each raw event: to the sink if its mode was asked, to the
    result if ``invoke`` would have seen it (both for a ``values`` part)."""

    __slots__ = ("invoked", "modes", "result", "sink")

    def __init__(
        self, result: InvokeResult, invoked: frozenset[str], modes: frozenset[str], sink: Sink
    ) -> None:
        self.result = result
        self.invoked = invoked
        self.modes = modes
        self.sink = sink

    def add(self, ns: tuple[str, ...], mode: str, payload: Any) -> None:
        if mode in self.modes:
            self.sink(ns, mode, payload)
        if mode == DONE or mode in self.invoked:
            self.result.add(ns, mode, payload)


def _start(
    graph: Pregel,
    where: str,
    input: Any,
    config: Mapping[str, Any] | None,
    control: RunControl | None,
    modes: Collection[str],
    sink: Sink,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
) -> tuple[Any, _Tee]:
    # started as ``stream`` is, so that parts come as they are emitted (an
    # invoke gets a step's parts at its end), with invoke's output channels
    args = RunArgs(
        where,
        input,
        config,
        {},
        stream_mode="values",
        output_keys=graph.output_channels,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        control=control,
    )
    driver, shape = graph._start(args, frozenset(modes))
    return driver, _Tee(InvokeResult("values", shape), shape.modes, frozenset(modes), sink)


def invoke_tee(
    graph: Pregel,
    input: Any,
    config: Mapping[str, Any] | None,
    *,
    control: RunControl | None,
    modes: Collection[str],
    sink: Sink,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
) -> Any:
    """``graph.invoke(input, config, control=control, interrupt_before=...,
    interrupt_after=...)``, the parts of ``modes`` handed to ``sink`` as
    they are emitted."""
    driver, tee = _start(
        graph, "stream", input, config, control, modes, sink, interrupt_before, interrupt_after
    )
    events = driver.events()
    try:
        for ns, mode, payload in events:
            tee.add(ns, mode, payload)
    finally:
        events.close()
    return tee.result.value()


async def ainvoke_tee(
    graph: Pregel,
    input: Any,
    config: Mapping[str, Any] | None,
    *,
    control: RunControl | None,
    modes: Collection[str],
    sink: Sink,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
) -> Any:
    """The async twin of ``invoke_tee``."""
    driver, tee = _start(
        graph, "astream", input, config, control, modes, sink, interrupt_before, interrupt_after
    )
    events = driver.aevents()
    try:
        async for ns, mode, payload in events:
            tee.add(ns, mode, payload)
    finally:
        await events.aclose()
    return tee.result.value()
