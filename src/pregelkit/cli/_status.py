"""What a thread is doing, read from what is stored alone (no workflow code
is imported to inspect a database): its status, the interrupts it waits at,
and the name of the task behind each pending write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import CheckpointTuple
    from pregelkit.cli._db import Database

INTERRUPT = "__interrupt__"
ERROR = "__error__"
CALL = "__call__"
_PUSH = "~__pregel_push"
_PULL = "~__pregel_pull"


def saved_status(tup: CheckpointTuple) -> str:
    """What a thread's latest checkpoint alone says: ``interrupted`` (waiting
    for an answer), ``failed`` (a task raised; resume retries it), ``pending``
    (stopped mid-run, e.g. by Ctrl-C or a kill; resume continues it) or
    ``done``. The run queue, locks and marks come first (``_lifecycle``)."""
    writes = tup.pending_writes or []
    if interrupts_of(tup):
        return "interrupted"
    if any(channel == ERROR for _, channel, _ in writes):
        return "failed"
    return "pending" if writes or tup.metadata.get("source") == "input" else "done"


def interrupts_of(tup: CheckpointTuple) -> list[tuple[str, Any]]:
    """(task id, interrupt) for each interrupt still waiting at this
    checkpoint: of tasks that have not finished since, each once."""
    from pregelkit.pregel._plan.algo import is_done_write

    writes = tup.pending_writes or []
    finished = {t for t, c, _ in writes if is_done_write(c)}
    found: dict[str, tuple[str, Any]] = {}
    for task_id, channel, value in writes:
        if channel == INTERRUPT and task_id not in finished and isinstance(value, list):
            for i in value:
                found.setdefault(str(getattr(i, "id", id(i))), (task_id, i))
    return list(found.values())


def task_labels(db: Database, tup: CheckpointTuple) -> dict[str, str]:
    """task id -> name of each task with pending writes at this checkpoint:
    the called function's name for a task call (from its recorded call
    identity), else what its stored path says."""
    conf = tup.config["configurable"]
    paths = db.task_paths(conf["thread_id"], conf["checkpoint_id"])
    labels = {task_id: task_label(path) for task_id, path in paths.items()}
    for task_id, channel, value in tup.pending_writes or []:
        identity = value[0] if isinstance(value, list) and value else value
        if channel == CALL and isinstance(identity, str) and identity:
            labels[task_id] = identity.split("#", 1)[0]
    return labels


def task_label(path: str) -> str:
    """A task's name from its stored path: the node for a graph node (or an
    ``@entrypoint``), ``NODE[i]`` for the i-th task call made by NODE (for
    records written before call identities were stored), ``-`` if unknown."""
    parts = [p.strip() for p in path.split(",")] if path else []
    calls: list[str] = []
    while parts and parts[0] == _PUSH:
        parts.pop(0)
        if len(parts) >= 2 and parts[-1] and parts[-2].isdigit():
            calls.insert(0, str(int(parts[-2])))
            parts = parts[:-2]
    if len(parts) >= 2 and parts[0] == _PULL:
        name = parts[1]
    elif parts and not parts[0].startswith("~"):
        name = parts[0]
    else:
        return "-"
    return name + "".join(f"[{c}]" for c in calls)
