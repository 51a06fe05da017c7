"""What the SQL savers store in a row, and how a row becomes a checkpoint again.

SqliteSaver, PostgresSaver and their async twins keep the same three tables
(checkpoints, blobs, writes); this module is the one place that decides what
goes into each row and how a row that cannot be loaded is reported, so the
four savers cannot drift apart. Only SQL text differs between the backends.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pregelkit._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    WRITES_IDX_MAP,
)
from pregelkit.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    RunnableConfig,
    get_checkpoint_metadata,
    thread_coordinates,
)
from pregelkit.checkpoint.base._unversioned import with_blob_values, without_blob_values
from pregelkit.checkpoint.serde.base import (
    SerdeError,
    SerializerProtocol,
    StoredAt,
    dumps_at,
    loads_at,
)
from pregelkit.errors import CheckpointCorruptError

EMPTY_TAG = "empty"
"""Type tag of a blob row for a channel that has a version but no value: such a
row is never handed to the serializer."""


ON_CHECKPOINT_CONFLICT = """
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = excluded.parent_checkpoint_id,
    type = excluded.type,
    checkpoint = excluded.checkpoint,
    metadata_type = excluded.metadata_type,
    metadata = excluded.metadata,
    metadata_json = excluded.metadata_json,
    channel_versions = excluded.channel_versions
"""
"""How a checkpoint row meets one stored under its id, on both databases:
it replaces it (a ``put`` again, or a copied thread's row)."""

ON_WRITE_CONFLICT = """
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = excluded.channel,
    type = excluded.type,
    value = excluded.value,
    task_path = excluded.task_path
"""
"""How a pending write meets one stored under its key, on both databases:
its position (``seq``) stays; whether it is replaced, the statement says."""


class CheckpointRow(NamedTuple):
    """Parameters of an insert into the checkpoints table, in column order."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    metadata_json: str
    channel_versions: str


class BlobRow(NamedTuple):
    """Parameters of an insert into the blobs table, in column order."""

    thread_id: str
    checkpoint_ns: str
    channel: str
    version: str
    type: str
    blob: bytes | None


class WriteRow(NamedTuple):
    """Parameters of an insert into the writes table, in column order."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    type: str
    value: bytes
    task_path: str


class StoredCheckpoint(NamedTuple):
    """A checkpoint as read back: its row plus its blobs and its writes (in
    insertion order), still serialized."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    blobs: Sequence[tuple[str, str, bytes | None]]
    """(channel, type, blob)"""
    writes: Sequence[tuple[str, str, str, bytes]]
    """(task id, channel, type, value)"""


class ListScope(NamedTuple):
    """Which checkpoints ``list`` reads; ``None`` means no restriction."""

    thread_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None
    before_id: str | None


def version_key(version: Any) -> str:
    """Blob rows are keyed by the text of a version: versions may be int, float
    or str, and one text column keeps lookups and joins simple."""
    return str(version)


def encode_checkpoint(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> tuple[CheckpointRow, list[BlobRow]]:
    """The rows ``put`` stores. Values live in blob rows, one per channel and
    version, and only channels in ``new_versions`` get one: an unchanged
    channel keeps pointing at the blob an older checkpoint wrote."""
    thread_id, checkpoint_ns, parent_id = thread_coordinates(config)
    values = checkpoint["channel_values"]
    blobs: list[BlobRow] = []
    for channel, version in new_versions.items():
        key = version_key(version)
        if channel in values:
            at = StoredAt(thread_id, checkpoint_ns, "blob", (channel, key))
            type_, blob = _dump(serde, values[channel], "the value of channel", channel, at)
            blobs.append(BlobRow(thread_id, checkpoint_ns, channel, key, type_, blob))
        else:
            blobs.append(BlobRow(thread_id, checkpoint_ns, channel, key, EMPTY_TAG, None))
    checkpoint_id = checkpoint["id"]
    bare = without_blob_values(checkpoint)
    at = StoredAt(thread_id, checkpoint_ns, "checkpoint", (checkpoint_id,))
    type_, data = _dump(serde, bare, "checkpoint", checkpoint_id, at)
    full_metadata = get_checkpoint_metadata(config, metadata)
    at = StoredAt(thread_id, checkpoint_ns, "metadata", (checkpoint_id,))
    metadata_type, metadata_data = _dump(serde, full_metadata, "the checkpoint metadata", None, at)
    row = CheckpointRow(
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent_id,
        type_,
        data,
        metadata_type,
        metadata_data,
        _canonical_json(json_subset(full_metadata)),
        _canonical_json({k: version_key(v) for k, v in checkpoint["channel_versions"].items()}),
    )
    return row, blobs


def json_subset(metadata: Mapping[Any, Any]) -> dict[str, Any]:
    """The keys of ``metadata`` whose key and value ``is_json_value`` accepts,
    as the metadata's JSON copy holds them. Strings, ints, bools and ``None``
    are decided here, without a call each: every checkpoint's metadata is
    mostly those."""
    subset = {}
    for k, v in metadata.items():
        if type(k) is not str or "\x00" in k:
            continue
        kind = type(v)
        if kind is str:
            if "\x00" in v:
                continue
        elif not (kind is int or kind is bool or v is None or is_json_value(v)):
            continue
        subset[k] = v
    return subset


def encode_writes(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[WriteRow]:
    """The rows ``put_writes`` stores, in the order given. A special channel
    takes its fixed negative slot, so a later write to it replaces the earlier
    one; every other write takes its position, and a repeated call keeps the
    first value (a retried task must not change what was recorded)."""
    thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
    if checkpoint_id is None:
        raise ValueError(
            "put_writes needs the checkpoint the writes belong to: pass a config with "
            "config['configurable']['checkpoint_id'] set (the config returned by put)"
        )
    rows = []
    dumps = serde.dumps_typed
    bound = getattr(serde, "dumps_typed_at", None)
    for idx, (channel, value) in enumerate(writes):
        try:
            if bound is None:
                type_, data = dumps(value)
            else:
                type_, data = bound(value, write_location(config, task_id, channel))
        except Exception:  # the message is built only when it is needed
            type_, data = _dump(
                serde,
                value,
                f"the write to {channel!r} of task {task_id!r}",
                None,
                write_location(config, task_id, channel),
            )
        rows.append(
            WriteRow(
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                type_,
                data,
                task_path,
            )
        )
    return rows


def write_location(config: RunnableConfig, task_id: str, channel: str) -> StoredAt:
    """Where a pending write lives: its checkpoint, task and channel."""
    thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
    return StoredAt(thread_id, checkpoint_ns, "write", (str(checkpoint_id), task_id, channel))


# Copying a thread whose values are sealed to their place (EncryptedSerializer)
# seals each copied value again for the target thread. "?" placeholders; the
# PostgreSQL savers swap them for "%s".
RESEAL_SELECTS = (
    "SELECT checkpoint_ns, checkpoint_id, type, checkpoint, metadata_type, metadata "
    "FROM pregelkit_checkpoints WHERE thread_id = ?",
    "SELECT checkpoint_ns, channel, version, type, blob FROM pregelkit_blobs "
    f"WHERE thread_id = ? AND type <> '{EMPTY_TAG}'",
    "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value "
    "FROM pregelkit_writes WHERE thread_id = ?",
)
RESEAL_UPDATES = (
    "UPDATE pregelkit_checkpoints SET type = ?, checkpoint = ?, metadata_type = ?, metadata = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
    "UPDATE pregelkit_blobs SET type = ?, blob = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?",
    "UPDATE pregelkit_writes SET type = ?, value = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?",
)


def reseal_params(
    reseal: Any, source: str, target: str, rows: Sequence[Sequence[Sequence[Any]]]
) -> list[list[tuple[Any, ...]]]:
    """Parameters of ``RESEAL_UPDATES`` for the rows ``RESEAL_SELECTS`` read
    from ``source``: each value sealed again for ``target``."""
    checkpoints, blobs, writes = rows

    def move(ns: str, kind: str, key: tuple[str, ...], type_: str, data: Any) -> tuple[str, bytes]:
        sealed: tuple[str, bytes] = reseal(
            (type_, bytes(data)), StoredAt(source, ns, kind, key), StoredAt(target, ns, kind, key)
        )
        return sealed

    return [
        [
            (
                *move(ns, "checkpoint", (cid,), type_, data),
                *move(ns, "metadata", (cid,), mtype, mdata),
                target,
                ns,
                cid,
            )
            for ns, cid, type_, data, mtype, mdata in checkpoints
        ],
        [
            (*move(ns, "blob", (channel, version), type_, blob), target, ns, channel, version)
            for ns, channel, version, type_, blob in blobs
        ],
        [
            (
                *move(ns, "write", (cid, task_id, channel), type_, value),
                target,
                ns,
                cid,
                task_id,
                idx,
            )
            for ns, cid, task_id, idx, channel, type_, value in writes
        ],
    ]


def list_scope(config: RunnableConfig | None, before: RunnableConfig | None) -> ListScope:
    """A missing ``checkpoint_ns`` lists every namespace of the thread; a
    ``None`` config lists every thread."""
    before_id = before.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID) if before else None
    if config is None:
        return ListScope(None, None, None, before_id)
    thread_id, _, checkpoint_id = thread_coordinates(config)
    return ListScope(
        thread_id, config[CONF].get(CONFIG_KEY_CHECKPOINT_NS), checkpoint_id, before_id
    )


def check_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata filters compare top-level keys for equality in SQL, against the
    JSON copy of the metadata, so only JSON values can be compared."""
    if not filter:
        return {}
    for key, value in filter.items():
        if not (is_json_value(key) and is_json_value(value)):
            raise ValueError(
                f"cannot filter checkpoints on metadata key {key!r} = {value!r}: filter values "
                "must be JSON values (str, int, float, bool, None, and lists and dicts of them)"
            )
    return dict(filter)


def filter_json(value: Any) -> str:
    """A filter value in the same canonical JSON text the metadata copy uses."""
    return _canonical_json(value)


def is_json_value(value: Any) -> bool:
    """Whether ``value`` survives JSON in both SQLite and PostgreSQL unchanged:
    finite numbers only, and no NUL characters, which ``jsonb`` rejects."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, (list, tuple)):
        return all(is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and is_json_value(k) and is_json_value(v) for k, v in value.items()
        )
    return False


def decode_checkpoint(serde: SerializerProtocol, stored: StoredCheckpoint) -> CheckpointTuple:
    """Load a stored checkpoint. Anything the serializer refuses or cannot read
    becomes a ``CheckpointCorruptError`` that names the row; nothing is changed,
    so the row can be inspected or deleted."""
    where = {
        "thread_id": stored.thread_id,
        "checkpoint_ns": stored.checkpoint_ns,
        "checkpoint_id": stored.checkpoint_id,
    }
    key = (stored.checkpoint_id,)
    place = (stored.thread_id, stored.checkpoint_ns)
    bare = _load(
        serde,
        stored.type,
        stored.checkpoint,
        "the checkpoint",
        where,
        StoredAt(*place, "checkpoint", key),
    )
    if not isinstance(bare, dict) or not isinstance(bare.get("channel_versions"), dict):
        raise CheckpointCorruptError(
            f"the stored checkpoint is a {type(bare).__name__}, not a checkpoint dict with "
            "channel_versions. Nothing was changed; inspect or delete this checkpoint",
            **where,
        )
    metadata = _load(
        serde,
        stored.metadata_type,
        stored.metadata,
        "the metadata",
        where,
        StoredAt(*place, "metadata", key),
    )
    if not isinstance(metadata, dict):
        raise CheckpointCorruptError(
            f"the stored metadata is a {type(metadata).__name__}, not a dict. Nothing was "
            "changed; inspect or delete this checkpoint",
            **where,
        )
    versions = bare["channel_versions"]
    values = {
        channel: _load(
            serde,
            type_,
            blob,
            "the channel value",
            {**where, "channel": channel},
            StoredAt(*place, "blob", (channel, version_key(versions.get(channel)))),
        )
        for channel, type_, blob in stored.blobs
        if type_ != EMPTY_TAG
    }
    pending: list[PendingWrite] = [
        (
            task_id,
            channel,
            _load(
                serde,
                type_,
                value,
                "the pending write",
                {**where, "channel": channel, "task_id": task_id},
                StoredAt(*place, "write", (stored.checkpoint_id, task_id, channel)),
            ),
        )
        for task_id, channel, type_, value in stored.writes
    ]
    checkpoint = with_blob_values(bare, values)
    return CheckpointTuple(
        config=checkpoint_config(stored.thread_id, stored.checkpoint_ns, stored.checkpoint_id),
        checkpoint=checkpoint,
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=(
            checkpoint_config(stored.thread_id, stored.checkpoint_ns, stored.parent_checkpoint_id)
            if stored.parent_checkpoint_id
            else None
        ),
        pending_writes=pending,
    )


def checkpoint_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        CONF: {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: checkpoint_ns,
            CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
        }
    }


def _dump(
    serde: SerializerProtocol, value: Any, what: str, name: str | None, at: StoredAt
) -> tuple[str, bytes]:
    """``value`` serialized; a failure says it could not store ``what``
    (followed by ``name``, quoted, if given): the text is built only then."""
    try:
        return dumps_at(serde, value, at)
    except Exception as err:
        if name is not None:
            what = f"{what} {name!r}"
        raise SerdeError(
            f"cannot store {what}: {type(err).__name__}: {err}. Store a value the serializer "
            "supports, or pass a saver a serializer that supports this type"
        ) from err


def _load(
    serde: SerializerProtocol,
    type_: str,
    data: bytes | None,
    what: str,
    where: dict[str, str],
    at: StoredAt,
) -> Any:
    if data is None:
        raise CheckpointCorruptError(
            f"{what} has no stored bytes (NULL) although its type is {type_!r}. Nothing was "
            "changed; inspect or delete this row",
            **where,
        )
    try:
        return loads_at(serde, (type_, bytes(data)), at)
    except Exception as err:
        raise CheckpointCorruptError(
            f"{what} (type tag {type_!r}, {len(data)} bytes) could not be loaded: "
            f"{type(err).__name__}: {err}. Nothing was changed; inspect or delete this row, "
            "or, if the data is trusted, allow its type in the serializer",
            **where,
        ) from err


def _canonical_encoder() -> Callable[[Any], str]:
    """Sorted keys, no spaces, text as it is. ``JSONEncoder.encode`` builds a
    C encoder and a closure at every call, half the time of encoding a
    checkpoint's small JSON columns (two per checkpoint); this one is built
    once. Every value it sees was checked by ``is_json_value``, which ends
    (no cycles), so it does not look for cycles."""
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed
    if make is None:  # a Python without the _json accelerator
        return encoder.encode
    chunks = make(
        None, encoder.default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )
    return lambda value: "".join(chunks(value, 0))


_canonical_json = _canonical_encoder()
