"""Caches for task results."""
