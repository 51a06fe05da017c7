"""Serialization of checkpoints, writes and cached values."""
