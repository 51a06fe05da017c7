"""Executors that run task bodies somewhere other than the driver's threads.

``RemoteExecutor`` is what ``executor=`` takes; each implementation lives in
a module of its own that imports its cluster library when that module is
imported, never before: ``import pregelkit`` loads none of them.
"""

from pregelkit.pregel._exec.remote import RemoteExecutor

__all__ = ["RemoteExecutor"]
