"""Async task calls (``DeferredCall``): a call its caller awaits runs in the
caller's stack; one nobody awaits starts on the loop's next turn; either
way it keeps its own context, its cancellation and the run's
``max_concurrency``."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task

GUARD = 120  # seconds: a hang fails the test instead of the suite


@pytest.mark.parametrize("how", ["ainvoke", "astream", "invoke", "stream"])
def test_max_concurrency_one_with_a_task_call_does_not_hang(how: str) -> None:
    """Before: ``astream`` with ``max_concurrency=1`` hung when the entrypoint
    called a task: the entrypoint held the only slot while it waited for its
    call, which waited for the slot. A caller waiting for its own call now
    runs it (as a sync caller does)."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from pregelkit.checkpoint.memory import InMemorySaver
        from pregelkit.func import entrypoint, task

        @task
        async def inner(x):
            return x * 10

        @task
        async def one(x):
            return await inner(x) + 1

        @task
        def sync_one(x):
            return x + 2

        @entrypoint(checkpointer=InMemorySaver())
        async def main(x):
            return await one(x) + await one(x + 1)

        @entrypoint(checkpointer=InMemorySaver())
        def smain(x):
            return sync_one(x).result() + sync_one(x + 1).result()

        config = {{"configurable": {{"thread_id": "t"}}, "max_concurrency": 1}}

        async def go():
            if "{how}" == "ainvoke":
                return await main.ainvoke(1, config)
            if "{how}" == "astream":
                return [c async for c in main.astream(1, config)][-1]["main"]

        if "{how}" == "invoke":
            print(smain.invoke(1, config))
        elif "{how}" == "stream":
            print(list(smain.stream(1, config))[-1]["smain"])
        else:
            print(asyncio.run(go()))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=GUARD
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == (["7"] if how in ("invoke", "stream") else ["32"])


def test_calls_nobody_awaits_yet_run_side_by_side() -> None:
    """The first call is awaited (run in the caller's stack) and waits for the
    second, which nobody awaits yet: it must have started on its own."""

    @task
    async def waiter(ev: Any) -> str:
        await asyncio.wait_for(ev.wait(), 10)
        return "woken"

    @task
    async def setter(ev: Any) -> str:
        ev.set()
        return "set"

    @entrypoint()
    async def main(_: int) -> list[str]:
        ev = asyncio.Event()
        first, second = waiter(ev), setter(ev)
        return [await first, await second]

    assert asyncio.run(main.ainvoke(1)) == ["woken", "set"]


def test_a_call_run_by_its_awaiter_keeps_its_own_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")

    @task
    async def one(x: int) -> str:
        before = var.get()
        var.set("call")
        return before

    @entrypoint(checkpointer=InMemorySaver())
    async def main(x: int) -> list[str]:
        var.set("entrypoint")
        seen = await one(x)
        return [seen, var.get()]

    config = {"configurable": {"thread_id": "ctx"}}
    assert asyncio.run(main.ainvoke(1, config)) == ["entrypoint", "entrypoint"]


def test_cancelling_a_call_its_caller_runs_cancels_the_call_only() -> None:
    """A call run in its caller's stack and cancelled from elsewhere ends
    cancelled, as its own task would: the caller gets CancelledError from
    the call and its own task is not left cancelling."""
    futures: list[Any] = []
    seen: dict[str, Any] = {}

    @task
    async def slow(x: int) -> int:
        await asyncio.sleep(30)
        return x

    @entrypoint()
    async def main(x: int) -> str:
        fut = slow(x)
        futures.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            me = asyncio.current_task()
            seen["cancelling"] = me.cancelling() if me is not None else None
            return "call cancelled"
        return "not cancelled"

    async def go() -> str:
        run = asyncio.ensure_future(main.ainvoke(1))
        while not futures:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert futures[0].cancel()
        return await asyncio.wait_for(run, 10)

    assert asyncio.run(go()) == "call cancelled"
    assert seen["cancelling"] == 0


def test_a_failed_call_raises_in_its_awaiter_and_is_recorded() -> None:
    @task
    async def boom(x: int) -> int:
        raise ValueError(f"boom {x}")

    @entrypoint(checkpointer=InMemorySaver())
    async def main(x: int) -> str:
        try:
            await boom(x)
        except ValueError as exc:
            return str(exc)
        return "no error"

    config = {"configurable": {"thread_id": "fail"}}
    assert asyncio.run(main.ainvoke(3, config)) == "boom 3"


def test_runs_that_never_let_the_loop_turn_leave_nothing_behind() -> None:
    """A short run on an in-memory saver never waits, so the event loop does
    not turn between runs: what each run left for the loop's next turn (its
    call's start, its lane's timer) used to pile up, one handle each, with
    the run's objects, until the caller let the loop turn."""
    import gc

    from pregelkit.pregel._exec.deferred import DeferredCall

    @task
    async def one(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=InMemorySaver())
    async def main(x: int) -> int:
        return await one(x)

    def alive(kind: type) -> int:
        gc.collect()
        return sum(1 for obj in gc.get_objects() if isinstance(obj, kind))

    async def go() -> tuple[int, int, int, int]:
        for i in range(20):
            await main.ainvoke(i, {"configurable": {"thread_id": f"warm-{i}"}})
        before = alive(DeferredCall), alive(asyncio.TimerHandle)
        for i in range(300):
            await main.ainvoke(i, {"configurable": {"thread_id": f"t-{i}"}})
        return (*before, alive(DeferredCall), alive(asyncio.TimerHandle))

    calls_before, timers_before, calls_after, timers_after = asyncio.run(go())
    assert calls_after <= calls_before + 2
    assert timers_after <= timers_before + 2
