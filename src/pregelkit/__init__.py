"""pregelkit: durable, resumable workflows from plain Python functions."""

__version__ = "0.1.0"
