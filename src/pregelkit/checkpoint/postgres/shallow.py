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

from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncShallowPostgresSaver

__all__ = ["AsyncShallowPostgresSaver", "ShallowPostgresSaver"]


class ShallowPostgresSaver(PostgresSaver):
    """A :class:`~pregelkit.checkpoint.postgres.PostgresSaver` that keeps only
    the latest checkpoint of each thread and namespace."""

    _keep_latest = True
