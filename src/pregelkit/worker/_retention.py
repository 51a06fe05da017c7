"""A worker's share of retention (``Worker(..., retention=policy)``).

Every worker given a policy asks, every ``TRY_SECONDS``, whether it is its
turn: one row (``pregelkit_retention``) holds the lease of the worker
pruning now and when the last prune ended, both by the database's clock, so
one worker at a time prunes, and the fleet at most once per
``EVERY_SECONDS``. A turn is a prune's steps (``checkpoint.retention``),
each a short transaction, with a pause between them (other writers get the
lock on SQLite) and the lease renewed on the way; a worker that stops or
dies mid-turn leaves a consistent database, and the lease lapses for the
next one. The decisions are here once; ``Worker`` and ``AsyncWorker`` only
run the steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

from pregelkit.checkpoint import _retention
from pregelkit.checkpoint._retention import Counts, Step
from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.retention import PruneReport, RetentionPolicy, prune_job

__all__ = ["EVERY_SECONDS", "JOIN_SECONDS", "PAUSE_SECONDS", "TRY_SECONDS", "checked", "turn"]

log = logging.getLogger("pregelkit.worker")

EVERY_SECONDS = 300.0
"""The fleet prunes at most once per this (from the end of the last prune)."""
TRY_SECONDS = 60.0
"""How often a worker asks whether it is its turn."""
LEASE_SECONDS = 60.0
"""A turn's lease, renewed every third of it while the prune runs."""
PAUSE_SECONDS = 0.02
"""Between two of a prune's transactions: workers' own writes go first."""
JOIN_SECONDS = 30.0
"""How long a stopping worker waits for its prune's current transaction."""


def checked(retention: object) -> RetentionPolicy | None:
    if retention is not None and not isinstance(retention, RetentionPolicy):
        raise TypeError(
            "Worker(retention=...) takes a pregelkit.durable.RetentionPolicy, "
            f"got {type(retention).__name__}"
        )
    return retention


def turn(
    saver: BaseCheckpointSaver[Any],
    policy: RetentionPolicy,
    holder: str,
    stopping: Callable[[], bool],
) -> Generator[Step, Any, PruneReport | None]:
    """One try: take the turn if it is free and due, prune, give it back.
    Returns what was removed (``None``: not this worker's turn)."""
    taken = yield partial(
        _retention.take_turn, holder=holder, lease=LEASE_SECONDS, every=EVERY_SECONDS
    )
    if not taken:
        return None
    job = prune_job(saver, policy, dry_run=False)
    renewed = time.monotonic()
    counts: Counts | None = None
    try:
        step = next(job)
        while not stopping():
            if time.monotonic() - renewed > LEASE_SECONDS / 3:
                if not (yield partial(_retention.renew_turn, holder=holder, lease=LEASE_SECONDS)):
                    log.warning("retention: the turn's lease lapsed; another worker prunes")
                    return None
                renewed = time.monotonic()
            step = job.send((yield step))
    except StopIteration as end:
        counts = end.value
    yield partial(_retention.end_turn, holder=holder, finished=counts is not None)
    if counts is None:
        return None
    report = PruneReport.of(counts, dry_run=False)
    log.info("retention: %s", report)
    return report
