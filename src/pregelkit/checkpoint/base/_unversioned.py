"""Channel values a checkpoint holds without a version.

Savers keep channel values in blobs, one per channel and version, written
for the channels in ``new_versions``. A checkpoint built by hand (tests,
migrations, LangGraph's own tooling) may carry a value for a channel it gives
no version at all; no blob can hold that one, so it is kept inside the stored
checkpoint instead of being dropped. The engine always versions its channels,
so its checkpoints pay one dict scan here and store nothing extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import Checkpoint


def without_blob_values(checkpoint: Checkpoint) -> dict[str, Any]:
    """What a saver stores as the checkpoint itself: everything but the
    channel values, except those of channels without a version."""
    bare: dict[str, Any] = dict(checkpoint)
    values = bare.pop("channel_values")
    versions = checkpoint["channel_versions"]
    if values.keys() <= versions.keys():  # the engine's checkpoints: no comprehension made
        return bare
    bare["channel_values"] = {k: v for k, v in values.items() if k not in versions}
    return bare


def with_blob_values(bare: dict[str, Any], values: dict[str, Any]) -> Checkpoint:
    """The checkpoint ``without_blob_values`` kept, with the blobs' values."""
    checkpoint: Any = {**bare, "channel_values": {**bare.get("channel_values", {}), **values}}
    return checkpoint  # type: ignore[no-any-return]
