"""pregelkit: durable, resumable workflows from plain Python functions."""

from pregelkit._internal._lazy import lazy_attributes

__version__ = "0.1.0"

# typing is not imported: `import pregelkit` stays free (mypy and
# import-linter read this name as typing.TYPE_CHECKING)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pregelkit.worker import AsyncWorker, Worker

__all__ = ["AsyncWorker", "Worker", "__version__"]

# imported on first use: `import pregelkit` stays cheap for code that only
# runs workflows
__getattr__ = lazy_attributes(
    __name__, {"Worker": "pregelkit.worker", "AsyncWorker": "pregelkit.worker"}
)
