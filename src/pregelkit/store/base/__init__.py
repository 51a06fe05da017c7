"""The store interface: JSON-like documents under hierarchical namespaces.

A checkpoint holds one thread's state; a store holds what many threads share
(user profiles, memories), addressed by a namespace such as
``("users", "42", "memories")`` and a key inside it. Every operation is an op
value so a store can run a mixed batch in one round trip; the convenience
methods (``get``, ``put``, ``search``...) build one op and run it through
``batch``/``abatch``, which is all an implementation has to provide.

Semantic (vector) search is not available: pregelkit has no embeddings
dependency, so ``query=`` and ``index=`` raise :class:`NotImplementedError`
instead of being silently ignored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple, Union, cast

__all__ = [
    "FILTER_OPERATORS",
    "BaseStore",
    "GetOp",
    "InvalidNamespaceError",
    "Item",
    "ListNamespacesOp",
    "MatchCondition",
    "NamespaceMatchType",
    "NamespacePath",
    "Op",
    "PutOp",
    "Result",
    "SearchItem",
    "SearchOp",
]

NamespacePath = tuple[str, ...]
"""A namespace pattern for ``list_namespaces``; ``"*"`` matches any one label."""

NamespaceMatchType = Literal["prefix", "suffix"]

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""Comparison operators a search filter may use, e.g. ``{"age": {"$gte": 18}}``."""

_NO_SEMANTIC_SEARCH = (
    "pregelkit stores have no semantic (vector) index because pregelkit ships without an "
    "embeddings dependency"
)


class InvalidNamespaceError(ValueError):
    """A namespace is not a tuple of non-empty, dot-free string labels.

    Dots are refused, as in langgraph, because a store that keeps the namespace
    in one text column joins the labels with ``"."``: a label containing one
    would then read back as two labels.
    """


class Item:
    """A stored document with the namespace and key it lives under.

    ``created_at`` is when the key was first written, ``updated_at`` the last
    write; both are timezone-aware (UTC).
    """

    __slots__ = ("created_at", "key", "namespace", "updated_at", "value")

    def __init__(
        self,
        *,
        value: dict[str, Any],
        key: str,
        namespace: tuple[str, ...],
        created_at: datetime,
        updated_at: datetime,
    ) -> None:
        self.value = value
        self.key = key
        self.namespace = tuple(namespace)
        self.created_at = created_at
        self.updated_at = updated_at

    def dict(self) -> dict[str, Any]:
        """A JSON-ready view: namespace as a list, timestamps as ISO 8601 strings."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

    def _fields(self) -> tuple[Any, ...]:
        return (self.namespace, self.key, self.value, self.created_at, self.updated_at)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.namespace, self.key))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in self.dict().items())
        return f"{type(self).__name__}({args})"


class SearchItem(Item):
    """An item returned by ``search``; ``score`` is the relevance of a semantic
    match, so it is always ``None`` here (no semantic search)."""

    __slots__ = ("score",)

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
    ) -> None:
        super().__init__(
            value=value,
            key=key,
            namespace=namespace,
            created_at=created_at,
            updated_at=updated_at,
        )
        self.score = score

    def dict(self) -> dict[str, Any]:
        """Like :meth:`Item.dict`, plus the score."""
        return {**super().dict(), "score": self.score}

    def _fields(self) -> tuple[Any, ...]:
        return (*super()._fields(), self.score)


class GetOp(NamedTuple):
    """Read one item."""

    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True
    """Whether reading restarts the item's TTL; ignored by stores without TTLs."""


class SearchOp(NamedTuple):
    """List the items under a namespace prefix, optionally filtered on their values."""

    namespace_prefix: tuple[str, ...]
    """``()`` searches the whole store."""
    filter: dict[str, Any] | None = None
    """Top-level value key -> expected value, or -> ``{operator: operand}`` using
    :data:`FILTER_OPERATORS`; every entry must match."""
    limit: int = 10
    offset: int = 0
    query: str | None = None
    """Natural-language query for semantic search: not supported, must be ``None``."""
    refresh_ttl: bool = True


class MatchCondition(NamedTuple):
    """A pattern a namespace must start (``prefix``) or end (``suffix``) with."""

    match_type: NamespaceMatchType
    path: NamespacePath


class ListNamespacesOp(NamedTuple):
    """List the distinct namespaces that hold items."""

    match_conditions: tuple[MatchCondition, ...] | None = None
    max_depth: int | None = None
    """Truncate longer namespaces to this many labels (then de-duplicate)."""
    limit: int = 100
    offset: int = 0


class PutOp(NamedTuple):
    """Write an item, or delete it when ``value`` is ``None``."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    # The field shadows tuple.index; the name is kept for compatibility with langgraph.
    index: Literal[False] | list[str] | None = None  # type: ignore[assignment]
    """Fields to embed for semantic search: not supported, must be ``None``/``False``."""
    ttl: float | None = None
    """Minutes until the item expires; only for stores with ``supports_ttl``."""


Op = Union[GetOp, SearchOp, PutOp, ListNamespacesOp]
Result = Union[Item, list[Item], list[SearchItem], list[tuple[str, ...]], None]


def _check_namespace(namespace: object, *, what: str, allow_empty: bool) -> None:
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(
            f"{what} must be a tuple of strings such as ('users', '42'), "
            f"got {type(namespace).__name__} {namespace!r}"
        )
    if not namespace and not allow_empty:
        raise InvalidNamespaceError(f"{what} is empty; give at least one label, e.g. ('memories',)")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"{what} {namespace!r} has label {label!r} of type "
                f"{type(label).__name__}; every label must be a string"
            )
        if not label:
            raise InvalidNamespaceError(
                f"{what} {namespace!r} has an empty label; every label must be non-empty"
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"{what} {namespace!r} has label {label!r} containing '.'; split it "
                f"into separate labels or use another separator such as '-'"
            )


def _check_page(limit: object, offset: object) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative int, got {number!r}")


def _check_filter(spec: object) -> None:
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise TypeError(
            f"filter must be a dict of value key -> expected value, got {type(spec).__name__}"
        )
    for field, expected in spec.items():
        if not isinstance(expected, dict):
            continue
        operators = [name for name in expected if isinstance(name, str) and name.startswith("$")]
        if not operators:
            continue
        if len(operators) != len(expected):
            raise ValueError(
                f"filter on {field!r} mixes operators and plain keys: {expected!r}; use "
                f"either only operators like {{'$gt': 1}} or a plain dict to compare equal"
            )
        unknown = sorted(set(operators) - FILTER_OPERATORS)
        if unknown:
            raise ValueError(
                f"filter on {field!r} uses unknown operator(s) {unknown}; "
                f"supported: {sorted(FILTER_OPERATORS)}"
            )


class BaseStore(ABC):
    """A key-value store of dict documents under hierarchical namespaces.

    Implementations provide ``batch`` and ``abatch`` and call
    :meth:`validate_ops` on the ops they are given, so bad input fails with the
    same message whichever store runs it.
    """

    supports_ttl: bool = False
    """Whether ``put(..., ttl=...)`` is honoured; stores without TTLs refuse it
    rather than keep data the caller expects to expire."""

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order and return one result per op (``None`` for puts)."""

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""

    def validate_ops(self, ops: Iterable[Op]) -> list[Op]:
        """Check every op before any runs, so an invalid batch changes nothing.

        Raises :class:`InvalidNamespaceError` (a ``ValueError``), ``ValueError``
        or ``TypeError`` naming the bad argument, and ``NotImplementedError``
        for semantic search or TTLs the store does not support.
        """
        checked = list(ops)
        for op in checked:
            if isinstance(op, GetOp):
                _check_namespace(op.namespace, what="namespace", allow_empty=False)
                _check_key(op.key)
            elif isinstance(op, PutOp):
                self._check_put(op)
            elif isinstance(op, SearchOp):
                _check_namespace(op.namespace_prefix, what="namespace_prefix", allow_empty=True)
                if op.query is not None:
                    raise NotImplementedError(
                        f"search(query={op.query!r}) needs semantic search, and "
                        f"{_NO_SEMANTIC_SEARCH}; drop query= and use filter= to match values"
                    )
                _check_filter(op.filter)
                _check_page(op.limit, op.offset)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    if condition.match_type not in ("prefix", "suffix"):
                        raise ValueError(
                            f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
                        )
                    _check_namespace(condition.path, what=condition.match_type, allow_empty=True)
                if op.max_depth is not None and (
                    not isinstance(op.max_depth, int) or op.max_depth < 1
                ):
                    raise ValueError(f"max_depth must be a positive int, got {op.max_depth!r}")
                _check_page(op.limit, op.offset)
            else:
                raise TypeError(
                    f"unknown store op {op!r}; expected GetOp, PutOp, SearchOp or ListNamespacesOp"
                )
        return checked

    def _check_put(self, op: PutOp) -> None:
        _check_namespace(op.namespace, what="namespace", allow_empty=False)
        _check_key(op.key)
        if op.value is not None and not isinstance(op.value, dict):
            raise TypeError(
                f"value for key {op.key!r} in namespace {op.namespace!r} must be a dict, "
                f"got {type(op.value).__name__}; wrap it, e.g. {{'data': value}}"
            )
        if op.index is not None and op.index is not False:
            raise NotImplementedError(
                f"put(index={op.index!r}) asks for semantic indexing, and {_NO_SEMANTIC_SEARCH}; "
                f"pass index=None or index=False"
            )
        if op.ttl is not None and not self.supports_ttl:
            raise NotImplementedError(
                f"{type(self).__name__} does not expire items, so put(ttl={op.ttl!r}) "
                f"cannot be honoured; pass ttl=None and delete the item when it is stale"
            )
        if op.ttl is not None and not op.ttl > 0:
            raise ValueError(f"ttl must be a positive number of minutes or None, got {op.ttl!r}")

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item at ``namespace``/``key``, or ``None`` if there is none.

        ``refresh_ttl`` says whether reading restarts the item's TTL (``None``:
        yes); stores without TTLs accept and ignore it, so callers need not
        know which store they have.
        """
        result = self.batch([GetOp(namespace, key, _refresh(refresh_ttl))])[0]
        return cast("Item | None", result)

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None = None,
    ) -> None:
        """Create or replace the item at ``namespace``/``key``."""
        self.batch([PutOp(namespace, key, value, index, ttl)])

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item at ``namespace``/``key``; a missing item is not an error."""
        self.batch([PutOp(namespace, key, None)])

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Items whose namespace starts with ``namespace_prefix`` and whose value
        matches ``filter``, paged by ``limit``/``offset``."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, _refresh(refresh_ttl))
        return cast("list[SearchItem]", self.batch([op])[0])

    def list_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Distinct namespaces holding items, filtered by prefix/suffix patterns
        (``"*"`` matches any label) and truncated to ``max_depth`` labels."""
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", self.batch([op])[0])

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Async :meth:`get`."""
        result = (await self.abatch([GetOp(namespace, key, _refresh(refresh_ttl))]))[0]
        return cast("Item | None", result)

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None = None,
    ) -> None:
        """Async :meth:`put`."""
        await self.abatch([PutOp(namespace, key, value, index, ttl)])

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Async :meth:`delete`."""
        await self.abatch([PutOp(namespace, key, None)])

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Async :meth:`search`."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, _refresh(refresh_ttl))
        return cast("list[SearchItem]", (await self.abatch([op]))[0])

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Async :meth:`list_namespaces`."""
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", (await self.abatch([op]))[0])


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, got {type(key).__name__} {key!r}")


def _refresh(refresh_ttl: bool | None) -> bool:
    # None means "the store's default", which is to refresh on read.
    return True if refresh_ttl is None else refresh_ttl


def _list_op(
    prefix: NamespacePath | None,
    suffix: NamespacePath | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> ListNamespacesOp:
    conditions: list[MatchCondition] = []
    if prefix is not None:
        conditions.append(MatchCondition("prefix", prefix))
    if suffix is not None:
        conditions.append(MatchCondition("suffix", suffix))
    return ListNamespacesOp(tuple(conditions) or None, max_depth, limit, offset)
