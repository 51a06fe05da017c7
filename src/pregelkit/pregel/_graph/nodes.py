"""Nodes: what a node reads, what triggers it, what it runs and writes.

``NodeBuilder`` is the user-facing way to declare a node; ``PregelNode`` is
its compiled form, with every per-call decision (injection, writers) made once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from pregelkit._internal._typing import MISSING
from pregelkit.channels.base import BaseChannel
from pregelkit.pregel._graph.call import FnSpec
from pregelkit.pregel._graph.protocol import PregelProtocol
from pregelkit.pregel._graph.validate import check_cache_policy, check_retry_policy
from pregelkit.pregel._graph.writes import ChannelWrite, ChannelWriteEntry
from pregelkit.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from datetime import timedelta

__all__ = ["NodeBuilder", "PregelNode"]


class PregelNode:
    """A compiled node: reads ``channels`` when one of ``triggers`` changed,
    runs ``steps`` in sequence, writes the result through ``writers``."""

    __slots__ = (
        "bound",
        "cache_policy",
        "cache_salt",
        "channels",
        "mapper",
        "metadata",
        "orchestrates",
        "retry_policy",
        "steps",
        "subgraphs",
        "tags",
        "timeout",
        "triggers",
        "writer",
        "writers",
    )

    def __init__(
        self,
        *,
        channels: str | list[str],
        triggers: Sequence[str],
        mapper: Callable[[Any], Any] | None = None,
        writers: Sequence[ChannelWrite] | None = None,
        tags: list[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        bound: Callable[..., Any] | Sequence[Callable[..., Any]] | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        subgraphs: Sequence[Any] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> None:
        self.timeout = TimeoutPolicy.coerce(timeout, "timeout")
        self.channels = channels
        self.triggers = list(triggers)
        self.mapper = mapper
        self.writers = list(writers or ())
        self.tags = tags
        self.metadata = metadata
        if bound is None:
            fns: Sequence[Callable[..., Any]] = ()
        elif isinstance(bound, (list, tuple)):
            fns = bound
        else:
            fns = (bound,)  # type: ignore[assignment]
        check_retry_policy(retry_policy)
        check_cache_policy(cache_policy)
        self.bound = fns[0] if len(fns) == 1 else (tuple(fns) or None)
        self.steps: tuple[FnSpec | _SubgraphStep, ...] = tuple(
            _SubgraphStep(f) if isinstance(f, PregelProtocol) else FnSpec(f) for f in fns
        )
        self.subgraphs = list(subgraphs or ()) or [
            s.graph for s in self.steps if isinstance(s, _SubgraphStep)
        ]
        if retry_policy is None:
            self.retry_policy: Sequence[RetryPolicy] | None = None
        elif isinstance(retry_policy, RetryPolicy):
            self.retry_policy = (retry_policy,)
        else:
            self.retry_policy = tuple(retry_policy)
        self.cache_policy = cache_policy
        self.cache_salt: bytes | None = None
        self.orchestrates = False
        """An entrypoint's body: its task calls need the loop, so it never runs
        on a remote executor (see ``pregel._exec.remote``)."""
        entries = [e for w in self.writers for e in w.entries]
        self.writer = ChannelWrite(entries) if entries else None

    def code_fingerprint(self) -> bytes:
        """What this node's code is, for its cache keys (see ``_fingerprint``);
        a subgraph step counts by its graph's name. Computed on first use."""
        salt = self.cache_salt
        if salt is None:
            import xxhash

            from pregelkit._internal._fingerprint import fingerprint

            h = xxhash.xxh3_128()
            for step in self.steps:
                if isinstance(step, FnSpec):
                    h.update(fingerprint(step.fn))
                else:
                    h.update(f"graph:{step.name}".encode())
            salt = self.cache_salt = h.digest()
        return salt

    @property
    def flat_writers(self) -> list[ChannelWrite]:
        return [self.writer] if self.writer is not None else []

    @property
    def is_async(self) -> bool:
        return any(isinstance(s, FnSpec) and s.is_async for s in self.steps)

    def read_input(self, channels: Mapping[str, BaseChannel[Any, Any, Any]]) -> Any:
        """The node's input from current channel values; MISSING when nothing to read."""
        if isinstance(self.channels, str):
            chan = channels[self.channels]
            if not chan.is_available():
                return MISSING
            value = chan.get()
        else:
            value = {}
            for name in self.channels:
                c = channels[name]
                if c.is_available():
                    value[name] = c.get()
            if not value:
                return MISSING
        if self.mapper is not None:
            value = self.mapper(value)
        return value


class _SubgraphStep:
    """A Pregel used as a step: it runs nested, in its own checkpoint namespace."""

    __slots__ = ("graph", "name")

    is_async = False
    inject: tuple[str, ...] = ()

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.name = getattr(graph, "name", "subgraph")


class NodeBuilder:
    """Declare a node: what it reads, what triggers it, what it does and writes.

    ``subscribe_only("a")`` gives the node the bare value of ``a``;
    ``subscribe_to("a", "b")`` gives it a dict of those channels. Several
    ``do`` calls run in sequence; every ``write_to`` entry receives the output
    of the last one.
    """

    __slots__ = (
        "_cache_policy",
        "_channels",
        "_fns",
        "_metadata",
        "_retry_policy",
        "_tags",
        "_timeout",
        "_triggers",
        "_writes",
    )

    def __init__(self) -> None:
        self._channels: str | list[str] = []
        self._triggers: list[str] = []
        self._tags: list[str] = []
        self._metadata: dict[str, Any] = {}
        self._writes: list[ChannelWriteEntry] = []
        self._fns: list[Any] = []  # functions and Pregel subgraphs
        self._retry_policy: list[RetryPolicy] = []
        self._cache_policy: CachePolicy[Any] | None = None
        self._timeout: TimeoutPolicy | None = None

    def subscribe_only(self, channel: str) -> Self:
        """Run when ``channel`` changes, with its bare value as input."""
        if self._channels:
            raise ValueError(
                "subscribe_only() must be the only subscription of a node; "
                "use subscribe_to(...) to read several channels"
            )
        self._channels = channel
        self._triggers.append(channel)
        return self

    def subscribe_to(self, *channels: str, read: bool = True) -> Self:
        """Run when any of ``channels`` changes; with ``read``, receive them as a dict."""
        if isinstance(self._channels, str):
            raise ValueError(
                "Cannot subscribe to channels when subscribed to a single channel "
                f"({self._channels!r}); use subscribe_to(...) alone to read several"
            )
        if read:
            self._channels.extend(channels)
        self._triggers.extend(channels)
        return self

    def read_from(self, *channels: str) -> Self:
        """Also read ``channels`` into the input dict, without being triggered by them."""
        if isinstance(self._channels, str):
            raise ValueError(
                f"Cannot read additional channels when subscribed to a single channel "
                f"({self._channels!r}); use subscribe_to(...) instead"
            )
        self._channels.extend(channels)
        return self

    def do(self, fn: Callable[..., Any] | PregelProtocol) -> Self:
        """Add a step: ``fn`` receives the input (or the previous step's output).
        A ``Pregel`` step runs as a subgraph."""
        if not callable(fn) and not isinstance(fn, PregelProtocol):
            raise TypeError(f"NodeBuilder.do() needs a callable, got {type(fn).__name__}: {fn!r}")
        self._fns.append(fn)
        return self

    def write_to(
        self, *channels: str | ChannelWriteEntry, **kwargs: Callable[[Any], Any] | Any
    ) -> Self:
        """Write the output to ``channels``; ``name=callable`` writes ``callable(output)``,
        ``name=value`` writes ``value``."""
        self._writes.extend(ChannelWriteEntry(c) if isinstance(c, str) else c for c in channels)
        self._writes.extend(
            ChannelWriteEntry(k, mapper=v) if callable(v) else ChannelWriteEntry(k, value=v)
            for k, v in kwargs.items()
        )
        return self

    def meta(self, *tags: str, **metadata: Any) -> Self:
        self._tags.extend(tags)
        self._metadata.update(metadata)
        return self

    def add_retry_policies(self, *policies: RetryPolicy) -> Self:
        check_retry_policy(policies, "add_retry_policies()")
        self._retry_policy.extend(policies)
        return self

    def add_cache_policy(self, policy: CachePolicy[Any]) -> Self:
        check_cache_policy(policy, "add_cache_policy()")
        self._cache_policy = policy
        return self

    def set_timeout(self, timeout: float | timedelta | TimeoutPolicy | None) -> Self:
        """Bound each attempt of the node: seconds (``run_timeout``), a timedelta,
        a ``TimeoutPolicy``, or None for no limit."""
        self._timeout = TimeoutPolicy.coerce(timeout, "NodeBuilder.set_timeout(timeout)")
        return self

    def timeout(self, timeout: float | timedelta | TimeoutPolicy | None) -> Self:
        """Same as ``set_timeout``."""
        self._timeout = TimeoutPolicy.coerce(timeout, "NodeBuilder.timeout(timeout)")
        return self

    def build(self) -> PregelNode:
        """The compiled node."""
        return PregelNode(
            channels=self._channels,
            triggers=self._triggers,
            tags=self._tags,
            metadata=self._metadata,
            writers=[ChannelWrite(self._writes)],
            bound=self._fns,
            retry_policy=self._retry_policy or None,
            cache_policy=self._cache_policy,
            timeout=self._timeout,
        )
