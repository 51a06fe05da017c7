"""``PersistentDict``: a table for ``InMemorySaver(factory=...)`` that is
written to a file when the saver closes."""

from __future__ import annotations

import io
import os
import pickle
from collections import defaultdict
from typing import Any

__all__ = ["PersistentDict"]

# What the saver's tables hold: dicts (some of them defaultdicts of dicts),
# tuples, strings, bytes and numbers. Nothing else loads.
_LOADABLE = {("collections", "defaultdict"), ("builtins", "dict")}


class _TablesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _LOADABLE:
            raise pickle.UnpicklingError(
                f"{module}.{name} is not part of a saver table; the file is not a "
                "PersistentDict of InMemorySaver, or it was tampered with"
            )
        return super().find_class(module, name)


class PersistentDict(defaultdict[Any, Any]):
    """A ``defaultdict`` kept in memory and written to ``filename`` (a pickle,
    replaced atomically) by ``sync()``, ``close()`` or leaving its ``with``
    block; ``load()`` reads the file back, refusing anything but the saver's
    own tables."""

    def __init__(self, *args: Any, filename: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filename = filename

    def sync(self) -> None:
        """Write the table to ``filename``."""
        temp = f"{self.filename}.tmp"
        try:
            with open(temp, "wb") as out:
                pickle.dump(dict(self), out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            if os.path.exists(temp):
                os.remove(temp)
            raise
        os.replace(temp, self.filename)

    def load(self) -> None:
        """Add the entries saved in ``filename`` (none if the file is empty)."""
        with open(self.filename, "rb") as src:
            data = src.read()
        if data:
            self.update(_TablesUnpickler(io.BytesIO(data)).load())

    def close(self) -> None:
        """Write the table and empty it."""
        self.sync()
        self.clear()

    def __enter__(self) -> PersistentDict:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
