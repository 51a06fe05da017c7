"""Workflows recorded by one version of their code and replay-checked against
another (tests/test_replay_check.py). Also a script: records one thread that
crashes (``os._exit``) once its first calls are saved, or that is killed
while it sleeps or waits for a message:

    python tests/replay_check_flows.py DB THREAD N crash|sleep|recv [async]

Versions of ``order`` (the input is ``{"n": int, ...}``):

1. ``reserve``, then ``charge(n)`` (``charge(2n)`` when ``n % 100 == 7``),
   then an ``interrupt``;
2. the planted change: ``charge(3n)`` when ``n % 100 == 7``;
3. that change behind ``patched("triple")``;
4. the patch removed (``charge(3n)`` again, for threads that recorded the marker);
5. returns right after ``reserve`` (drops ``charge``);
6. ``pack`` (a task calling tasks) calls ``charge`` before ``reserve``.

Flags of the input: ``fail`` (``ship`` raises after the charge: the run
fails), ``crash`` (the process exits there), ``sleep`` (a durable sleep of
that many seconds there), ``recv`` (waits for a message on topic ``go``
there), ``nested`` (the calls are made by the task ``pack``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pregelkit import durable
from pregelkit.func import entrypoint, patched, task
from pregelkit.pregel import Pregel
from pregelkit.types import interrupt

BODIES: list[str] = []
"""Every task body that ran in this process."""


@task
def reserve(item: str) -> str:
    BODIES.append("reserve")
    return f"reserved {item}"


@task
def charge(amount: int) -> str:
    BODIES.append("charge")
    return f"charged {amount}"


@task
def ship(n: int) -> str:
    BODIES.append("ship")
    raise ValueError(f"no courier for order {n}")


@task
def crash() -> None:
    BODIES.append("crash")
    os._exit(9)


def _amount(version: int, n: int) -> int:
    if n % 100 != 7:
        return n
    if version == 1:
        return 2 * n
    if version == 3:
        return 3 * n if patched("triple") else 2 * n
    return 3 * n


@task
async def areserve(item: str) -> str:
    BODIES.append("reserve")
    return f"reserved {item}"


@task
async def acharge(amount: int) -> str:
    BODIES.append("charge")
    return f"charged {amount}"


@task
async def aship(n: int) -> str:
    BODIES.append("ship")
    raise ValueError(f"no courier for order {n}")


@task
async def acrash() -> None:
    BODIES.append("crash")
    os._exit(9)


def build(version: int, saver: Any = None, *, is_async: bool = False) -> Pregel:
    """Version ``version`` of ``order`` (see the module's docstring)."""
    if is_async:
        return _build_async(version, saver)

    @task
    def pack(n: int, fail: bool) -> list[str]:
        """The calls of ``order``, made by a task (nested calls); with ``fail``
        it fails after them (so it is left unfinished, its calls recorded)."""
        if version == 6:
            steps = [charge(n).result(), reserve(f"item{n % 10}").result()]
        else:
            steps = [reserve(f"item{n % 10}").result(), charge(_amount(version, n)).result()]
        if fail:
            ship(n).result()
        return steps

    @entrypoint(checkpointer=saver)
    def order(inp: dict[str, Any]) -> list[str]:
        n = inp["n"]
        if inp.get("nested"):
            steps = pack(n, bool(inp.get("fail"))).result()
        else:
            if version == 6:
                steps = [charge(n).result(), reserve(f"item{n % 10}").result()]
            else:
                steps = [reserve(f"item{n % 10}").result()]
                if version == 5:
                    return steps
                steps.append(charge(_amount(version, n)).result())
        if inp.get("crash"):
            crash().result()
        if inp.get("fail"):
            ship(n).result()
        if inp.get("sleep"):
            durable.sleep(inp["sleep"])
        if inp.get("recv"):
            steps.append(durable.recv("go"))
        steps.append(interrupt("ship?"))
        return steps

    return order


def _build_async(version: int, saver: Any) -> Pregel:
    @entrypoint(checkpointer=saver)
    async def order(inp: dict[str, Any]) -> list[str]:
        n = inp["n"]
        if version == 6:
            steps = [await acharge(n), await areserve(f"item{n % 10}")]
        else:
            steps = [await areserve(f"item{n % 10}")]
            if version == 5:
                return steps
            steps.append(await acharge(_amount(version, n)))
        if inp.get("crash"):
            await acrash()
        if inp.get("fail"):
            await aship(n)
        if inp.get("sleep"):
            await durable.asleep(inp["sleep"])
        if inp.get("recv"):
            steps.append(await durable.arecv("go"))
        steps.append(interrupt("ship?"))
        return steps

    return order


def _saver(db: str) -> Any:
    if db.startswith("postgres"):
        from pregelkit.checkpoint.postgres import PostgresSaver

        return PostgresSaver.from_conn_string(db)
    from pregelkit.checkpoint.sqlite import SqliteSaver

    return SqliteSaver.from_conn_string(db)


def _record(db: str, thread: str, n: int, how: str, is_async: bool) -> None:
    inp: dict[str, Any] = {"n": n}
    from pregelkit.durable import _primitives

    def killed(*args: Any) -> Any:
        os._exit(9)

    if how == "crash":
        inp["crash"] = True
    elif how == "sleep":  # killed as it starts to sleep, its wake time saved
        inp["sleep"] = 3600
        _primitives._sleep = _primitives._asleep = killed
    else:  # recv: killed as it starts to wait, its key recorded
        inp["recv"] = True
        _primitives.block = _primitives.ablock = killed
    config = {"configurable": {"thread_id": thread}}
    with _saver(db) as saver:
        wf = build(1, saver, is_async=is_async)
        if is_async:
            asyncio.run(wf.ainvoke(inp, config, durability="sync"))
        else:
            wf.invoke(inp, config, durability="sync")
    raise SystemExit("the run was to be killed")


if __name__ == "__main__":
    _record(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], "async" in sys.argv[5:])
