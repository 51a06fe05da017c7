"""``RunArgs``: what a caller handed ``invoke``, ``stream`` or their async
twins, as one typed value.

The four entry points keep their full signatures (LangGraph's, for type
checkers and readers) and each builds one ``RunArgs``; ``Pregel._start``
checks it and starts the run from it, whichever of them waits on the run.
This module only holds the arguments: it does not check them, apply the
graph's defaults, or know how a run is driven.

It is built once per call, on the path of every short run, so it is a
``NamedTuple``: immutable, slotted (no ``__dict__``), typed field by field,
and built by one ``tuple.__new__``; no dict to fill and read back by
string key. Its annotations are evaluated, not strings: a string
annotation makes ``NamedTuple`` compile a ``ForwardRef`` at import, and the
first ``compile()`` of a process costs a tenth of ``import pregelkit.func``.
"""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pregelkit.runtime import RunControl
from pregelkit.types import StreamMode

__all__ = ["RunArgs"]


class RunArgs(NamedTuple):
    """One call's arguments. ``where`` names the entry point (``"stream"``,
    ``"astream"``, ``"invoke"``, ``"ainvoke"``): its errors name it, and the
    two stream ones take ``subgraphs`` and ``debug`` by name where the invoke
    ones find ``debug`` in ``kwargs``. ``kwargs`` are the keywords no
    parameter took, still unchecked. The defaults are ``astream``'s, so a
    caller that forwards only some keywords (``astream_events``) gets what
    ``astream`` would give it."""

    where: str
    input: Any
    config: Mapping[str, Any] | None
    kwargs: Mapping[str, Any]
    stream_mode: StreamMode | Sequence[StreamMode] | None = None
    output_keys: str | Sequence[str] | None = None
    interrupt_before: Sequence[str] | str | None = None
    interrupt_after: Sequence[str] | str | None = None
    durability: str | None = None
    subgraphs: bool = False
    debug: bool | None = None
    context: Any = None
    control: RunControl | None = None
    print_mode: StreamMode | Sequence[StreamMode] = ()
    version: str = "v1"
