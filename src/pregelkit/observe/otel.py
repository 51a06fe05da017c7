"""OpenTelemetry spans for runs and attempts (``pip install pregelkit[otel]``).

Each root run is a span ``pregelkit.run``; each attempt a child span
``pregelkit.task``, current while the body runs (in its worker thread or
asyncio task), so spans the body opens nest under it. A graph run inside a
task adds no run span: its attempts nest under that task's span.

Off costs nothing measurable: the factory (registered by ``pregelkit.observe``,
which imports this module only then) is asked once per run and answers
None unless ``opentelemetry.trace`` is already imported (configuring a
tracer provider imports it) and a real provider is set. This module never
imports opentelemetry itself at import time, so ``import pregelkit`` stays
free of it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pregelkit.checkpoint.attempts import Outcome, error_fields
from pregelkit.pregel._exec.hooks import AttemptHooks
from pregelkit.types import PregelExecutableTask

__all__ = ["OtelHooks", "otel_hooks"]


class OtelHooks:
    """The spans of one run."""

    def __init__(self, trace: Any, thread_id: str, nested: bool) -> None:
        from opentelemetry import context

        self.trace = trace
        self.context = context
        self.tracer = trace.get_tracer("pregelkit")
        self.thread_id = thread_id
        self.nested = nested
        self.run_span: Any = None
        self.parent: Any = context.get_current()  # nested: the enclosing task's span

    def run_started(self, run_id: str) -> None:
        if self.nested:
            return
        self.run_span = self.tracer.start_span(
            "pregelkit.run",
            attributes={"pregelkit.thread_id": self.thread_id, "pregelkit.run_id": run_id},
        )
        self.parent = self.trace.set_span_in_context(self.run_span)

    def _task_span(self, task: PregelExecutableTask, step: int, attempt: int) -> Any:
        return self.tracer.start_span(
            "pregelkit.task",
            context=self.parent,
            attributes={
                "pregelkit.thread_id": self.thread_id,
                "pregelkit.step": step,
                "pregelkit.task": task.name,
                "pregelkit.task_id": task.id,
                "pregelkit.attempt": attempt,
                "pregelkit.cached": False,
            },
        )

    def attempt_started(self, task: PregelExecutableTask, step: int, attempt: int) -> Any:
        span = self._task_span(task, step, attempt)
        token = self.context.attach(self.trace.set_span_in_context(span))
        return span, token

    def attempt_skipped(self, task: PregelExecutableTask, step: int, outcome: Outcome) -> None:
        span = self._task_span(task, step, 0)
        span.set_attribute("pregelkit.cached", outcome == "cached")
        span.set_attribute("pregelkit.outcome", outcome)
        span.end()

    def attempt_ended(
        self, token: Any, outcome: Outcome, exc: BaseException | None, retrying: bool
    ) -> None:
        span, ctx_token = token
        self.context.detach(ctx_token)
        span.set_attribute("pregelkit.outcome", outcome)
        if outcome == "interrupted":
            span.add_event("pregelkit.interrupt")
        elif exc is not None and outcome != "cancelled":
            self._failed(span, exc, retrying)
        span.end()

    def _failed(self, span: Any, exc: BaseException, retrying: bool) -> None:
        etype, message = error_fields(exc)
        attributes = {"exception.type": etype, "exception.message": message}
        span.add_event("pregelkit.retry" if retrying else "exception", attributes)
        if not retrying:
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, message))

    def interrupted(self, interrupts: Sequence[Any]) -> None:
        if self.run_span is not None:
            self.run_span.add_event(
                "pregelkit.interrupt", {"pregelkit.interrupts": len(interrupts)}
            )

    def run_ended(self, exc: BaseException | None) -> None:
        span = self.run_span
        if span is None:
            return
        if exc is not None and isinstance(exc, Exception) and not _is_interrupt(exc):
            self._failed(span, exc, False)
        span.end()


def _is_interrupt(exc: BaseException) -> bool:
    from pregelkit.errors import GraphInterrupt

    return isinstance(exc, GraphInterrupt)


def otel_hooks(thread_id: str, nested: bool) -> AttemptHooks | None:
    """Spans for a run, when OpenTelemetry is imported and a provider is set."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return OtelHooks(trace, thread_id, nested)
