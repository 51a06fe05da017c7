"""Package attributes imported on first use.

A package ``__init__`` that imports every submodule makes each user pay for
all of them; with ``lazy_attributes`` the names stay importable from the
package (``from pregelkit.channels import Topic``) while only the
submodules actually used are loaded.

It imports nothing at run time, not even ``typing``, so that ``import
pregelkit`` (whose ``Worker`` it loads on demand) stays free.
"""

from __future__ import annotations

# mypy and import-linter read this name as typing.TYPE_CHECKING
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where`` maps each name to
    the module that defines it (``.name``: a submodule of ``package``)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib
        import sys

        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
