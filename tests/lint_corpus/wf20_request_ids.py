"""An order is charged and shipped under a request id made up by the workflow."""

import uuid
from datetime import UTC, datetime
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def charge(order: dict[str, Any], idempotency_key: str) -> str:
    return f"charged {order['total']} ({idempotency_key})"


@task
def ship(order: dict[str, Any], idempotency_key: str, warehouse: int) -> str:
    return f"shipped {order['id']} from {warehouse} ({idempotency_key})"


@entrypoint(checkpointer=InMemorySaver())
def fulfil(order: dict[str, Any]) -> dict[str, str]:
    # a replay makes a new key: charge(order, key) no longer matches its record
    key = str(uuid.uuid4())  # expect: PK002
    started = datetime.now(UTC).isoformat()  # expect: PK001
    # reviewed: missed by the lint, hash() of a str is salted per process
    warehouse = hash(order["id"]) % 4  # expect: PK002
    receipt = charge(order, key).result()
    tracking = ship(order, key, warehouse).result()
    return {"receipt": receipt, "tracking": tracking, "started": started}
