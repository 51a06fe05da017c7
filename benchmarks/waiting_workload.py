"""Workflows the waiting benchmark's worker processes serve (benchmarks/waiting.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pregelkit import durable
from pregelkit.func import entrypoint


@entrypoint()
def sleeps(seconds: float) -> float:
    """Sleeps (an hour, in the idle fleet's figures), then says when it woke."""
    durable.sleep(seconds)
    return time.time()


@entrypoint()
def sleeps_until(due: float) -> float:
    """Sleeps until ``due`` (seconds since the epoch), then says when it woke."""
    durable.sleep_until(datetime.fromtimestamp(due, UTC))
    return time.time()


@entrypoint()
def receives(topic: str) -> tuple[float, float]:
    """Waits for a message (the time it was sent), then says when it woke."""
    sent = durable.recv(topic)
    return float(sent), time.time()
