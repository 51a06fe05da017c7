"""Deprecated home of the types now in ``pregelkit.types`` (LangGraph moved
them in 1.0); importing it warns."""

from warnings import warn

from pregelkit.types import (
    All,
    CachePolicy,
    PregelExecutableTask,
    PregelTask,
    RetryPolicy,
    StateSnapshot,
    StateUpdate,
    StreamMode,
    StreamWriter,
    default_retry_on,
)
from pregelkit.warnings import LangGraphDeprecatedSinceV10

__all__ = [
    "All",
    "CachePolicy",
    "PregelExecutableTask",
    "PregelTask",
    "RetryPolicy",
    "StateSnapshot",
    "StateUpdate",
    "StreamMode",
    "StreamWriter",
    "default_retry_on",
]

warn(
    "Importing from pregelkit.pregel.types is deprecated. "
    "Please use 'from pregelkit.types import ...' instead.",
    LangGraphDeprecatedSinceV10,
    stacklevel=2,
)
