"""Stream parts in the database: a run queued with stream modes has what it
emits written by its worker (``pregelkit.worker._parts``), and any process
reads them back in order (``pregelkit serve``'s streams). Parts travel
through the database, so a stream is joined on any server process, and a
dropped one resumes after the last part it got (``part_id``).

One writer per run at a time (its lease holder, fenced), each batch
committed before the next is written: a run's ``part_id`` order is the
order its parts were emitted and committed, so a reader that saw
``part_id`` N has seen every earlier part of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pregelkit.checkpoint._runqueue import Dialect, RunPlan, check_fence

__all__ = ["Part", "Stored", "delete", "latest", "tail", "write"]

Part = tuple[str, str, str, bytes]
"""A part to write: mode, namespace (``|``-joined), serde type, data."""
Stored = tuple[int, str, str, str, bytes]
"""A part read back: its id, then as ``Part``."""

READ_LIMIT = 500
"""The most parts one read returns: a reader far behind catches up in steps."""


def write(d: Dialect, lease: tuple[str, int], parts: Sequence[Part]) -> RunPlan[None]:
    """Append a batch of a run's parts, if the lease is still its holder's."""
    yield from check_fence(d, lease, "write stream parts")
    rows = ", ".join("(?, ?, ?, ?, ?)" for _ in parts)
    params: list[Any] = []
    for mode, ns, kind, data in parts:
        params += [lease[0], mode, ns, kind, data]
    yield d.q(
        f"INSERT INTO pregelkit_stream_parts (run_id, mode, ns, data_type, data) VALUES {rows}",
        params,
    )


def tail(
    d: Dialect, run_id: str, after: int, limit: int = READ_LIMIT
) -> RunPlan[tuple[str | None, list[Stored]]]:
    """The run's status, then its parts after ``after`` (at most ``limit``).
    The status is read first: a run that had ended then had written all
    its parts, so fewer than ``limit`` parts read after an ended status
    are its last ones."""
    row = yield d.q("SELECT status FROM pregelkit_runs WHERE run_id = ?", (run_id,), "one")
    rows = yield d.q(
        "SELECT part_id, mode, ns, data_type, data FROM pregelkit_stream_parts "
        "WHERE run_id = ? AND part_id > ? ORDER BY part_id LIMIT ?",
        (run_id, after, limit),
        "all",
    )
    parts = [(int(i), str(m), str(n), str(t), bytes(b)) for i, m, n, t, b in rows]
    return (None if row is None else str(row[0])), parts


def latest(d: Dialect, run_id: str) -> RunPlan[int]:
    """The id of the run's latest part (0: none yet)."""
    row = yield d.q(
        "SELECT MAX(part_id) FROM pregelkit_stream_parts WHERE run_id = ?", (run_id,), "one"
    )
    return 0 if row is None or row[0] is None else int(row[0])


def delete(d: Dialect, run_ids: Sequence[str]) -> RunPlan[None]:
    """Forget the parts of these runs (their rows are deleted)."""
    if run_ids:
        marks = ", ".join("?" for _ in run_ids)
        yield d.q(f"DELETE FROM pregelkit_stream_parts WHERE run_id IN ({marks})", run_ids)
