"""pregelkit: durable, resumable workflows from plain Python functions."""

__version__ = "0.1.0"

# typing is not imported: `import pregelkit` stays free (mypy and
# import-linter read this name as typing.TYPE_CHECKING)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pregelkit.worker import AsyncWorker, Worker

__all__ = ["AsyncWorker", "Worker", "__version__"]

_LAZY = {"Worker": "pregelkit.worker", "AsyncWorker": "pregelkit.worker"}


def __getattr__(name: str) -> object:
    """``pregelkit.Worker`` and ``pregelkit.AsyncWorker``, imported on first
    use: ``import pregelkit`` stays cheap for code that only runs workflows."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pregelkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
