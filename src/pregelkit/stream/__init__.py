"""``StreamChannel``: a single-consumer queue of stream items, under
LangGraph's name (``langgraph.stream.StreamChannel``), for code that builds
its own projections of a run's stream.

pregelkit has no ``stream_events(version="v3")`` (see docs/compat.md); the
channel is here so code that creates, feeds and reads one works unchanged.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["StreamChannel"]

T = TypeVar("T")


class StreamChannel(Generic[T]):
    """A queue with one reader: items pushed before anyone reads are dropped
    (nobody asked for them, so nothing accumulates), items read are gone.

    A channel is bound once to sync or async reading (``_bind``), by whoever
    owns it. Its reader iterates it (``iter`` or ``aiter``, once) until the
    channel is closed, or failed, which raises the error after the items
    pushed before it. ``tee(n)``/``atee(n)`` give ``n`` readers that each see
    every item. A named channel can forward each item to a callback
    (``_wire``), e.g. to a run's combined event stream.
    """

    def __init__(self, name: str | None = None, *, maxlen: int | None = None) -> None:
        """``maxlen`` is accepted as in LangGraph, where it is unused too: the
        reader paces the producer, so the buffer stays small."""
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen <= 0):
            raise ValueError(f"StreamChannel maxlen must be a positive int or None, got {maxlen!r}")
        self.name = name
        self._items: deque[tuple[int, T]] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._subscribed = False
        self._is_async: bool | None = None
        self._wire_fn: Callable[[T], None] | None = None
        self._stamp: Callable[[], int] | None = None
        self._ready = threading.Condition()
        self._waiter: asyncio.Event | None = None
        self._fanout: list[StreamChannel[T]] = []

    # owner side
    def _bind(self, *, is_async: bool) -> None:
        """Fix how the channel is read: by ``iter`` (sync) or ``aiter`` (async)."""
        if self._is_async is not None:
            raise RuntimeError(f"StreamChannel {self.name!r} is already bound")
        self._is_async = is_async

    def _wire(self, forward: Callable[[T], None]) -> None:
        """Forward every item pushed to ``forward`` as well."""
        self._wire_fn = forward

    def push(self, item: T) -> None:
        """Add an item; dropped when nobody reads the channel yet."""
        if self._closed:
            raise RuntimeError("Cannot push to a closed StreamChannel")
        if self._wire_fn is not None:
            self._wire_fn(item)
        for reader in self._fanout:
            reader.push(item)
        if not self._subscribed:
            return
        stamp = self._stamp() if self._stamp is not None else 0
        with self._ready:
            self._items.append((stamp, item))
            self._ready.notify_all()
        self._wake()

    def close(self) -> None:
        """No more items: the reader ends after the ones it has not read."""
        self._finish(None)

    def fail(self, error: BaseException) -> None:
        """No more items: the reader raises ``error`` after the ones it has not read."""
        self._finish(error)

    def _finish(self, error: BaseException | None) -> None:
        for reader in self._fanout:
            reader._finish(error)
        with self._ready:
            if not self._closed:
                self._closed, self._error = True, error
            self._ready.notify_all()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.set()

    # reader side
    def _subscribe(self, is_async: bool) -> None:
        if self._is_async is None:
            raise TypeError("StreamChannel has not been bound to sync or async reading yet")
        if self._is_async != is_async:
            mode = "async" if self._is_async else "sync"
            use = "async for" if self._is_async else "for"
            raise TypeError(f"StreamChannel is bound to {mode} mode: read it with {use!r}")
        if self._subscribed or self._fanout:
            raise RuntimeError("StreamChannel already has a subscriber; use tee() for more")
        self._subscribed = True

    def __iter__(self) -> Iterator[T]:
        self._subscribe(is_async=False)
        return self._read()

    def _read(self) -> Iterator[T]:
        while True:
            with self._ready:
                while not self._items and not self._closed:
                    self._ready.wait()
                if self._items:
                    item = self._items.popleft()[1]
                elif self._error is not None:
                    raise self._error
                else:
                    return
            yield item

    def __aiter__(self) -> AsyncIterator[T]:
        self._subscribe(is_async=True)
        self._waiter = asyncio.Event()
        return self._aread()

    async def _aread(self) -> AsyncIterator[T]:
        waiter = self._waiter
        assert waiter is not None
        while True:
            if self._items:
                yield self._items.popleft()[1]
                continue
            if self._closed:
                if self._error is not None:
                    raise self._error
                return
            waiter.clear()
            await waiter.wait()

    def tee(self, n: int = 2) -> tuple[Iterator[T], ...]:
        """``n`` sync readers that each see every item pushed from now on."""
        return tuple(iter(r) for r in self._readers(n, is_async=False))

    def atee(self, n: int = 2) -> tuple[AsyncIterator[T], ...]:
        """``n`` async readers that each see every item pushed from now on."""
        return tuple(aiter(r) for r in self._readers(n, is_async=True))

    def _readers(self, n: int, *, is_async: bool) -> list[StreamChannel[T]]:
        self._subscribe(is_async)
        # the copies hold the items; this channel only hands them on
        self._subscribed = False
        readers: list[StreamChannel[T]] = []
        for _ in range(n):
            reader: StreamChannel[T] = StreamChannel(self.name)
            reader._bind(is_async=is_async)
            readers.append(reader)
        self._fanout.extend(readers)
        return readers

    def __repr__(self) -> str:
        state = "failed" if self._error else "closed" if self._closed else "open"
        return f"StreamChannel(name={self.name!r}, {state}, {len(self._items)} buffered)"
