"""PostgreSQL savers that keep only the latest checkpoint of each thread and
namespace, as LangGraph's ``ShallowPostgresSaver`` does.

Code written for LangGraph's shallow savers runs unchanged, and a thread's
tables stay the size of one checkpoint however long it runs. Each ``put``
stores the new checkpoint and, in the same transaction, drops the thread's
older checkpoints with their writes and the blobs only they referenced (what
``prune(strategy="keep_latest")`` does), so no reader ever sees a thread
without its latest checkpoint. ``get_state_history`` then has one entry per
namespace, and a past ``checkpoint_id`` cannot be replayed or forked.

The cost is the prune's three deletes per ``put``, on the thread's rows
only (found through the primary keys).
"""

from __future__ import annotations

from functools import partial

from pregelkit.checkpoint import _plans
from pregelkit.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    RunnableConfig,
)
from pregelkit.checkpoint.postgres import PostgresSaver, _sql
from pregelkit.checkpoint.postgres.aio import AsyncShallowPostgresSaver

__all__ = ["AsyncShallowPostgresSaver", "ShallowPostgresSaver"]


class ShallowPostgresSaver(PostgresSaver):
    """A :class:`~pregelkit.checkpoint.postgres.PostgresSaver` that keeps only
    the latest checkpoint of each thread and namespace."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` and drop the thread's earlier checkpoints, in
        one transaction."""
        return self._run(
            partial(
                _plans.put_latest, _sql.SQL, self.serde, config, checkpoint, metadata, new_versions
            ),
            "put",
            _plans.thread_of(config),
            writes=True,
        )
