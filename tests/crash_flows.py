"""Workflows for test_crash_check: the checker's processes import them from here."""

from __future__ import annotations

from pregelkit.func import entrypoint, task
from pregelkit.testing import effect


@task
def step(i: int) -> int:
    effect(f"step {i}")
    return i * 10


@entrypoint()
def steps(n: int) -> list[int]:
    return [step(i).result() for i in range(n)]


@entrypoint()
def email_then_steps(n: int) -> list[int]:
    first = step(0).result()
    effect("email")  # the planted bug: a side effect in the body, outside any task
    return [first] + [step(i).result() for i in range(1, n)]


@task
async def astep(i: int) -> int:
    effect(f"astep {i}")
    return i * 10


@entrypoint()
async def asteps(n: int) -> list[int]:
    return [await astep(i) for i in range(n)]
