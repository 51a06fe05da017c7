"""The in-process thread lock (``BaseCheckpointSaver.lock_thread``): one run
of a thread at a time, and no lock kept for a thread nobody runs."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.errors import ThreadBusyError
from pregelkit.func import entrypoint, task


@task
def _one(x: int) -> int:
    return x + 1


def test_a_process_that_ran_many_threads_keeps_no_lock_for_them() -> None:
    saver = InMemorySaver()

    @entrypoint(checkpointer=saver)
    def main(x: int) -> int:
        return _one(x).result()

    async def runs() -> None:
        for i in range(50):
            await main.ainvoke(i, {"configurable": {"thread_id": f"a{i}"}})

    for i in range(200):
        main.invoke(i, {"configurable": {"thread_id": f"t{i}"}})
    asyncio.run(runs())
    assert saver._thread_locks == {}


def test_the_lock_still_holds_one_run_at_a_time() -> None:
    saver = InMemorySaver()
    held = saver.lock_thread("t")
    with held:
        with pytest.raises(ThreadBusyError):
            saver.lock_thread("t").__enter__()
        entered: list[float] = []

        def waiter() -> None:
            with saver.lock_thread("t", wait=True):
                entered.append(time.monotonic())

        other = threading.Thread(target=waiter)
        other.start()
        time.sleep(0.1)
        assert entered == []  # waits while the first run holds the thread
        released = time.monotonic()
    other.join(10)
    assert entered and entered[0] >= released
    assert saver._thread_locks == {}
    with saver.lock_thread("t"):  # free again, a new lock
        assert list(saver._thread_locks) == ["t"]
