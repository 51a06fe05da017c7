"""Which modules and classes loading may rebuild: a process-wide registry.

Kept apart from the serializer so that declaring a workflow (``@task``,
``@entrypoint`` register their function's module) does not import the
serializer and the standard-library modules its allowlist names.
"""

from __future__ import annotations

import threading

__all__ = ["allow_modules", "allow_types"]


class _Registry:
    """Modules and types every serializer instance may load, shared process-wide.

    Copy-on-write: loaders read the current set and dict without locking;
    writers build new ones and swap them in under a lock.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.modules: frozenset[str] = frozenset()
        self.types: dict[tuple[str, str], type] = {}


_registry = _Registry()


def allow_modules(*names: str) -> None:
    """Let every serializer load classes defined in these modules (and their
    submodules).

    The functional-API decorators call this with the module of each decorated
    function, so values whose classes live beside the user's workflow load
    without ceremony. Registering a module trusts its classes' constructors.
    """
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"allow_modules() takes module names such as 'myapp.models', got {name!r}"
            )
    with _registry.lock:
        _registry.modules = _registry.modules | frozenset(names)


def allow_types(*types: type) -> None:
    """Let every serializer load instances of exactly these classes.

    Narrower than ``allow_modules``: use it when only a few classes of a large
    module are stored in checkpoints.
    """
    for cls in types:
        if not isinstance(cls, type):
            raise TypeError(
                f"allow_types() takes classes, got {cls!r} ({type(cls).__name__}); "
                "to allow a whole module use allow_modules('module.name')"
            )
    with _registry.lock:
        updated = dict(_registry.types)
        updated.update({(cls.__module__, cls.__qualname__): cls for cls in types})
        _registry.types = updated
