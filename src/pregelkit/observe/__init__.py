"""Seeing what a run did: timelines of attempts, OpenTelemetry spans."""
