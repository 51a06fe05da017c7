"""Seeing what a run did: timelines of attempts, OpenTelemetry spans.

Importing this package (``pregelkit.func`` does) registers the OpenTelemetry
hooks, which stay off until a tracer provider is configured. Their module
(``pregelkit.observe.otel``) loads only once OpenTelemetry itself is
imported.
"""

from __future__ import annotations

import sys

from pregelkit.pregel._exec.hooks import AttemptHooks, add_hooks_factory


def _otel_hooks(thread_id: str, nested: bool) -> AttemptHooks | None:
    """The OpenTelemetry factory, asked once per run: None unless
    ``opentelemetry.trace`` is imported (configuring a provider imports it)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from pregelkit.observe.otel import otel_hooks

    return otel_hooks(thread_id, nested)


add_hooks_factory(_otel_hooks)
