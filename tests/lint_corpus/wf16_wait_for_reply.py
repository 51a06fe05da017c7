"""Keep asking a person for a reply until a deadline passes."""

from datetime import UTC, datetime
from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint
from pregelkit.types import interrupt


@entrypoint(checkpointer=InMemorySaver())
def follow_up(inputs: dict[str, Any]) -> str | None:
    deadline = datetime.fromisoformat(inputs["deadline"])
    # each resume replays the loop: how many times it asked depends on today's clock,
    # so the recorded answers are matched to the wrong questions
    while datetime.now(UTC) < deadline:  # expect: PK001
        reply = interrupt({"to": inputs["email"], "text": "any news?"})  # expect: PK006
        if reply:
            return str(reply)
    return None
