"""Seeing what a run did: timelines of attempts, OpenTelemetry spans.

Importing this package (``pregelkit.func`` does) registers the OpenTelemetry
hooks, which stay off until a tracer provider is configured.
"""

from pregelkit.observe import otel as otel
