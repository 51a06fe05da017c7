"""Public constants: the names of a graph's entry and exit.

``Send`` and ``Interrupt`` (now in ``pregelkit.types``) and the engine's own
constants (now private) can still be imported from here, with a deprecation
warning, as in LangGraph 1.x."""

from importlib import import_module
from typing import Any
from warnings import warn

from pregelkit._internal._constants import END, START
from pregelkit.warnings import LangGraphDeprecatedSinceV10

TAG_HIDDEN = "langsmith:hidden"

__all__ = ["END", "START", "TAG_HIDDEN"]


def __getattr__(name: str) -> Any:
    if name in ("Send", "Interrupt"):
        warn(
            f"Importing {name} from pregelkit.constants is deprecated. "
            f"Please use 'from pregelkit.types import {name}' instead.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        return getattr(import_module("pregelkit.types"), name)
    private = import_module("pregelkit._internal._constants")
    if not name.startswith("_") and hasattr(private, name):
        warn(
            f"Importing {name} from pregelkit.constants is deprecated. This constant is now "
            "private and should not be used directly.",
            LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        return getattr(private, name)
    raise AttributeError(f"module 'pregelkit.constants' has no attribute {name!r}")
