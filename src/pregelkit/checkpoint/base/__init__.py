"""Checkpoints, their metadata, and the interface every saver implements.

A checkpoint is the state between two supersteps: channel values and
versions, and which versions each node has seen. Writes made by tasks of the
step after a checkpoint are stored beside it as *pending writes*, so a
resumed run skips the tasks that already finished.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NamedTuple,
    NotRequired,
    Self,
    TypedDict,
    TypeVar,
)

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)
from pregelkit._internal._ids import random_digits, utc_now_iso, uuid6
from pregelkit._internal._threads import to_thread
from pregelkit._internal._typing import MISSING
from pregelkit.checkpoint.base import _delta
from pregelkit.checkpoint.base._delta import DeltaChannelHistory, writes_sort_key
from pregelkit.checkpoint.base._open import Gate, OpenedThread, aopen_one_by_one, open_one_by_one
from pregelkit.checkpoint.serde.base import SerializerProtocol
from pregelkit.errors import ThreadBusyError

if TYPE_CHECKING:
    from pregelkit.channels.base import BaseChannel
    from pregelkit.checkpoint._runqueue import Dialect, RunPlan
    from pregelkit.checkpoint.attempts import AttemptList, AttemptRow

__all__ = [
    "BaseCheckpointSaver",
    "ChannelVersions",
    "Checkpoint",
    "CheckpointMetadata",
    "CheckpointTuple",
    "DeltaChannelHistory",
    "EXCLUDED_METADATA_KEYS",
    "EmptyChannelError",
    "OpenedThread",
    "PendingWrite",
    "RunnableConfig",
    "copy_checkpoint",
    "create_checkpoint",
    "create_checkpoint_id",
    "empty_checkpoint",
    "get_checkpoint_id",
    "get_checkpoint_metadata",
    "get_serializable_checkpoint_metadata",
    "writes_sort_key",
]

from pregelkit.errors import EmptyChannelError

V = TypeVar("V", int, float, str)
T = TypeVar("T")
RunnableConfig = dict[str, Any]
ChannelVersions = dict[str, Any]
PendingWrite = tuple[str, str, Any]
"""(task id, channel, value)"""

LATEST_VERSION = 2


class CheckpointMetadata(TypedDict, total=False):
    """Why and where a checkpoint was made."""

    source: Literal["input", "loop", "update", "fork"]
    """``input``: from the input of invoke/stream; ``loop``: after a superstep;
    ``update``: from ``update_state``; ``fork``: a copy of another checkpoint."""
    step: int
    """-1 for the input checkpoint, 0 for the first loop checkpoint, and so on."""
    parents: dict[str, str]
    """Checkpoint namespace -> checkpoint id of the parent graphs."""
    run_id: NotRequired[str]
    writes: NotRequired[dict[str, Any]]


class Checkpoint(TypedDict):
    """State snapshot at a given point in time."""

    v: int
    id: str
    """Unique and increasing: string order is creation order."""
    ts: str
    """ISO 8601 creation time."""
    channel_values: dict[str, Any]
    channel_versions: ChannelVersions
    versions_seen: dict[str, ChannelVersions]
    """node -> channel -> the version that node last ran on."""


class CheckpointTuple(NamedTuple):
    """A checkpoint with its config, metadata, parent and pending writes."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    parent_config: RunnableConfig | None = None
    pending_writes: list[PendingWrite] | None = None


def empty_checkpoint() -> Checkpoint:
    return Checkpoint(
        v=LATEST_VERSION,
        id=uuid6(clock_seq=-2),
        ts=utc_now_iso(),
        channel_values={},
        channel_versions={},
        versions_seen={},
    )


def create_checkpoint(
    checkpoint: Checkpoint,
    channels: Mapping[str, BaseChannel[Any, Any, Any]] | None,
    step: int,
    *,
    id: str | None = None,
) -> Checkpoint:
    """A new checkpoint after ``checkpoint``, at ``step``: the values of
    ``channels`` (those with a version in it; empty channels left out), or
    the old checkpoint's values when ``channels`` is ``None``."""
    if channels is None:
        values = checkpoint["channel_values"]
    else:
        values = {}
        for key, channel in channels.items():
            if key not in checkpoint["channel_versions"]:
                continue
            try:
                value = channel.checkpoint()
            except EmptyChannelError:
                continue
            if value is not MISSING:
                values[key] = value
    return Checkpoint(
        v=LATEST_VERSION,
        id=id or create_checkpoint_id(step),
        ts=utc_now_iso(),
        channel_values=values,
        channel_versions=checkpoint["channel_versions"],
        versions_seen=checkpoint["versions_seen"],
    )


def create_checkpoint_id(step: int) -> str:
    return uuid6(clock_seq=step)


def copy_checkpoint(checkpoint: Checkpoint) -> Checkpoint:
    return Checkpoint(
        v=checkpoint["v"],
        id=checkpoint["id"],
        ts=checkpoint["ts"],
        channel_values=checkpoint["channel_values"].copy(),
        channel_versions=checkpoint["channel_versions"].copy(),
        versions_seen={k: v.copy() for k, v in checkpoint["versions_seen"].items()},
    )


def get_checkpoint_id(config: RunnableConfig) -> str | None:
    value: str | None = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    return value


def get_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """The metadata to store: the given metadata plus the run's own metadata
    keys, with NUL characters taken out of strings (PostgreSQL cannot store
    them in JSON; LangGraph strips them too)."""
    run_meta = config.get("metadata")
    merged: dict[str, Any] = metadata  # type: ignore[assignment]
    if run_meta:
        extra = {
            k: v
            for k, v in run_meta.items()
            if not k.startswith("__") and isinstance(v, (str, int, float, bool))
        }
        merged = {**extra, **metadata}
    stored: Any = {}  # a loop: a comprehension's function costs more than these few keys
    for k, v in merged.items():
        stored[k] = v.replace("\x00", "") if isinstance(v, str) else v
    return stored  # type: ignore[no-any-return]


EXCLUDED_METADATA_KEYS: frozenset[str] = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "langgraph_step",
        "langgraph_node",
        "langgraph_triggers",
        "langgraph_path",
        "langgraph_checkpoint_ns",
    }
)
"""Config keys LangGraph never copies into checkpoint metadata. pregelkit
copies none of ``configurable`` (it often carries credentials), only
``config["metadata"]``; the set is here for code that filters with it."""


def get_serializable_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """``get_checkpoint_metadata`` without ``writes``, which savers do not store."""
    full = get_checkpoint_metadata(config, metadata)
    full.pop("writes", None)
    return full


def thread_coordinates(config: RunnableConfig) -> tuple[str, str, str | None]:
    """(thread id, checkpoint namespace, checkpoint id) of a config, with a clear
    error when the thread id is missing."""
    conf = config.get(CONF)
    if not conf or conf.get(CONFIG_KEY_THREAD_ID) is None:
        raise ValueError(
            "a checkpointer needs a thread id: pass "
            "config={'configurable': {'thread_id': '...'}} to invoke/stream/get_state"
        )
    return (
        str(conf[CONFIG_KEY_THREAD_ID]),
        conf.get(CONFIG_KEY_CHECKPOINT_NS, ""),
        conf.get(CONFIG_KEY_CHECKPOINT_ID),
    )


def prune_targets(thread_ids: Sequence[str], strategy: str) -> list[str]:
    """The threads a ``prune`` call names, checked before anything is deleted.

    A lone string is refused rather than read as a sequence: ``prune("job-1")``
    would otherwise prune the threads ``"j"``, ``"o"``, ``"b"``, ...
    """
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"prune() strategy must be 'keep_latest' or 'delete', got {strategy!r}")
    if isinstance(thread_ids, (str, bytes)):
        raise TypeError(
            f"prune() takes a list of thread ids, got the string {thread_ids!r}: "
            f"pass [{thread_ids!r}]"
        )
    targets = list(thread_ids)
    for thread_id in targets:
        if not isinstance(thread_id, str):
            raise TypeError(
                f"prune() thread ids are strings, got {type(thread_id).__name__} {thread_id!r}"
            )
    return targets


def no_run_queue(saver: Any) -> TypeError:
    return TypeError(
        f"{type(saver).__name__} keeps no run queue: submit runs and serve them with "
        "workers on a SqliteSaver or PostgresSaver (a database every worker can reach)"
    )


class BaseCheckpointSaver(Generic[V]):
    """Stores checkpoints and pending writes, per thread and checkpoint namespace.

    Implement ``get_tuple``, ``list``, ``put``, ``put_writes`` and
    ``delete_thread``; the async twins default to running the sync method in a
    worker thread, so a sync-only saver works with ``ainvoke`` too.
    """

    serde: SerializerProtocol

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        if serde is None:
            from pregelkit.checkpoint.serde.jsonplus import JsonPlusSerializer

            serde = JsonPlusSerializer()
        self.serde = serde
        self._thread_locks: dict[str, _ThreadLock] = {}
        """The lock of each thread a run holds or waits for (and no other: a
        process that runs a million threads keeps no million locks)."""
        self._thread_locks_guard = threading.Lock()

    @property
    def config_specs(self) -> list[Any]:
        return []

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...] | type]) -> Self:
        """A shallow copy (``copy.copy``: same connection) whose serializer
        also loads the classes ``extra_allowlist`` names, as
        ``(module parts..., class name)`` tuples or classes; this saver itself
        when they add nothing. A serializer without ``with_msgpack_allowlist``
        is kept as it is, with a warning: it decides what it loads."""
        derive = getattr(self.serde, "with_msgpack_allowlist", None)
        if derive is None:
            warnings.warn(
                f"{type(self.serde).__name__} has no with_msgpack_allowlist(), so "
                f"{type(self).__name__}.with_allowlist() cannot extend what it loads; "
                "register the classes with pregelkit.checkpoint.serde.allow_types() instead",
                stacklevel=2,
            )
            return self
        serde = derive(extra_allowlist)
        if serde is self.serde:
            return self
        import copy  # loaded by the few savers that derive a copy

        clone = copy.copy(self)
        clone.serde = serde
        return clone

    # reading
    def get(self, config: RunnableConfig) -> Checkpoint | None:
        if value := self.get_tuple(config):
            return value.checkpoint
        return None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its ``checkpoint_id``, else the latest)."""
        raise NotImplementedError

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, optionally of one thread/namespace, matching
        ``filter`` on metadata, older than ``before``, at most ``limit``."""
        raise NotImplementedError

    # writing
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint. Only channels in ``new_versions`` changed since the
        parent; ``checkpoint["channel_values"]`` holds at least those."""
        raise NotImplementedError

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
        *,
        attempts: Sequence[AttemptRow] = (),
    ) -> None:
        """Store a task's writes against the checkpoint in ``config``; a saver
        that records attempts (``records_attempts``) stores ``attempts`` in the
        same transaction (the loop passes them to no other saver)."""
        raise NotImplementedError

    def delete_thread(self, thread_id: str) -> None:
        raise NotImplementedError

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another."""
        raise NotImplementedError

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop old checkpoints of threads: keep only each namespace's latest, or all."""
        raise NotImplementedError

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """For each of ``channels``, the writes made to it on the way to the
        checkpoint ``config`` names, back to the nearest ancestor storing a
        value for it (``seed``); see ``DeltaChannel``. Walks ``get_tuple``
        along ``parent_config``, so a fork sees only its own ancestors."""
        steps = _delta.walk(config, channels)
        try:
            target = next(steps)
            while True:
                target = steps.send(self.get_tuple(target))
        except StopIteration as done:
            history: dict[str, DeltaChannelHistory] = done.value
            return history

    def get_next_version(self, current: V | None, channel: None = None) -> V:
        """The version after ``current``. Versions sort; a random suffix keeps a
        fork's new versions from colliding with the original branch's blobs."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        # LangGraph's form, f"{current_v + 1:032}.{random.random():016}": the
        # number, then "0." and 16 random digits, as a random float's shortest
        # text mostly is; made without format specs, parsed again on each call,
        # or a float's text (~2 us each: a run makes two versions)
        return f"{str(current_v + 1).zfill(32)}.0.{random_digits()}"  # type: ignore[return-value]

    # run control: one mark per thread, read by the run that owns the thread
    def get_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        """What a run started outside the queue reads as it starts, in one
        read: the thread's mark, and ``"queued"`` or ``"running"`` while a
        queued run of it (``submit``) waits for or has a worker (a run started
        then would race it). This default keeps no queue."""
        return self.get_thread_control(thread_id), None

    def get_thread_control(self, thread_id: str) -> str | None:
        """The thread's run-control mark: ``"cancelled"`` (``cancel()`` asked its
        run to stop; no run starts until ``uncancel()``), ``"drained"`` (its last
        run stopped at a drain) or ``None``. A run polls this while it runs, so
        it must be cheap: one row read by key."""
        raise NotImplementedError(
            f"{type(self).__name__} keeps no run-control marks, so its threads cannot be "
            "cancelled from outside the run: implement get_thread_control and "
            "put_thread_control (the memory, SQLite and PostgreSQL savers do)"
        )

    def put_thread_control(self, thread_id: str, mark: str | None) -> None:
        """Set the thread's run-control mark, or clear it with ``None``.
        ``delete_thread`` clears it too."""
        raise NotImplementedError(
            f"{type(self).__name__} keeps no run-control marks, so its threads cannot be "
            "cancelled from outside the run: implement get_thread_control and "
            "put_thread_control (the memory, SQLite and PostgreSQL savers do)"
        )

    # attempts, for timelines
    def put_attempts(self, thread_id: str, records: Sequence[AttemptRow]) -> None:
        """Store attempt records of ``thread_id`` (see ``checkpoint.attempts``),
        each a row: a tuple of ``AttemptRecord``'s fields in order
        (``attempt_row(record)``), which is what the SQL savers insert.
        A record is keyed by (namespace, run, task id, attempt): a finished
        record replaces the start record under its key, a start record never
        replaces a finished one. Deleted with the thread; ``prune`` keeps those
        of the thread's latest run."""
        raise NotImplementedError(_no_attempts(self))

    def list_attempts(self, thread_id: str) -> AttemptList:
        """Every attempt record of ``thread_id``, in start order."""
        raise NotImplementedError(_no_attempts(self))

    @property
    def records_attempts(self) -> bool:
        """Whether this saver keeps attempt records (a run records them only then)."""
        cls = type(self)
        return (
            cls.put_attempts is not BaseCheckpointSaver.put_attempts
            or cls.aput_attempts is not BaseCheckpointSaver.aput_attempts
        )

    @property
    def has_thread_control(self) -> bool:
        """Whether this saver keeps run-control marks (a run polls only then)."""
        cls = type(self)
        return (
            cls.get_thread_control is not BaseCheckpointSaver.get_thread_control
            or cls.aget_thread_control is not BaseCheckpointSaver.aget_thread_control
        )

    def grouped(self) -> AbstractContextManager[None]:
        """Make the saver calls of this thread inside the block one
        transaction, where the store has them: all saved at the end of the
        block, or none (an error leaves the block). The engine groups the
        saves it has queued when it makes them (and, if the group fails, makes
        them again one by one); this default groups nothing. Inside a block,
        make only this saver's calls: another store's call waiting there
        (a cache in the same SQLite file, an async call that hands off to a
        thread) holds the saver's transaction and lock while it waits."""
        return nullcontext()

    def agrouped(self) -> AbstractAsyncContextManager[None]:
        """The async twin of ``grouped``; this default groups nothing."""
        return _NO_GROUP

    # one run per thread
    def run_queue(
        self, make: Callable[[Dialect], RunPlan[T]], op: str, *, single: bool = False
    ) -> T:
        """Run a plan of the durable run queue (``wf.submit``, workers) in one
        transaction of this saver's database; ``single``: the plan runs one
        statement, which is a transaction of its own (no BEGIN and COMMIT
        around it). Only savers of a database every worker process can reach
        keep a queue."""
        raise no_run_queue(self)

    @property
    def has_run_queue(self) -> bool:
        return type(self).run_queue is not BaseCheckpointSaver.run_queue

    async def arun_queue(
        self, make: Callable[[Dialect], RunPlan[T]], op: str, *, single: bool = False
    ) -> T:
        return await self._in_thread(self.run_queue, make, op, single=single)

    def lock_thread(self, thread_id: str, *, wait: bool = False) -> AbstractContextManager[None]:
        """Hold ``thread_id`` for one run; a second run of it fails fast
        (``ThreadBusyError``) or waits. This default covers one process;
        savers shared between processes hold a lock in their store."""
        return _held(self, thread_id, wait)

    def alock_thread(
        self, thread_id: str, *, wait: bool = False
    ) -> AbstractAsyncContextManager[None]:
        return _async_held(self, thread_id, wait)

    def open_thread(
        self, thread_id: str, config: RunnableConfig, *, lock: bool, wait: bool, gate: Gate
    ) -> OpenedThread:
        """A run's start in one call, which a saver of a remote database may
        make in one round trip (``checkpoint.base._open``): take the thread's
        lock (``lock``; ``wait`` as ``lock_thread``), read its ``gate``, and
        perhaps the checkpoint ``config`` names. This default takes the lock
        and reads the gate, one call each, and leaves the checkpoint to
        ``get_tuple``."""
        return open_one_by_one(self, thread_id, lock, wait, gate)

    async def aopen_thread(
        self, thread_id: str, config: RunnableConfig, *, lock: bool, wait: bool, gate: Gate
    ) -> OpenedThread:
        """The async twin of ``open_thread`` (its lock is an async context manager)."""
        return await aopen_one_by_one(self, thread_id, lock, wait, gate)

    # async twins
    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        if value := await self.aget_tuple(config):
            return value.checkpoint
        return None

    async def _in_thread(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a sync method off the event loop: the async twins below all go
        through here, so a saver changes where they run in one place."""
        return await to_thread(fn, *args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._in_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await self._in_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._in_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
        *,
        attempts: Sequence[AttemptRow] = (),
    ) -> None:
        if attempts:
            await self._in_thread(
                self.put_writes, config, writes, task_id, task_path, attempts=attempts
            )
        else:
            await self._in_thread(self.put_writes, config, writes, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``get_delta_channel_history`` through ``aget_tuple``."""
        steps = _delta.walk(config, channels)
        try:
            target = next(steps)
            while True:
                target = steps.send(await self.aget_tuple(target))
        except StopIteration as done:
            history: dict[str, DeltaChannelHistory] = done.value
            return history

    async def adelete_thread(self, thread_id: str) -> None:
        await self._in_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._in_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        await self._in_thread(self.prune, thread_ids, strategy=strategy)

    async def aget_thread_control(self, thread_id: str) -> str | None:
        return await self._in_thread(self.get_thread_control, thread_id)

    async def aget_thread_gate(self, thread_id: str) -> tuple[str | None, str | None]:
        if type(self).get_thread_gate is not BaseCheckpointSaver.get_thread_gate:
            return await self._in_thread(self.get_thread_gate, thread_id)
        return await self.aget_thread_control(thread_id), None

    async def aput_thread_control(self, thread_id: str, mark: str | None) -> None:
        await self._in_thread(self.put_thread_control, thread_id, mark)

    async def aput_attempts(self, thread_id: str, records: Sequence[AttemptRow]) -> None:
        await self._in_thread(self.put_attempts, thread_id, records)

    async def alist_attempts(self, thread_id: str) -> AttemptList:
        return await self._in_thread(self.list_attempts, thread_id)


def _no_attempts(saver: BaseCheckpointSaver[Any]) -> str:
    return (
        f"{type(saver).__name__} keeps no attempt records, so its threads have no "
        "timeline: implement put_attempts and list_attempts (the memory, SQLite and "
        "PostgreSQL savers do)"
    )


class _ThreadLock:
    """A thread's in-process lock and how many runs hold or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class _held(AbstractContextManager[None]):
    """``lock_thread``'s lock: the thread's entry in ``_thread_locks`` lives
    while a run holds or waits for it, and goes with the last one."""

    __slots__ = ("entry", "saver", "thread_id", "wait")

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_id: str, wait: bool) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.wait = wait

    def __enter__(self) -> None:
        saver = self.saver
        with saver._thread_locks_guard:
            entry = saver._thread_locks.get(self.thread_id)
            if entry is None:
                entry = saver._thread_locks[self.thread_id] = _ThreadLock()
            entry.users += 1
        self.entry = entry
        if not entry.lock.acquire(blocking=self.wait):
            self._leave()
            raise ThreadBusyError(self.thread_id)

    def __exit__(self, *exc: object) -> None:
        self.entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        entry, locks = self.entry, self.saver._thread_locks
        with self.saver._thread_locks_guard:
            entry.users -= 1
            if not entry.users and locks.get(self.thread_id) is entry:
                del locks[self.thread_id]


class _async_held(AbstractAsyncContextManager[None]):
    """``lock_thread``'s lock, awaited while another run holds it (``wait``).
    A class rather than an ``@asynccontextmanager``: every async run takes
    one, and an async generator costs a run several microseconds more."""

    __slots__ = ("held", "wait")

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_id: str, wait: bool) -> None:
        self.held = saver.lock_thread(thread_id, wait=False)
        self.wait = wait

    async def __aenter__(self) -> None:
        while True:
            try:
                self.held.__enter__()
                return
            except ThreadBusyError:
                if not self.wait:
                    raise
                import asyncio

                await asyncio.sleep(0.01)

    async def __aexit__(self, *exc: object) -> None:
        self.held.__exit__(None, None, None)


class _NoGroup(AbstractAsyncContextManager[None]):
    """``agrouped`` of a saver that groups nothing (see ``grouped``)."""

    __slots__ = ()

    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_GROUP = _NoGroup()
