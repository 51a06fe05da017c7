"""A reminder is sent after a durable wait, later at weekends."""

from datetime import datetime
from typing import Any

from pregelkit import durable
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def send_reminder(user: dict[str, Any]) -> str:
    return f"reminded {user['email']}"


@entrypoint(checkpointer=InMemorySaver())
def remind(user: dict[str, Any]) -> str:
    durable.sleep(3600)
    # replayed on Monday, a run that slept on Sunday takes the other branch:
    # its recorded sleep is matched to a different call
    if datetime.now().weekday() >= 5:  # expect: PK001
        durable.sleep(24 * 3600)
    return send_reminder(user).result()
