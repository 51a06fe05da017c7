"""The store interface: JSON-like documents under hierarchical namespaces.

A checkpoint holds one thread's state; a store holds what many threads share
(user profiles, memories), addressed by a namespace such as
``("users", "42", "memories")`` and a key inside it. Every operation is an op
value so a store can run a mixed batch in one round trip; the convenience
methods (``get``, ``put``, ``search``...) check their arguments, build one op
and run it through ``batch``/``abatch``, which is all an implementation has
to provide.

Semantic search needs an embedding function from the user
(``index={"embed": ..., "dims": ..., "fields": [...]}``): pregelkit has no
model dependency. A store without an index ignores ``query=`` and returns
its plain search order, as LangGraph's stores do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypedDict, Union, cast

from pregelkit.store._filter import FILTER_OPERATORS, parse_filter
from pregelkit.store.base.embed import (
    AEmbeddingsFunc,
    Embeddings,
    EmbeddingsFunc,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

__all__ = [
    "FILTER_OPERATORS",
    "NOT_PROVIDED",
    "AEmbeddingsFunc",
    "BaseStore",
    "Embeddings",
    "EmbeddingsFunc",
    "GetOp",
    "IndexConfig",
    "InvalidNamespaceError",
    "Item",
    "ListNamespacesOp",
    "MatchCondition",
    "NamespaceMatchType",
    "NamespacePath",
    "NotProvided",
    "Op",
    "PutOp",
    "Result",
    "SearchItem",
    "SearchOp",
    "TTLConfig",
    "ensure_embeddings",
    "get_text_at_path",
    "tokenize_path",
    "validate_op_namespace",
]

NamespacePath = tuple[str, ...]
"""A namespace pattern for ``list_namespaces``; ``"*"`` matches any one label."""

NamespaceMatchType = Literal["prefix", "suffix"]


class TTLConfig(TypedDict, total=False):
    """How a store with ``supports_ttl`` expires items (times in minutes)."""

    refresh_on_read: bool
    """Whether ``get``/``search`` restart the TTL of what they return by
    default (``True``; in the SQLite stores ``False``, as in LangGraph's); a
    call's ``refresh_ttl=`` overrides it."""
    default_ttl: float | None
    """TTL of a ``put`` that does not pass ``ttl=``; ``None``: never expire."""
    sweep_interval_minutes: int | None
    """How often the sweeper started by ``start_ttl_sweeper()`` deletes
    expired items."""
    omit_expired: bool
    """Leave expired items out of reads even before the sweeper deletes them
    (``False`` by default, as in LangGraph: until swept, an expired item is
    read, searched and listed as a live one)."""


class IndexConfig(TypedDict, total=False):
    """Semantic search: ``embed`` turns texts into ``dims``-long vectors, and
    ``fields`` are the paths of the texts to embed in each document
    (``["$"]``, the whole document, by default)."""

    dims: int
    embed: Any
    fields: list[str] | None


class NotProvided:
    """The type of :data:`NOT_PROVIDED`."""

    def __repr__(self) -> str:
        return "NOT_PROVIDED"


NOT_PROVIDED = NotProvided()
"""``put(ttl=NOT_PROVIDED)`` (the default) means the store's ``default_ttl``."""


class InvalidNamespaceError(ValueError):
    """A namespace is not a sequence of non-empty, dot-free string labels.

    Dots are refused, as in LangGraph, because a store that keeps the
    namespace in one text column joins the labels with ``"."``: a label
    containing one would then read back as two labels.
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
        # "Item" for search results too, as LangGraph prints them.
        args = ", ".join(f"{name}={value!r}" for name, value in self.dict().items())
        return f"Item({args})"


class SearchItem(Item):
    """An item returned by ``search``; ``score`` is the cosine similarity of
    its closest embedded text to the query (``None`` without a query, or for
    an item that was not embedded)."""

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
    """Value key -> expected value, or -> ``{operator: operand}`` using
    :data:`FILTER_OPERATORS`; every entry must match. A key is a path:
    ``"meta.author"`` looks inside ``meta``."""
    limit: int = 10
    offset: int = 0
    query: str | None = None
    """Natural-language query: with an index, results are ordered by
    similarity to it; without one it is ignored."""
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
    """Fields to embed for semantic search: ``None`` the index's ``fields``,
    ``False`` none (the item is stored but not embedded)."""
    ttl: float | None = None
    """Minutes until the item expires; only for stores with ``supports_ttl``."""


Op = Union[GetOp, SearchOp, PutOp, ListNamespacesOp]
Result = Union[Item, list[Item], list[SearchItem], list[tuple[str, ...]], None]


def _check_labels(namespace: object, *, what: str) -> None:
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(
            f"{what} must be a tuple of strings such as ('users', '42'), "
            f"got {type(namespace).__name__} {namespace!r}"
        )
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace!r}: labels must be "
                f"strings, got {type(label).__name__}"
            )
        if not label:
            raise InvalidNamespaceError(
                f"Namespace labels cannot be empty strings: {what} {namespace!r} has one"
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace!r}: labels cannot "
                f"contain periods ('.'); split it into separate labels or use another "
                f"separator such as '-'"
            )
        if "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace!r}: labels cannot "
                "contain NUL characters"
            )


def validate_op_namespace(op: Op) -> None:
    """Refuse an op whose namespace (or namespace pattern) has a label that is
    not a non-empty string free of ``'.'`` and NUL. An empty prefix and ``"*"``
    wildcards are fine; the rules only ``put`` has (a non-empty namespace not
    rooted at ``"langgraph"``) are checked by ``put``."""
    if isinstance(op, GetOp | PutOp):
        _check_labels(op.namespace, what="namespace")
    elif isinstance(op, SearchOp):
        _check_labels(op.namespace_prefix, what="namespace_prefix")
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            _check_labels(condition.path, what=f"{condition.match_type} pattern")


def _one_label_patterns(op: Op) -> Op:
    """``MatchCondition("suffix", "public")`` as the one-label pattern
    ``("public",)`` it means (LangGraph's stores read it one label per
    character, and match nothing)."""
    if not isinstance(op, ListNamespacesOp) or not any(
        isinstance(condition.path, str) for condition in op.match_conditions or ()
    ):
        return op
    conditions = tuple(
        MatchCondition(c.match_type, (c.path,)) if isinstance(c.path, str) else c
        for c in op.match_conditions or ()
    )
    return op._replace(match_conditions=conditions)


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    if not namespace:
        raise InvalidNamespaceError(
            "Namespace cannot be empty: give at least one label, e.g. ('memories',)"
        )
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph" (reserved), got {namespace!r}'
        )


def _as_namespace(namespace: object) -> Any:
    # Lists are accepted as LangGraph accepts them; a str is not a namespace
    # (it would read as one label per character) and is refused by the checks.
    return tuple(namespace) if isinstance(namespace, list) else namespace


def _check_page(limit: object, offset: object) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative int, got {number!r}")


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, got {type(key).__name__} {key!r}")
    if "\x00" in key:
        raise ValueError(f"key {key!r} contains a NUL character, which no store can keep")


class BaseStore(ABC):
    """A key-value store of dict documents under hierarchical namespaces.

    Implementations provide ``batch`` and ``abatch`` and call
    :meth:`validate_ops` on the ops they are given, so bad input fails with the
    same message whichever store runs it, before any op runs.
    """

    supports_ttl: bool = False
    """Whether ``put(..., ttl=...)`` is honoured; stores without TTLs refuse it
    rather than keep data the caller expects to expire."""
    ttl_config: TTLConfig | None = None
    index_config: IndexConfig | None = None
    refresh_on_read_default: bool = True
    """``refresh_on_read`` when the TTL config does not say."""

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` and return one result per op, in op order (``None`` for
        puts). As in LangGraph's stores, every read of a batch (get, search,
        list) sees the store as it was before the batch, then the writes
        apply in order, so the last write to a key wins: a SQL store then
        sends each kind of op as one statement, not one per op."""

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""

    def validate_ops(self, ops: Iterable[Op]) -> list[Op]:
        """Check every op before any runs, so an invalid batch changes nothing.

        Raises :class:`InvalidNamespaceError` (a ``ValueError``), ``ValueError``
        or ``TypeError`` naming the bad argument, and ``NotImplementedError``
        for TTLs the store does not support.
        """
        checked = [_one_label_patterns(op) for op in ops]
        for op in checked:
            self._validate_op(op)
        return checked

    def _validate_op(self, op: Op) -> None:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            _check_key(op.key)
        elif isinstance(op, PutOp):
            self._check_put(op)
        elif isinstance(op, SearchOp):
            if op.query is not None and not isinstance(op.query, str):
                raise TypeError(f"query must be a string, got {type(op.query).__name__}")
            parse_filter(op.filter)
            _check_page(op.limit, op.offset)
        elif isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(
                        f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
                    )
            if op.max_depth is not None and (
                isinstance(op.max_depth, bool)
                or not isinstance(op.max_depth, int)
                or op.max_depth < 1
            ):
                raise ValueError(f"max_depth must be a positive int, got {op.max_depth!r}")
            _check_page(op.limit, op.offset)
        else:
            raise TypeError(
                f"unknown store op {op!r}; expected GetOp, PutOp, SearchOp or ListNamespacesOp"
            )

    def _check_put(self, op: PutOp) -> None:
        if op.value is not None and not op.namespace:
            _check_put_namespace(op.namespace)
        _check_key(op.key)
        if op.value is not None and not isinstance(op.value, dict):
            raise TypeError(
                f"value for key {op.key!r} in namespace {op.namespace!r} must be a dict, "
                f"got {type(op.value).__name__}; wrap it, e.g. {{'data': value}}"
            )
        if op.index is not None and op.index is not False:
            if not isinstance(op.index, list) or not all(isinstance(f, str) for f in op.index):
                raise TypeError(
                    f"index must be None, False or a list of field paths, got {op.index!r}"
                )
            for path in op.index:
                tokenize_path(path)
        if op.ttl is not None and not self.supports_ttl:
            raise NotImplementedError(
                f"{type(self).__name__} does not expire items, so put(ttl={op.ttl!r}) "
                f"cannot be honoured; pass ttl=None and delete the item when it is stale"
            )
        if op.ttl is not None and (
            isinstance(op.ttl, bool) or not isinstance(op.ttl, int | float) or not op.ttl > 0
        ):
            raise ValueError(f"ttl must be a positive number of minutes or None, got {op.ttl!r}")

    def _checked(self, op: Op) -> list[Op]:
        """Validate one op before ``batch`` sees it, so a bad call reaches no
        store code (and, in a batching store, no other caller's batch)."""
        op = _one_label_patterns(op)
        self._validate_op(op)
        return [op]

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return refresh_ttl
        return bool((self.ttl_config or {}).get("refresh_on_read", self.refresh_on_read_default))

    def _put_op(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None,
        ttl: float | NotProvided | None,
    ) -> list[Op]:
        ns = _as_namespace(namespace)
        _check_labels(ns, what="namespace")
        _check_put_namespace(ns)
        if isinstance(ttl, NotProvided):
            ttl = (self.ttl_config or {}).get("default_ttl") if self.supports_ttl else None
        return self._checked(PutOp(ns, key, value, index, ttl))

    def _search_op(
        self,
        namespace_prefix: Sequence[str],
        query: str | None,
        filter: dict[str, Any] | None,
        limit: int,
        offset: int,
        refresh_ttl: bool | None,
    ) -> list[Op]:
        op = SearchOp(
            _as_namespace(namespace_prefix),
            filter,
            limit,
            offset,
            query,
            self._refresh(refresh_ttl),
        )
        return self._checked(op)

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item at ``namespace``/``key``, or ``None`` if there is none.

        ``refresh_ttl`` says whether reading restarts the item's TTL (``None``:
        the store's ``refresh_on_read``); stores without TTLs ignore it.
        """
        ops = self._checked(GetOp(_as_namespace(namespace), key, self._refresh(refresh_ttl)))
        return cast("Item | None", self.batch(ops)[0])

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Create or replace the item at ``namespace``/``key``. ``index``: the
        fields to embed (``None``: the index's, ``False``: none); ``ttl``:
        minutes until it expires (default: the store's ``default_ttl``)."""
        self.batch(self._put_op(namespace, key, value, index, ttl))

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item at ``namespace``/``key``; a missing item is not an error."""
        self.batch(self._checked(PutOp(_as_namespace(namespace), key, None)))

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
        matches ``filter``, paged by ``limit``/``offset``; with ``query`` and an
        index, most similar first."""
        ops = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast("list[SearchItem]", self.batch(ops)[0])

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
        (``"*"`` matches any label), truncated to ``max_depth`` labels, sorted."""
        ops = self._checked(_list_op(prefix, suffix, max_depth, limit, offset))
        return cast("list[tuple[str, ...]]", self.batch(ops)[0])

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Async :meth:`get`."""
        ops = self._checked(GetOp(_as_namespace(namespace), key, self._refresh(refresh_ttl)))
        return cast("Item | None", (await self.abatch(ops))[0])

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Async :meth:`put`."""
        await self.abatch(self._put_op(namespace, key, value, index, ttl))

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Async :meth:`delete`."""
        await self.abatch(self._checked(PutOp(_as_namespace(namespace), key, None)))

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
        ops = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast("list[SearchItem]", (await self.abatch(ops))[0])

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
        ops = self._checked(_list_op(prefix, suffix, max_depth, limit, offset))
        return cast("list[tuple[str, ...]]", (await self.abatch(ops))[0])


def _list_op(
    prefix: NamespacePath | None,
    suffix: NamespacePath | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> ListNamespacesOp:
    conditions: list[MatchCondition] = []
    if prefix is not None:
        conditions.append(MatchCondition("prefix", _as_namespace(prefix)))
    if suffix is not None:
        conditions.append(MatchCondition("suffix", _as_namespace(suffix)))
    return ListNamespacesOp(tuple(conditions) or None, max_depth, limit, offset)
