"""The effects of a run: the I/O its core asks for, as plain values.

The run core (``_core.loop.PregelLoop``) and its parts never call a saver, a
cache, a lock, a thread or an event loop: where a run needs I/O they return
one of these, and a performer (``_core.perform.SyncPregelLoop`` or
``AsyncPregelLoop``) makes it. One effect is one saver or cache call, so
the hot path pays one small object per call it would make anyway.

Effects, and what the performer makes of each:

- ``OpenThread``: ``open_thread``: the thread's lock, its run-control
  mark, and with ``gate="gate"`` the state of its queued run (a worker's
  lease reads only the mark), perhaps its checkpoint too, in one call a
  remote saver makes in one round trip; then the mark is polled while the
  run runs (``WATCHER``, or the event loop's ``awatch``), until it ends.
  Start-up; the gate is sent back (a run refused by it stops polling as it
  releases the thread).
- ``LoadCheckpoint``: ``get_tuple`` (the first one answered from what
  ``open_thread`` read, if it read the checkpoint). Start-up; the answer is
  sent back.
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
from typing import TYPE_CHECKING, Any, Literal, Union

if TYPE_CHECKING:
    from pregelkit.checkpoint.attempts import AttemptRow
    from pregelkit.checkpoint.base import Checkpoint
    from pregelkit.checkpoint.base._open import Gate
    from pregelkit.pregel._core.records import AttemptRecords

__all__ = [
    "CacheKey",
    "Effect",
    "LoadCheckpoint",
    "OpenThread",
    "ReadCache",
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


class _Effect:
    """An effect's fields are its ``__slots__``: a plain class with an
    ``__init__`` is made in half the time of a ``NamedTuple`` (whose
    ``__new__`` is a Python function called through ``type``), and the hot
    path makes one per task and per step."""

    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class OpenThread(_Effect):
    """Take the thread's lock (``lock``, waiting for it with ``wait``), read
    its ``gate`` (``checkpoint.base._open.Gate``) and perhaps the checkpoint
    ``config`` names; then, with a gate, poll the mark while the run runs
    (its answers go to ``ThreadMark.seen``), until the run ends."""

    __slots__ = ("config", "gate", "lock", "thread_id", "wait")

    def __init__(
        self, thread_id: str, config: dict[str, Any], lock: bool, wait: bool, gate: Gate
    ) -> None:
        self.thread_id, self.config, self.lock, self.wait, self.gate = (
            thread_id,
            config,
            lock,
            wait,
            gate,
        )


class LoadCheckpoint(_Effect):
    __slots__ = ("config",)

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config


class SaveCheckpoint(_Effect):
    __slots__ = ("checkpoint", "config", "metadata", "versions", "wait")

    def __init__(
        self,
        config: dict[str, Any],
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
        versions: dict[str, Any],
        wait: Wait,
    ) -> None:
        self.config, self.checkpoint, self.metadata = config, checkpoint, metadata
        self.versions, self.wait = versions, wait


class SaveWrites(_Effect):
    __slots__ = ("attempts", "config", "path", "task_id", "wait", "who", "writes")

    def __init__(
        self,
        config: dict[str, Any],
        writes: list[tuple[str, Any]],
        task_id: str,
        path: str,
        who: str,
        attempts: Sequence[AttemptRow],
        wait: Wait,
    ) -> None:
        self.config, self.writes, self.task_id, self.path = config, writes, task_id, path
        self.who, self.attempts, self.wait = who, attempts, wait


class SaveAttempts(_Effect):
    __slots__ = ("rows", "thread_id", "wait")

    def __init__(self, thread_id: str, rows: list[AttemptRow], wait: Wait) -> None:
        self.thread_id, self.rows, self.wait = thread_id, rows, wait


class SaveStarts(_Effect):
    __slots__ = ("records", "wait")

    def __init__(self, records: AttemptRecords, wait: Wait) -> None:
        self.records, self.wait = records, wait


class SetMark(_Effect):
    __slots__ = ("mark", "thread_id", "wait")

    def __init__(self, thread_id: str, mark: str | None, wait: Wait) -> None:
        self.thread_id, self.mark, self.wait = thread_id, mark, wait


class ReadCache(_Effect):
    __slots__ = ("keys",)

    def __init__(self, keys: list[CacheKey]) -> None:
        self.keys = keys


class WriteCache(_Effect):
    __slots__ = ("fresh", "pairs", "wait")

    def __init__(
        self,
        pairs: Mapping[CacheKey, tuple[list[tuple[str, Any]], int | None]],
        fresh: dict[CacheKey, list[tuple[str, Any]]],
        wait: Wait,
    ) -> None:
        self.pairs, self.fresh, self.wait = pairs, fresh, wait


Save = Union[SaveCheckpoint, SaveWrites, SaveAttempts, SaveStarts, SetMark, WriteCache]
"""The effects that save (each has a ``wait``)."""

Effect = Union[
    OpenThread,
    LoadCheckpoint,
    SaveCheckpoint,
    SaveWrites,
    SaveAttempts,
    SaveStarts,
    SetMark,
    ReadCache,
    WriteCache,
]
