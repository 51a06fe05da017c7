"""What a run is created with besides its input: the checkpoint it forks
from (``checkpoint_id``, or ``checkpoint``), and the ``metadata`` and
``multitask_strategy`` that ``runs.get`` and ``runs.list`` answer later.

The latter two travel in the run's stored config, under a configurable key
of the server's own (``__``-prefixed keys are not taken from clients, and
are not copied into checkpoint metadata), so they are in the run's row on
whichever server process created it, with no table of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

from pregelkit.checkpoint._runqueue import Dialect, RunPlan
from pregelkit.server._body import Body
from pregelkit.server._errors import ApiError

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.server._api import Api

Options: TypeAlias = tuple[dict[str, Any], str | None]
"""A run's metadata and multitask strategy."""
KEY = "__pregelkit_serve_run"
"""The configurable key the options are kept under."""


def keep(config: dict[str, Any], options: Options) -> None:
    """Put ``options`` in the run's ``config`` (stored with the run)."""
    metadata, strategy = options
    config["configurable"][KEY] = {"metadata": metadata, "multitask_strategy": strategy}


def _configs(d: Dialect, run_ids: Sequence[str]) -> RunPlan[list[tuple[Any, ...]]]:
    marks = ", ".join("?" for _ in run_ids)
    rows = yield d.q(
        f"SELECT run_id, config_type, config FROM pregelkit_runs WHERE run_id IN ({marks})",
        tuple(run_ids),
        "all",
    )
    return list(rows)


def read(saver: BaseCheckpointSaver[Any], run_ids: Sequence[str]) -> dict[str, Options]:
    """The options of those of ``run_ids`` created by this server, by run id."""
    if not run_ids:
        return {}
    found: dict[str, Options] = {}
    for run_id, kind, data in saver.run_queue(partial(_configs, run_ids=run_ids), "runs"):
        config = saver.serde.loads_typed((str(kind), bytes(data)))
        kept = ((config or {}).get("configurable") or {}).get(KEY)
        if isinstance(kept, dict):
            found[str(run_id)] = (dict(kept.get("metadata") or {}), kept.get("multitask_strategy"))
    return found


def checkpoint_of(api: Api, thread_id: str, body: Body) -> str | None:
    """The checkpoint id the body asks the run to start from (``checkpoint_id``,
    or ``checkpoint``'s), checked to be one of the thread's (404 if not)."""
    asked: str | None = body.text("checkpoint_id")
    checkpoint = body.obj("checkpoint")
    if checkpoint is not None:
        inner: str | None = Body(checkpoint).text("checkpoint_id")
        if inner is None:
            raise ApiError(422, "field 'checkpoint' must give a 'checkpoint_id'")
        if asked is not None and asked != inner:
            raise ApiError(422, "'checkpoint_id' and 'checkpoint.checkpoint_id' differ: give one")
        if Body(checkpoint).text("checkpoint_ns", "") != "":
            raise ApiError(422, "a run starts from a root checkpoint: leave 'checkpoint_ns' out")
        asked = inner
    if asked is None:
        return None
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": asked}}
    if api.saver.get_tuple(config) is None:
        raise ApiError(
            404,
            f"thread {thread_id!r} has no checkpoint {asked!r}: pick one from "
            "threads.get_history (its 'checkpoint' field)",
        )
    return asked


def breakpoints(api: Api, graph_id: str, body: Body) -> dict[str, Any] | None:
    """The body's ``interrupt_before`` / ``interrupt_after`` (``"*"`` or
    node names, each a node of the graph: 422 if not), as the run's worker
    takes them; ``None`` when neither is given. A functional-API workflow
    has one node, its entrypoint: its tasks are not nodes, so no breakpoint
    stops before or after a task (``interrupt()`` inside one does)."""
    asked: dict[str, Any] = {}
    nodes = sorted(n for n in api.graphs[graph_id].nodes if not n.startswith("__"))
    for when in ("before", "after"):
        value = body.any(f"interrupt_{when}")
        if value in (None, []):
            continue
        if value != "*" and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise ApiError(422, f"field 'interrupt_{when}' must be \"*\" or a list of node names")
        unknown = [] if value == "*" else [v for v in value if v not in nodes]
        if unknown:
            raise ApiError(
                422,
                f"interrupt_{when} names {', '.join(map(repr, unknown))}, not a node of "
                f"graph {graph_id!r}; its nodes: {', '.join(nodes)} (a functional-API "
                "workflow's tasks are not nodes: call interrupt() in the task instead)",
            )
        asked[when] = value
    return asked or None
