"""The runtime a node or task can ask for by naming a ``runtime`` parameter,
or get with ``get_runtime()``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

ContextT = TypeVar("ContextT")

__all__ = ["DEFAULT_RUNTIME", "Runtime", "get_runtime"]


def _noop_writer(_: Any) -> None:
    return None


@dataclass(frozen=True)
class Runtime(Generic[ContextT]):
    """What the run offers a task: the user's context, the store, the stream
    writer, and the thread's previous return value."""

    context: ContextT | None = None
    store: Any = None
    stream_writer: Any = field(default=_noop_writer)
    previous: Any = None

    def merge(self, other: Runtime[ContextT]) -> Runtime[ContextT]:
        """``other``, with this runtime's values where ``other`` has none."""
        return Runtime(
            context=other.context or self.context,
            store=other.store or self.store,
            stream_writer=(
                other.stream_writer
                if other.stream_writer is not _noop_writer
                else self.stream_writer
            ),
            previous=self.previous if other.previous is None else other.previous,
        )

    def override(self, **overrides: Any) -> Runtime[ContextT]:
        """A copy with the given fields replaced (unknown names are a ``TypeError``)."""
        return replace(self, **overrides)


DEFAULT_RUNTIME: Runtime[Any] = Runtime()
"""The runtime of nothing: no context, no store, a writer that drops chunks."""


def get_runtime(context_schema: type[ContextT] | None = None) -> Runtime[ContextT]:
    """The runtime of the running task (``context_schema`` only types the
    result); an error outside a run."""
    from pregelkit._internal._scope import require_scope

    return runtime_for(require_scope("get_runtime()"))


def runtime_for(scope: Any) -> Runtime[Any]:
    """The runtime of the task running in ``scope`` (its ``TaskScope``)."""
    return Runtime(
        context=scope.config.get("context"),
        store=scope.run.store,
        stream_writer=scope.stream_writer,
        previous=scope.run.previous,
    )
