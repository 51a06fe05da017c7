"""Checkpoints and the savers that store them."""

from typing import TYPE_CHECKING

from pregelkit._internal._lazy import lazy_attributes

if TYPE_CHECKING:
    from pregelkit.checkpoint._faults import StorageRetry

__all__ = ["StorageRetry"]

# Loaded with the first saver that retries, not with every `import pregelkit.checkpoint.*`.
__getattr__ = lazy_attributes(__name__, {"StorageRetry": "._faults"})
