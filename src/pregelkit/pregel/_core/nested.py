"""What a run nested in a task (a subgraph, or an entrypoint a task calls)
takes from the run it is part of: its thread, a namespace below the task's,
and the saver, store and cache the caller did not name for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)

if TYPE_CHECKING:
    from pregelkit.cache.base import BaseCache
    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.pregel._core.stream import Emit
    from pregelkit.pregel._graph.scope import TaskScope

__all__ = ["Inherited", "inherit"]


class Inherited(NamedTuple):
    config: dict[str, Any]
    checkpointer: BaseCheckpointSaver[Any] | None
    store: Any
    cache: BaseCache[Any] | None
    relay: tuple[Emit, frozenset[str]] | None
    """The parent's stream and its modes, when it streams its subgraphs."""


def inherit(
    parent: TaskScope,
    config: dict[str, Any],
    checkpointer: BaseCheckpointSaver[Any] | None,
    store: Any,
    cache: BaseCache[Any] | None,
    may_save: bool,
) -> Inherited:
    """The settings of a run nested in ``parent``'s task. Its checkpoints
    go under the task's namespace, in the same thread; never at a checkpoint
    id of the parent's. ``may_save``: the graph was not compiled with
    ``checkpointer=False``, so it saves with its parent's saver."""
    run = parent.run
    parent_conf = run.base_config.get(CONF, {})
    conf = {**config.get(CONF, {})}
    for key in (CONFIG_KEY_THREAD_ID, "checkpoint_map"):
        if key in parent_conf and key not in conf:
            conf[key] = parent_conf[key]
    conf[CONFIG_KEY_CHECKPOINT_NS] = parent.ns
    conf.pop(CONFIG_KEY_CHECKPOINT_ID, None)
    return Inherited(
        {**run.base_config, **config, CONF: conf},
        run.checkpointer if checkpointer is None and may_save else checkpointer,
        store if store is not None else run.store,
        cache if cache is not None else run.cache,
        (run.emit_raw, run.stream_modes)
        if run.emit_raw is not None and run.stream_subgraphs
        else None,
    )
