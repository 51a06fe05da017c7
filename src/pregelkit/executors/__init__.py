"""Executors that run task bodies somewhere other than the driver's threads.

Each lives in a module of its own that imports its cluster library when the
module is imported, never before: ``import pregelkit`` loads none of them.
"""
