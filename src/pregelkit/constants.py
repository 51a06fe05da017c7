"""Public constants: the names of a graph's entry and exit."""

from pregelkit._internal._constants import END, START

TAG_HIDDEN = "langsmith:hidden"

__all__ = ["END", "START", "TAG_HIDDEN"]
