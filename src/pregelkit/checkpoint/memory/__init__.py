"""A checkpoint saver that keeps everything in process memory.

For tests, notebooks and short-lived processes: nothing survives the process.
Values are serialized on the way in anyway, so a run behaves the same here as
with a database saver (a value that cannot be stored fails now, not later in
production, and callers may keep mutating what they passed in).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, ExitStack
from typing import Any, Literal, Self, TypeVar

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    WRITES_IDX_MAP,
)
from pregelkit.checkpoint.attempts import (
    AttemptList,
    AttemptRow,
    attempt_from_row,
    attempt_order,
)
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    RunnableConfig,
    get_checkpoint_id,
    get_checkpoint_metadata,
    prune_targets,
    thread_coordinates,
)
from pregelkit.checkpoint.base._unversioned import without_blob_values
from pregelkit.checkpoint.memory._persistent import PersistentDict
from pregelkit.checkpoint.serde.base import (
    SerdeError,
    SerializerProtocol,
    StoredAt,
    dumps_at,
    loads_at,
)
from pregelkit.errors import CheckpointCorruptError

T = TypeVar("T")

__all__ = ["InMemorySaver", "MemorySaver", "PersistentDict"]

TypedValue = tuple[str, bytes]
StoredCheckpoint = tuple[TypedValue, TypedValue, str | None]
"""(checkpoint without channel values, metadata, parent checkpoint id)"""
StoredWrite = tuple[str, str, TypedValue, str]
"""(task id, channel, value, task path)"""

_EMPTY: TypedValue = ("empty", b"")
"""Blob of a channel that has a version but no value (it was cleared)."""


class InMemorySaver(
    BaseCheckpointSaver[str],
    AbstractContextManager["InMemorySaver"],
    AbstractAsyncContextManager["InMemorySaver"],
):
    """Stores checkpoints, pending writes and channel values in dictionaries.

    Channel values live apart from checkpoints, keyed by channel version, so a
    checkpoint costs only the channels that changed in its step: a large value
    that stays put is stored once, not once per step.

    ``storage[thread_id][checkpoint_ns][checkpoint_id]`` is a
    ``StoredCheckpoint``, ``writes[(thread_id, checkpoint_ns, checkpoint_id)]``
    maps ``(task_id, write index)`` to a ``StoredWrite``, and
    ``blobs[(thread_id, checkpoint_ns, channel, version)]`` is a typed value.
    """

    storage: defaultdict[str, defaultdict[str, dict[str, StoredCheckpoint]]]
    writes: defaultdict[tuple[str, str, str], dict[tuple[str, int], StoredWrite]]
    blobs: dict[tuple[str, str, str, str | int | float], TypedValue]

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        factory: Callable[..., Any] = defaultdict,
    ) -> None:
        """``factory`` makes the three tables (``factory(default)``, and
        ``factory()`` for blobs): a persistent mapping type that is also a
        context manager keeps them elsewhere, entered with the saver."""
        super().__init__(serde=serde)
        self.storage = factory(lambda: defaultdict(dict))
        self.writes = factory(dict)
        self.blobs = factory()
        self.stack = ExitStack()
        if factory is not defaultdict:
            tables: tuple[Any, ...] = (self.storage, self.writes, self.blobs)
            for table in tables:
                self.stack.enter_context(table)
        self.controls: dict[str, str] = {}
        self.attempts: dict[str, list[AttemptRow]] = {}
        """Attempt rows by thread, as saved (a row per save; ``_merged`` keeps
        one per attempt)."""
        # One lock for all three tables: workers call put_writes concurrently,
        # and readers must not see a checkpoint without its blobs.
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        self.stack.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stack.__exit__(*exc)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    # writing

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as a child of the checkpoint ``config`` names,
        with blobs for the channels in ``new_versions`` only."""
        thread_id, checkpoint_ns, parent_id = thread_coordinates(config)
        serde = self.serde
        values = checkpoint["channel_values"]
        blobs = []  # a loop: a comprehension's function costs more than a step's blob or two
        for channel, version in new_versions.items():
            blob = (
                _dump_value(serde, values[channel], thread_id, checkpoint_ns, channel, version)
                if channel in values
                else _EMPTY
            )
            blobs.append(((thread_id, checkpoint_ns, channel, version), blob))
        without_values = without_blob_values(checkpoint)
        meta = get_checkpoint_metadata(config, metadata)
        if getattr(serde, "dumps_typed_at", None) is None:  # where it is stored: not asked
            dumped = serde.dumps_typed(without_values), serde.dumps_typed(meta)
        else:
            key = (checkpoint["id"],)
            at = StoredAt(thread_id, checkpoint_ns, "checkpoint", key)
            dumped = (
                dumps_at(serde, without_values, at),
                dumps_at(serde, meta, at._replace(kind="metadata")),
            )
        stored: StoredCheckpoint = (*dumped, parent_id)
        with self._lock:
            self.blobs.update(blobs)
            self.storage[thread_id][checkpoint_ns][checkpoint["id"]] = stored
        return _config(thread_id, checkpoint_ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
        *,
        attempts: Sequence[AttemptRow] = (),
    ) -> None:
        """Record a task's writes against the checkpoint ``config`` names,
        with ``attempts`` (under the same lock: a reader sees both or neither).

        A special write (error, interrupt, resume, scheduled) replaces the
        task's previous one in place; a regular write that is already stored
        is kept, so a task re-run after a crash cannot change what the first
        run recorded.
        """
        thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
        if checkpoint_id is None:
            raise ValueError(
                f"put_writes() for task {task_id!r} needs the checkpoint the writes belong to: "
                "pass the config put() returned (it holds configurable.checkpoint_id)"
            )
        bound = getattr(self.serde, "dumps_typed_at", None)
        dumps = self.serde.dumps_typed
        # a loop, not a comprehension: its function and frame cost more than
        # the one or two writes a task makes
        rows = []
        for idx, (channel, value) in enumerate(writes):
            if bound is None:
                typed = dumps(value)
            else:
                where = (checkpoint_id, task_id, channel)
                typed = bound(value, StoredAt(thread_id, checkpoint_ns, "write", where))
            rows.append(
                ((task_id, WRITES_IDX_MAP.get(channel, idx)), (task_id, channel, typed, task_path))
            )
        with self._lock:
            stored = self.writes[(thread_id, checkpoint_ns, checkpoint_id)]
            for key, row in rows:
                if key[1] >= 0 and key in stored:
                    continue
                stored[key] = row
            if attempts:  # appended: rows are merged by key when read (see _merged)
                self.attempts.setdefault(thread_id, []).extend(attempts)

    def put_attempts(self, thread_id: str, records: Sequence[AttemptRow]) -> None:
        with self._lock:
            self.attempts.setdefault(str(thread_id), []).extend(records)

    def list_attempts(self, thread_id: str) -> AttemptList:
        with self._lock:
            rows = _merged(self.attempts.get(str(thread_id), ()))
        return sorted(map(attempt_from_row, rows), key=attempt_order)

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        thread_id = str(thread_id)  # configs may carry non-str ids; storage keys are str
        with self._lock:
            self.storage.pop(thread_id, None)
            self.controls.pop(thread_id, None)
            self.attempts.pop(thread_id, None)
            self._forget_rows({thread_id}, set(), set())

    def get_thread_control(self, thread_id: str) -> str | None:
        return self.controls.get(str(thread_id))

    def put_thread_control(self, thread_id: str, mark: str | None) -> None:
        if mark is None:
            self.controls.pop(str(thread_id), None)
        else:
            self.controls[str(thread_id)] = mark

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another.

        Entries the target already has under the same ids are replaced; the
        rest of the target is left alone.
        """
        source_thread_id, target_thread_id = str(source_thread_id), str(target_thread_id)
        move = _Resealer(self.serde, source_thread_id, target_thread_id)
        with self._lock:
            for ns, checkpoints in self._namespaces(source_thread_id).items():
                self.storage[target_thread_id][ns].update(
                    {
                        cid: (
                            move(cp, ns, "checkpoint", (cid,)),
                            move(meta, ns, "metadata", (cid,)),
                            parent,
                        )
                        for cid, (cp, meta, parent) in checkpoints.items()
                    }
                )
            for (thread_id, ns, checkpoint_id), stored in list(self.writes.items()):
                if thread_id == source_thread_id:
                    self.writes[(target_thread_id, ns, checkpoint_id)] = {
                        slot: (
                            task_id,
                            channel,
                            move(value, ns, "write", (checkpoint_id, task_id, channel)),
                            path,
                        )
                        for slot, (task_id, channel, value, path) in stored.items()
                    }
            if records := self.attempts.get(source_thread_id):
                self.attempts.setdefault(target_thread_id, []).extend(
                    (target_thread_id, *row[1:]) for row in _merged(records)
                )
            for (thread_id, ns, channel, version), blob in list(self.blobs.items()):
                if thread_id == source_thread_id:
                    self.blobs[(target_thread_id, ns, channel, version)] = (
                        blob if blob is _EMPTY else move(blob, ns, "blob", (channel, str(version)))
                    )

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads: ``delete`` forgets them entirely;
        ``keep_latest`` keeps each namespace's latest checkpoint with its pending
        writes and the blobs it references (its ``parent_config`` then names a
        checkpoint that no longer exists), and writes saved ahead of a checkpoint
        not saved yet (see ``_writes_to_keep``)."""
        targets = set(prune_targets(thread_ids, strategy))
        with self._lock:
            kept: dict[tuple[str, str], tuple[str, StoredCheckpoint]] = {}
            if strategy == "keep_latest":
                for thread_id in targets:
                    for ns, checkpoints in self._namespaces(thread_id).items():
                        if checkpoints:
                            latest_id = max(checkpoints)
                            kept[(thread_id, ns)] = (latest_id, checkpoints[latest_id])
            # Load what is kept before changing anything, so a corrupt
            # checkpoint aborts the prune instead of leaving it half done.
            kept_blobs = {
                (thread_id, ns, channel, version)
                for (thread_id, ns), (checkpoint_id, stored) in kept.items()
                for channel, version in self._load_checkpoint(
                    stored[0], thread_id, ns, checkpoint_id
                )["channel_versions"].items()
            }
            kept_writes = (
                _writes_to_keep(self.writes, targets, kept) if strategy == "keep_latest" else set()
            )
            for thread_id in targets:
                self.storage.pop(thread_id, None)
                if strategy == "delete":
                    self.controls.pop(thread_id, None)
                    self.attempts.pop(thread_id, None)
                elif table := self.attempts.get(thread_id):
                    latest = max(row[2] for row in table)  # run ids sort by time
                    self.attempts[thread_id] = [row for row in _merged(table) if row[2] == latest]
            for (thread_id, ns), (checkpoint_id, stored) in kept.items():
                self.storage[thread_id][ns][checkpoint_id] = stored
            self._forget_rows(targets, kept_writes, kept_blobs)

    def _forget_rows(
        self,
        thread_ids: set[str],
        kept_writes: set[tuple[str, str, str]],
        kept_blobs: set[tuple[str, str, str, str | int | float]],
    ) -> None:
        """Drop the writes and blobs of ``thread_ids`` except the kept ones;
        the caller holds the lock."""
        for key in [k for k in self.writes if k[0] in thread_ids and k not in kept_writes]:
            del self.writes[key]
        for blob_key in [k for k in self.blobs if k[0] in thread_ids and k not in kept_blobs]:
            del self.blobs[blob_key]

    # reading

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread/namespace's latest when
        it names none; ``None`` if there is no such checkpoint."""
        thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
        with self._lock:
            checkpoints = self._namespaces(thread_id).get(checkpoint_ns)
            if not checkpoints:
                return None
            if checkpoint_id is None:
                checkpoint_id = max(checkpoints)
            stored = checkpoints.get(checkpoint_id)
            if stored is None:
                return None
        return self._load_tuple(thread_id, checkpoint_ns, checkpoint_id, stored, None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of every thread (``config=None``), of one
        thread, or of one thread's namespace when ``config`` names it; ``filter``
        keeps those whose metadata has equal values for its keys."""
        thread_id: str | None = None
        checkpoint_ns: str | None = None
        checkpoint_id: str | None = None
        if config is not None:
            thread_id, _, checkpoint_id = thread_coordinates(config)
            checkpoint_ns = config[CONF].get(CONFIG_KEY_CHECKPOINT_NS)
        before_id = get_checkpoint_id(before) if before is not None else None
        with self._lock:
            threads = (
                self.storage.items()
                if thread_id is None
                else [(thread_id, self._namespaces(thread_id))]
            )
            candidates = [
                (cid, tid, ns, stored)
                for tid, namespaces in threads
                for ns, checkpoints in namespaces.items()
                if checkpoint_ns is None or ns == checkpoint_ns
                for cid, stored in checkpoints.items()
                if (checkpoint_id is None or cid == checkpoint_id)
                and (before_id is None or cid < before_id)
            ]
        candidates.sort(key=lambda c: c[0], reverse=True)
        remaining = limit
        for cid, tid, ns, stored in candidates:
            if remaining is not None and remaining <= 0:
                return
            metadata = self._load_metadata(stored[1], tid, ns, cid)
            if filter and not all(metadata.get(k, _MISSING) == v for k, v in filter.items()):
                continue
            yield self._load_tuple(tid, ns, cid, stored, metadata)
            if remaining is not None:
                remaining -= 1

    # loading

    def _namespaces(self, thread_id: str) -> dict[str, dict[str, StoredCheckpoint]]:
        """A thread's namespaces, without creating an entry for an unknown thread."""
        return self.storage.get(thread_id) or {}

    def _load_tuple(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        stored: StoredCheckpoint,
        metadata: CheckpointMetadata | None,
    ) -> CheckpointTuple:
        checkpoint = self._load_checkpoint(stored[0], thread_id, checkpoint_ns, checkpoint_id)
        if metadata is None:
            metadata = self._load_metadata(stored[1], thread_id, checkpoint_ns, checkpoint_id)
        with self._lock:
            blobs = [
                (channel, version, self.blobs.get((thread_id, checkpoint_ns, channel, version)))
                for channel, version in checkpoint["channel_versions"].items()
            ]
            writes = list(self.writes.get((thread_id, checkpoint_ns, checkpoint_id), {}).values())
        serde = self.serde
        values: dict[str, Any] = {}
        for channel, version, blob in blobs:
            if blob is None or blob[0] == _EMPTY[0]:
                continue
            try:
                values[channel] = loads_at(
                    serde, blob, _blob_at(thread_id, checkpoint_ns, channel, version)
                )
            except Exception as exc:
                raise CheckpointCorruptError(
                    f"the stored value of channel {channel!r} cannot be loaded: {exc}",
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    channel=channel,
                ) from exc
        checkpoint["channel_values"] = {**checkpoint.get("channel_values", {}), **values}
        pending: list[PendingWrite] = []
        bound = getattr(serde, "loads_typed_at", None)
        loads = serde.loads_typed
        for task_id, channel, value, _ in writes:
            try:
                if bound is None:
                    pending.append((task_id, channel, loads(value)))
                else:
                    at = StoredAt(
                        thread_id, checkpoint_ns, "write", (checkpoint_id, task_id, channel)
                    )
                    pending.append((task_id, channel, bound(value, at)))
            except Exception as exc:
                raise CheckpointCorruptError(
                    f"a pending write of task {task_id!r} to {channel!r} cannot be loaded: {exc}",
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    channel=channel,
                    task_id=task_id,
                ) from exc
        parent_id = stored[2]
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=_config(thread_id, checkpoint_ns, parent_id) if parent_id else None,
            pending_writes=pending,
        )

    def _load_checkpoint(
        self, typed: TypedValue, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> Checkpoint:
        checkpoint: Checkpoint = self._load_record(
            typed, "checkpoint", thread_id, checkpoint_ns, checkpoint_id
        )
        if not isinstance(checkpoint.get("channel_versions"), dict):
            raise CheckpointCorruptError(
                "the stored checkpoint has no channel_versions mapping",
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
            )
        return checkpoint

    def _load_metadata(
        self, typed: TypedValue, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> CheckpointMetadata:
        metadata: CheckpointMetadata = self._load_record(
            typed, "checkpoint metadata", thread_id, checkpoint_ns, checkpoint_id
        )
        return metadata

    def _load_record(
        self, typed: TypedValue, what: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> Any:
        kind = "checkpoint" if what == "checkpoint" else "metadata"
        at = StoredAt(thread_id, checkpoint_ns, kind, (checkpoint_id,))
        try:
            record = loads_at(self.serde, typed, at)
        except Exception as exc:
            raise CheckpointCorruptError(
                f"the stored {what} cannot be loaded: {exc}",
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
            ) from exc
        if not isinstance(record, dict):
            raise CheckpointCorruptError(
                f"the stored {what} is a {type(record).__name__}, not a dict",
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
            )
        return record

    async def _in_thread(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Everything is in memory: the base saver's async twins run their sync
        method inline, without a worker thread."""
        return fn(*args, **kwargs)


def _merged(rows: Iterable[AttemptRow]) -> list[AttemptRow]:
    """One row per attempt (namespace, run, task id, attempt): the finished
    one if any (a start row never replaces it), else the latest start."""
    by_key: dict[tuple[Any, ...], AttemptRow] = {}
    for row in rows:
        key = (row[1], row[2], row[4], row[6])
        if row[9] is None and key in by_key:
            continue
        by_key[key] = row
    return list(by_key.values())


MemorySaver = InMemorySaver
"""The name older code imports."""

_MISSING = object()


class _Resealer:
    """Seals a copied value for its new thread when the serializer binds
    values to their place (``EncryptedSerializer``); otherwise copies it."""

    def __init__(self, serde: SerializerProtocol, source: str, target: str) -> None:
        self.reseal = getattr(serde, "reseal", None)
        self.source = source
        self.target = target

    def __call__(self, value: TypedValue, ns: str, kind: str, key: tuple[str, ...]) -> TypedValue:
        if self.reseal is None:
            return value
        resealed: TypedValue = self.reseal(
            value, StoredAt(self.source, ns, kind, key), StoredAt(self.target, ns, kind, key)
        )
        return resealed


def _dump_value(
    serde: SerializerProtocol, value: Any, thread_id: str, ns: str, channel: str, version: Any
) -> TypedValue:
    """A channel value's blob; a value the serializer refuses names its channel."""
    try:
        bound = getattr(serde, "dumps_typed_at", None)
        if bound is None:  # where it is stored is not asked: no StoredAt made
            return serde.dumps_typed(value)
        result: TypedValue = bound(value, _blob_at(thread_id, ns, channel, version))
        return result
    except SerdeError as exc:
        raise SerdeError(f"cannot store the value of channel {channel!r}: {exc}") from exc


def _blob_at(thread_id: str, checkpoint_ns: str, channel: str, version: Any) -> StoredAt:
    return StoredAt(thread_id, checkpoint_ns, "blob", (channel, str(version)))


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        CONF: {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: checkpoint_ns,
            CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
        }
    }


def _writes_to_keep(
    writes: Mapping[tuple[str, str, str], Any],
    thread_ids: set[str],
    kept: Mapping[tuple[str, str], tuple[str, Any]],
) -> set[tuple[str, str, str]]:
    """The writes ``keep_latest`` leaves: the latest checkpoint's, and those
    saved ahead of their checkpoint (a later id, or a namespace with none
    saved yet): they become its pending writes when it lands, and a resume
    needs them not to run finished tasks again."""
    keep = set()
    for key in writes:
        thread_id, ns, checkpoint_id = key
        if thread_id in thread_ids:
            latest = kept.get((thread_id, ns))
            if latest is None or checkpoint_id >= latest[0]:
                keep.add(key)
    return keep
