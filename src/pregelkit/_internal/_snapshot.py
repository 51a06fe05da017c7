"""``PregelTask`` and ``StateSnapshot``, public in ``pregelkit.types``.

They are what the state API (``get_state``, ``get_state_history``) returns,
so they are defined when it is first used: their annotations name each other
and ``CheckpointMetadata``, and a ``NamedTuple`` compiles such forward
references, which for the first one in a process means building Python's
whole AST type table (about 4 ms here). ``__module__`` is
``pregelkit.types``: pickles and type hints name them there, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import CheckpointMetadata
    from pregelkit.types import Interrupt, RunnableConfig

__all__ = ["PregelTask", "StateSnapshot"]


class PregelTask(NamedTuple):
    """A task as shown in a state snapshot."""

    if not TYPE_CHECKING:  # type: ignore[misc]  # not a field: where pickles and hints look
        __module__ = "pregelkit.types"

    id: str
    name: str
    path: tuple[str | int | tuple[Any, ...], ...]
    error: Exception | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: RunnableConfig | StateSnapshot | None = None
    result: Any | None = None


class StateSnapshot(NamedTuple):
    """A thread's state at one checkpoint."""

    if not TYPE_CHECKING:  # type: ignore[misc]  # not a field: where pickles and hints look
        __module__ = "pregelkit.types"

    values: dict[str, Any] | Any
    next: tuple[str, ...]
    config: RunnableConfig
    metadata: CheckpointMetadata | None
    created_at: str | None
    parent_config: RunnableConfig | None
    tasks: tuple[PregelTask, ...]
    interrupts: tuple[Interrupt, ...] = ()
