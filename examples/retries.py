"""Retries: a flaky step is retried with exponential backoff.

``call_service`` fails twice with a ``ConnectionError`` and then succeeds; its
``RetryPolicy`` waits 0.05 s, then 0.1 s (``backoff_factor=2``) between
attempts. The default ``retry_on`` retries what looks transient (connection
errors, HTTP 5xx) and never what is a bug: ``parse`` raises ``ValueError``,
which fails the run at once, after one attempt.
"""

from __future__ import annotations

import time

from pregelkit.func import entrypoint, task
from pregelkit.types import RetryPolicy

attempts: dict[str, int] = {"call_service": 0, "parse": 0}
started = time.monotonic()


@task(retry_policy=RetryPolicy(initial_interval=0.05, backoff_factor=2.0, jitter=False))
def call_service(request: str) -> str:
    attempts["call_service"] += 1
    n = attempts["call_service"]
    elapsed_ms = (time.monotonic() - started) * 1000
    print(f"call_service attempt {n} at +{elapsed_ms:.0f} ms")
    if n < 3:
        raise ConnectionError("service unavailable")
    return f"response to {request!r}"


@task(retry_policy=RetryPolicy(initial_interval=0.05, jitter=False))
def parse(payload: str) -> int:
    attempts["parse"] += 1
    print(f"parse attempt {attempts['parse']}")
    return int(payload)


@entrypoint()
def fetch_and_parse(request: str) -> str:
    response: str = call_service(request).result()
    return response


@entrypoint()
def parse_only(payload: str) -> int:
    result: int = parse(payload).result()
    return result


def main() -> None:
    global started
    started = time.monotonic()
    print(f"result: {fetch_and_parse.invoke('ping')}")
    print(f"call_service ran {attempts['call_service']} times")

    try:
        parse_only.invoke("not a number")
    except ValueError as exc:
        print(f"parse failed without retrying: {exc}")
    print(f"parse ran {attempts['parse']} time")


if __name__ == "__main__":
    main()
