"""A flaky call to a weather service, retried by the task's policy."""

import json
import urllib.request

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task
from pregelkit.types import RetryPolicy


@task(retry_policy=RetryPolicy(max_attempts=3))
def get_weather(city: str) -> dict[str, object]:
    with urllib.request.urlopen(f"https://weather.example/{city}") as response:
        return dict(json.load(response))


@entrypoint(checkpointer=InMemorySaver())
def weather(city: str) -> str:
    report = get_weather(city).result()
    return f"It is {report['summary']} in {city}"
