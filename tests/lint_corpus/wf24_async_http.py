"""An async workflow that looks a user up, then greets them."""

from typing import Any

import httpx

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
async def write_greeting(user: dict[str, Any]) -> str:
    return f"Hello {user['name']}"


@entrypoint(checkpointer=InMemorySaver())
async def greet(user_id: str) -> str:
    # the request is made again on every replay, and may answer differently
    async with httpx.AsyncClient() as client:  # expect: PK003
        user = (await client.get(f"https://users.example/{user_id}")).json()
    return await write_greeting(user)
