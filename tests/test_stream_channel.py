"""StreamChannel: one reader, drained as read, closed or failed once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pregelkit.stream import StreamChannel


def bound(is_async: bool = False) -> StreamChannel[int]:
    channel: StreamChannel[int] = StreamChannel("c")
    channel._bind(is_async=is_async)
    return channel


def test_items_reach_the_reader_once_and_only_after_it_subscribed() -> None:
    channel = bound()
    channel.push(0)  # nobody reads yet: dropped, not buffered
    reader = iter(channel)
    for i in (1, 2):
        channel.push(i)
    channel.close()
    assert list(reader) == [1, 2] and not channel._items
    with pytest.raises(RuntimeError, match="closed StreamChannel"):
        channel.push(3)


def test_a_failed_channel_raises_after_the_items_before_the_failure() -> None:
    channel = bound()
    reader = iter(channel)
    channel.push(1)
    channel.fail(ValueError("boom"))
    seen = []
    with pytest.raises(ValueError, match="boom"):
        for item in reader:
            seen.append(item)
    assert seen == [1]


def test_misuse_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="positive int or None"):
        StreamChannel(maxlen=0)
    with pytest.raises(TypeError, match="not been bound"):
        iter(StreamChannel())
    channel = bound()
    with pytest.raises(RuntimeError, match="already bound"):
        channel._bind(is_async=True)
    with pytest.raises(TypeError, match="bound to sync mode"):
        channel.__aiter__()
    iter(channel)
    with pytest.raises(RuntimeError, match="already has a subscriber"):
        iter(channel)


def test_a_sync_reader_waits_for_a_producer_in_another_thread() -> None:
    channel = bound()
    reader = iter(channel)

    def produce() -> None:
        for i in range(100):
            channel.push(i)
        channel.close()

    producer = threading.Thread(target=produce)
    producer.start()
    assert list(reader) == list(range(100))
    producer.join()


def test_async_readers_and_tee_each_see_every_item() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        one = bound(is_async=True)
        reader = aiter(one)

        async def produce() -> None:
            for i in range(3):
                one.push(i)
                await asyncio.sleep(0)
            one.close()

        task = asyncio.create_task(produce())
        got = [x async for x in reader]
        await task
        teed = bound(is_async=True)
        a, b = teed.atee(2)
        teed.push(7)
        teed.close()
        return got, [x async for x in a], [x async for x in b]

    assert asyncio.run(scenario()) == ([0, 1, 2], [7], [7])
    channel = bound()
    forwarded: list[int] = []
    channel._wire(forwarded.append)
    a, b = channel.tee(2)
    channel.push(5)
    channel.close()
    assert (list(a), list(b), forwarded) == ([5], [5], [5])
