"""Names the engine reserves: special channels, task kinds and config keys.

They keep the names the design documents use, so code written against the
documents reads naturally here.
"""

from __future__ import annotations

from typing import Final

CONF: Final = "configurable"

# special channels / pending-write names
INPUT: Final = "__input__"
INTERRUPT: Final = "__interrupt__"
RESUME: Final = "__resume__"
ERROR: Final = "__error__"
NO_WRITES: Final = "__no_writes__"
TASKS: Final = "__pregel_tasks"
RETURN: Final = "__return__"
PREVIOUS: Final = "__previous__"
SCHEDULED: Final = "__scheduled__"
CALL: Final = "__call__"
"""A task call's identity (name and argument digest), checked on replay."""

EVENTS: Final = "__pregelkit_events__"
"""The internal stream mode ``astream_events`` runs with: task attempts,
their steps and results as engine objects (``pregel._api.v2_events`` shapes them)."""

# task kinds, the first element of a task path
PUSH: Final = "__pregel_push"
PULL: Final = "__pregel_pull"

# graph entry and exit
START: Final = "__start__"
END: Final = "__end__"

NULL_TASK_ID: Final = "00000000-0000-0000-0000-000000000000"

# checkpoint namespaces: "parent:task_id|child:task_id"
NS_SEP: Final = "|"
NS_END: Final = ":"

CACHE_NS_WRITES: Final = "__pregel_ns_writes"

# Writes to these channels replace an earlier write of the same task instead of
# being appended; the negative index is their slot in a saver's write table.
WRITES_IDX_MAP: Final[dict[str, int]] = {
    ERROR: -1,
    SCHEDULED: -2,
    INTERRUPT: -3,
    RESUME: -4,
    CALL: -5,
}

# Writes that do not address a channel.
RESERVED: Final = frozenset(
    {INTERRUPT, RESUME, ERROR, NO_WRITES, TASKS, RETURN, SCHEDULED, PUSH, INPUT, CALL}
)

# keys of config["configurable"] the engine fills in for a running task
CONFIG_KEY_SEND: Final = "__pregel_send"
CONFIG_KEY_READ: Final = "__pregel_read"
CONFIG_KEY_CALL: Final = "__pregel_call"
CONFIG_KEY_CHECKPOINTER: Final = "__pregel_checkpointer"
CONFIG_KEY_STREAM: Final = "__pregel_stream"
CONFIG_KEY_CACHE: Final = "__pregel_cache"
CONFIG_KEY_RESUMING: Final = "__pregel_resuming"
CONFIG_KEY_TASK_ID: Final = "__pregel_task_id"
CONFIG_KEY_THREAD_ID: Final = "thread_id"
CONFIG_KEY_CHECKPOINT_ID: Final = "checkpoint_id"
CONFIG_KEY_CHECKPOINT_NS: Final = "checkpoint_ns"
CONFIG_KEY_CHECKPOINT_MAP: Final = "checkpoint_map"
CONFIG_KEY_SCRATCHPAD: Final = "__pregel_scratchpad"
CONFIG_KEY_RUNTIME: Final = "__pregel_runtime"
CONFIG_KEY_DURABILITY: Final = "__pregel_durability"
CONFIG_KEY_RESUME_MAP: Final = "__pregel_resume_map"
CONFIG_KEY_NODE_FINISHED: Final = "__pregel_node_finished"
CONFIG_KEY_PREVIOUS: Final = "__pregel_previous"
CONFIG_KEY_LEASE: Final = "__pregelkit_lease"
CONFIG_KEY_REPLAY_CHECK: Final = "__pregelkit_replay_check"
"""A ``ReplayProbe`` (``_plan/replay.py``): the run is a replay check, which
stops at the first call it would have to run (``pregelkit.testing.replay_check``)."""
"""(run id, fencing token) of a run a worker holds: its savers' writes check it."""
CONFIG_KEY_STREAM_MODES: Final = "__pregelkit_stream_modes"
"""In a queued run's config: the stream modes whose parts its worker writes
to the database (``pregelkit serve`` streams them); taken out by the worker."""
CONFIG_KEY_BREAKPOINTS: Final = "__pregelkit_breakpoints"
"""In a queued run's config: its ``interrupt_before`` / ``interrupt_after``
(``{"before": ..., "after": ...}``), which its worker passes to ``invoke``
(``pregelkit serve``'s run options); taken out by the worker."""
METADATA_KEY_RUN: Final = "pregelkit_run"
"""Checkpoint metadata naming the queued run (``wf.submit``) that saved it."""
