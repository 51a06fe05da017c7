"""The seam tracers plug into: hooks a run calls around each attempt.

``pregelkit.observe`` registers a factory here when imported (the
functional API imports it); the loop asks the factories once per run and,
when none answers, runs with no hooks at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pregelkit.checkpoint.attempts import Outcome
    from pregelkit.types import PregelExecutableTask

__all__ = ["AttemptHooks", "add_hooks_factory", "run_hooks"]


class AttemptHooks(Protocol):
    """What a tracer (``pregelkit.observe.otel``) hears of one run.

    ``attempt_started`` runs in the thread or asyncio task that runs the
    attempt's body, right before it, and ``attempt_ended`` right after it in
    the same place, so a hook can make its span current for the body."""

    def attempt_started(self, task: PregelExecutableTask, step: int, attempt: int) -> Any: ...

    def attempt_ended(
        self, token: Any, outcome: Outcome, exc: BaseException | None, retrying: bool
    ) -> None: ...

    def attempt_skipped(self, task: PregelExecutableTask, step: int, outcome: Outcome) -> None:
        """A task's result came without running it (``cached``, ``replayed``)."""

    def run_started(self, run_id: str) -> None: ...

    def interrupted(self, interrupts: Sequence[Any]) -> None: ...

    def run_ended(self, exc: BaseException | None) -> None: ...


HooksFactory = Callable[[str, bool], "AttemptHooks | None"]
_factories: list[HooksFactory] = []


def add_hooks_factory(factory: HooksFactory) -> None:
    """Register ``factory(thread_id, nested)``, asked once per run for hooks
    (None: it has nothing to do for this run)."""
    if factory not in _factories:
        _factories.append(factory)


def run_hooks(thread_id: str, nested: bool) -> AttemptHooks | None:
    for factory in _factories:
        hooks = factory(thread_id, nested)
        if hooks is not None:
            return hooks
    return None
