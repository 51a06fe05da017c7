"""What a task body may know of the lease its run is held under.

A side effect in the same database as the queue can be fenced as the
checkpoints are: write it in a transaction that also checks the lease,

    INSERT INTO my_log (...) SELECT ... WHERE EXISTS (
        SELECT 1 FROM pregelkit_runs
        WHERE run_id = %s AND fence = %s AND status = 'running' FOR SHARE)

(SQLite: without ``FOR SHARE``, in a ``BEGIN IMMEDIATE`` transaction), so a
worker that lost the lease cannot perform it either.
"""

from __future__ import annotations

from typing import NamedTuple

from pregelkit._internal._constants import CONF, CONFIG_KEY_LEASE
from pregelkit.config import get_config

__all__ = ["Lease", "current_lease"]


class Lease(NamedTuple):
    run_id: str
    fence: int
    """Grows by one each time a worker claims the run."""


def current_lease() -> Lease | None:
    """The lease of the run the calling task belongs to; ``None`` when the
    run was not started by a worker (``invoke`` called directly)."""
    lease = (get_config().get(CONF) or {}).get(CONFIG_KEY_LEASE)
    return None if lease is None else Lease(str(lease[0]), int(lease[1]))
