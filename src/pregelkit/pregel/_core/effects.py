"""The effects of a run: the I/O its core asks for, as plain values.

The run core (``_core.loop.PregelLoop``) and its parts never call a saver, a
cache, a lock, a thread or an event loop: where a run needs I/O they return
one of these, and a performer (``_core.perform.SyncPregelLoop`` or
``AsyncPregelLoop``) makes it. One effect is one saver or cache call, so
the hot path pays one small tuple per call it would make anyway.

Effects, and what the performer makes of each:

- ``ReadThreadGate``: the thread's run-control mark, and with ``queued``
  the state of its queued run (``get_thread_gate``; a worker's lease reads
  only the mark, ``get_thread_control``). Start-up; the answer is sent back.
- ``PollMark``: poll the mark while the run runs (``WATCHER``, or the
  event loop's ``awatch``), until the run ends. Start-up.
- ``LoadCheckpoint``: ``get_tuple``. Start-up; the answer is sent back.
- ``SaveCheckpoint``: ``put``.
- ``SaveWrites``: ``put_writes``, with the attempt records of the task in
  the same call (one transaction), a serializer error naming ``who`` wrote.
- ``SaveAttempts``: ``put_attempts`` of records buffered by the run.
- ``SaveStarts``: the attempt starts still running unsaved when the call is
  made (``AttemptRecords.take_starts``), put by the start saver's thread.
- ``SetMark``: ``put_thread_control`` (``None`` clears the mark).
- ``ReadCache``: ``cache.get`` of the keys; the answer is given back to the core.
- ``WriteCache``: ``cache.set``, after the saver's group (never inside its
  transaction); the entries then leave ``fresh``.

Every saving effect says how the run waits for it (``wait``), decided by
the core from the run's durability: ``"now"`` is made at once and its error
raised as it is (start-up reads and the start's mark); ``"sync"`` is made
before the run goes on, a failure stopping the run as a failed save
(``_core.failed_saves``); ``"async"`` goes on the run's ordered lane (a checkpoint
before the writes that follow it), waited for at exit. ``durability="exit"``
has no wait of its own: the core keeps the writes and returns their effects
only when the run finishes.

Stream parts are not effects: they go to an in-memory sink (``Emit``),
handed to the stream-output part when the run is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Union

if TYPE_CHECKING:
    from pregelkit.checkpoint.attempts import AttemptRow
    from pregelkit.checkpoint.base import Checkpoint
    from pregelkit.pregel._core.records import AttemptRecords

__all__ = [
    "CacheKey",
    "Effect",
    "LoadCheckpoint",
    "PollMark",
    "ReadCache",
    "ReadThreadGate",
    "SaveAttempts",
    "SaveCheckpoint",
    "SaveStarts",
    "Save",
    "SaveWrites",
    "SetMark",
    "Wait",
    "WriteCache",
]

Wait = Literal["now", "sync", "async"]
CacheKey = tuple[Any, str]


class ReadThreadGate(NamedTuple):
    thread_id: str
    queued: bool
    """Read the queued run's state too (not when a worker's lease holds the thread)."""


class PollMark(NamedTuple):
    """Poll the thread's mark while the run runs (its answers go to ``ThreadMark.seen``)."""

    thread_id: str


class LoadCheckpoint(NamedTuple):
    config: dict[str, Any]


class SaveCheckpoint(NamedTuple):
    config: dict[str, Any]
    checkpoint: Checkpoint
    metadata: dict[str, Any]
    versions: dict[str, Any]
    wait: Wait


class SaveWrites(NamedTuple):
    config: dict[str, Any]
    writes: list[tuple[str, Any]]
    task_id: str
    path: str
    who: str
    attempts: Sequence[AttemptRow]
    wait: Wait


class SaveAttempts(NamedTuple):
    thread_id: str
    rows: list[AttemptRow]
    wait: Wait


class SaveStarts(NamedTuple):
    records: AttemptRecords
    wait: Wait


class SetMark(NamedTuple):
    thread_id: str
    mark: str | None
    wait: Wait


class ReadCache(NamedTuple):
    keys: list[CacheKey]


class WriteCache(NamedTuple):
    pairs: Mapping[CacheKey, tuple[list[tuple[str, Any]], int | None]]
    fresh: dict[CacheKey, list[tuple[str, Any]]]
    wait: Wait


Save = Union[SaveCheckpoint, SaveWrites, SaveAttempts, SaveStarts, SetMark, WriteCache]
"""The effects that save (each has a ``wait``)."""

Effect = Union[
    ReadThreadGate,
    PollMark,
    LoadCheckpoint,
    SaveCheckpoint,
    SaveWrites,
    SaveAttempts,
    SaveStarts,
    SetMark,
    ReadCache,
    WriteCache,
]
