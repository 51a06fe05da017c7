"""Checkpoints and the savers that store them."""

from pregelkit.checkpoint._faults import StorageRetry

__all__ = ["StorageRetry"]
