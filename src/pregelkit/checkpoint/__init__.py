"""Checkpoints and the savers that store them."""
