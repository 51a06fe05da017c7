"""What SqliteStore and PostgresStore (sync and async) do, written once.

A batch is a plan (``pregelkit._internal._plan``): it yields the statements
to run and is sent back their rows. The stores only run those statements over
their own connections (one transaction per batch); which statements run,
with which parameters, in which order, and how rows become items is decided
here, over a :class:`Dialect` that knows each database's SQL.

Every value a caller gives (namespace, key, filter key and operand, TTL,
query vector) reaches SQL as a bound parameter; the SQL text depends only on
the shape of the op (how many filter conditions, whether there is a query).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, TypeAlias, cast

from pregelkit._internal import _clock, _plan
from pregelkit._internal._plan import Statement
from pregelkit.store import _index, _namespaces
from pregelkit.store._filter import Condition, for_sql, has_nul, parse_filter
from pregelkit.store._index import Embedded
from pregelkit.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

__all__ = ["Dialect", "Plan", "SqlStore", "run_batch", "sweep"]

Deserializer = Callable[[Any], dict[str, Any]]


Plan: TypeAlias = _plan.Plan[Any]

# Columns every item query selects, in this order.
ITEM_COLUMNS = "prefix, key, value, created_at, updated_at, ttl_minutes"

UPSERT = """
    ON CONFLICT (prefix, key) DO UPDATE SET
        value = excluded.value,
        created_at = CASE
            WHEN s.expires_at <= excluded.updated_at THEN excluded.created_at
            ELSE s.created_at END,
        updated_at = excluded.updated_at,
        expires_at = excluded.expires_at,
        ttl_minutes = excluded.ttl_minutes
"""
"""How a put meets the item it replaces (the items table aliased ``s``): an
expired one is replaced as a new item, a live one keeps its ``created_at``."""


class Dialect(_plan.Dialect, ABC):
    """One database's SQL for the plans. The statements of a batch's writes
    default to one per row (``executemany``), which costs nothing extra in an
    embedded database; a server's dialect sends each kind as one statement."""

    upsert_item: str
    """Params: namespace text, key, value, now, now, expires_at, ttl_minutes."""
    delete_item: str
    """Params: namespace text, key."""
    delete_vectors: str
    """Params: namespace text, key."""
    insert_vector: str
    """Params per row: namespace text, key, field, vector."""
    refresh_ttl: str
    """Params per row: now, namespace text, key."""
    select_namespaces: str
    """Params: now; one namespace text per row."""
    select_namespaces_under: str
    """Params: now, prefix text, lower bound, upper bound."""
    sweep_vectors: str
    """Params: now."""
    sweep: str
    """Params: now."""

    @abstractmethod
    def select_items(self, keys: list[tuple[str, str]], now: Any) -> Statement:
        """The statement reading the items at ``keys`` (namespace text, key,
        no two equal) not expired at ``now``: rows of ``ITEM_COLUMNS``."""

    def upsert_items(self, rows: list[tuple[Any, ...]]) -> Statement:
        """Write ``rows`` (``upsert_item``'s params; no two for one key)."""
        return Statement(self.upsert_item, rows, "many")

    def delete_items(self, keys: list[tuple[str, str]]) -> Statement:
        return Statement(self.delete_item, keys, "many")

    def delete_vectors_of(self, keys: list[tuple[str, str]]) -> Statement:
        return Statement(self.delete_vectors, keys, "many")

    def insert_vectors(self, rows: list[tuple[Any, ...]]) -> Statement:
        return Statement(self.insert_vector, rows, "many")

    def refresh(self, now: Any, keys: list[tuple[str, str]]) -> Statement:
        """The statement restarting the TTLs of ``keys`` (namespace text,
        key): ``refresh_ttl`` once per key."""
        return Statement(self.refresh_ttl, [(now, text, key) for text, key in keys], "many", True)

    @abstractmethod
    def time(self, moment: datetime) -> Any: ...

    @abstractmethod
    def from_time(self, value: Any) -> datetime: ...

    @abstractmethod
    def encode_value(self, value: dict[str, Any]) -> str: ...

    @abstractmethod
    def encode_vector(self, vector: list[float]) -> Any: ...

    @abstractmethod
    def search(
        self,
        op: SearchOp,
        conditions: list[Condition],
        query: list[float] | None,
        now: Any,
    ) -> tuple[str, list[Any]]:
        """SQL and params returning ``ITEM_COLUMNS`` plus a score column."""


def wall_time() -> datetime:
    """Now, by the process's clock (``pregelkit._internal._clock``): a TTL
    is a stored expiry time like a durable wait's wake time, so a test's
    ``FakeClock`` expires items as it wakes runs."""
    return datetime.fromtimestamp(_clock.clock().now(), UTC)


class Clock:
    """Write times that strictly increase within a process, so "newest
    first" is the order of the writes even within one clock tick. Only
    while the process keeps one clock: the times a test's ``FakeClock``
    gave do not hold back the real clock's after it ends."""

    def __init__(self) -> None:
        self._last = datetime.min.replace(tzinfo=UTC)
        self._source: object = None
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            source = _clock.clock()
            now = datetime.fromtimestamp(source.now(), UTC)
            if source is self._source and now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last, self._source = now, source
            return now


clock = Clock()


def run_batch(
    dialect: Dialect,
    ops: Sequence[Op],
    embedded: Embedded | None,
    deserialize: Deserializer,
    omit_expired: bool = False,
) -> Plan:
    """The plan of one batch, run as LangGraph's stores run one: every read
    (get, search, list) sees the store as it was before the batch, then the
    writes apply, the last write to a key winning. So reads of one kind go
    out as one statement (all gets in one ``SELECT``, equal searches or
    listings once) and writes as one per kind, whatever the batch's size;
    returns one result per op, in op order.

    ``omit_expired``: leave expired, not yet swept items out of reads
    (LangGraph's ``TTLConfig`` option, off by default: until the sweeper
    deletes them, expired items are read as live ones)."""
    now = wall_time()
    horizon = _horizon(dialect, now, omit_expired)
    results: list[Result] = [None] * len(ops)
    gets: dict[tuple[str, str], list[int]] = {}
    reads: dict[object, list[int]] = {}
    writes: dict[tuple[str, str], int] = {}
    for position, op in enumerate(ops):
        if isinstance(op, GetOp):
            gets.setdefault((_namespaces.encode(op.namespace), op.key), []).append(position)
        elif isinstance(op, PutOp):
            target = (_namespaces.encode(op.namespace), op.key)
            writes.pop(target, None)  # re-inserted: the writes stay in the order they win
            writes[target] = position
        else:
            reads.setdefault(_read_key(op, position), []).append(position)
    stale: dict[tuple[str, str], None] = {}
    if gets:
        yield from _get(dialect, ops, gets, horizon, deserialize, results, stale)
    for positions in reads.values():
        op = ops[positions[0]]
        if isinstance(op, SearchOp):
            query = None if embedded is None else embedded.queries.get(positions[0])
            yield from _search(dialect, op, positions, query, horizon, deserialize, results, stale)
        else:
            assert isinstance(op, ListNamespacesOp)
            yield from _list_namespaces(dialect, op, positions, horizon, results)
    if stale:
        yield dialect.refresh(dialect.time(now), list(stale))
    if writes:
        yield from _write(dialect, ops, writes, embedded)
    return results


_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
"""Before any expiry time: reads that keep expired items compare with it."""


def _horizon(dialect: Dialect, now: datetime, omit_expired: bool) -> Any:
    """The time reads compare expiry times with."""
    return dialect.time(now if omit_expired else _EARLIEST)


def get_one(dialect: Dialect, op: GetOp, omit_expired: bool) -> Statement:
    """The one ``SELECT`` of a lone get, without a plan: a store's most
    common call, for stores that take it straight (see ``found_one``)."""
    key = (_namespaces.encode(op.namespace), op.key)
    return dialect.select_items([key], _horizon(dialect, wall_time(), omit_expired))


def found_one(
    dialect: Dialect, op: GetOp, rows: Sequence[Sequence[Any]], deserialize: Deserializer
) -> Item | Literal[False] | None:
    """The item ``get_one``'s rows hold; ``False`` when reading it must
    restart its TTL, a write the batch plan makes (run the op as a batch)."""
    if not rows:
        return None
    row = rows[0]
    if op.refresh_ttl and row[5] is not None:
        return False
    return _item(dialect, row, deserialize)


def _read_key(op: Op, position: int) -> object:
    """Equal reads in one batch have equal keys and are run once (they see
    the same store); a read whose op cannot be hashed is run on its own."""
    if isinstance(op, SearchOp):
        return ("search", repr(op))
    try:
        hash(op)
    except TypeError:
        return ("unhashable", position)
    return op


def omits_expired(ttl_config: Mapping[str, Any] | None) -> bool:
    """A store's ``omit_expired``, read at each batch (LangGraph's tests set
    it on a store already built)."""
    return bool((ttl_config or {}).get("omit_expired"))


def one_statement(ops: Sequence[Op], indexed: bool) -> bool:
    """Whether the plan of ``ops`` runs at most one statement (its TTL
    refreshes aside, which may commit on their own): such a batch needs no
    transaction block, and a server store saves the BEGIN and COMMIT round
    trips."""
    kinds: set[str] = set()
    for op in ops:
        if isinstance(op, GetOp):
            kinds.add("get")
        elif isinstance(op, PutOp):
            if indexed:
                return False
            kinds.add("upsert" if op.value is not None else "delete")
        else:
            return len(ops) == 1
    return len(kinds) <= 1


def _get(
    dialect: Dialect,
    ops: Sequence[Op],
    gets: dict[tuple[str, str], list[int]],
    horizon: Any,
    deserialize: Deserializer,
    results: list[Result],
    stale: dict[tuple[str, str], None],
) -> Plan:
    rows = yield dialect.select_items(list(gets), horizon)
    for row in rows:
        positions = gets[(row[0], row[1])]
        for position in positions:
            results[position] = _item(dialect, row, deserialize)
        if row[5] is not None and any(cast(GetOp, ops[p]).refresh_ttl for p in positions):
            stale[(row[0], row[1])] = None


def _write(
    dialect: Dialect,
    ops: Sequence[Op],
    writes: dict[tuple[str, str], int],
    embedded: Embedded | None,
) -> Plan:
    deleted: list[tuple[str, str]] = []
    rows: list[tuple[Any, ...]] = []
    vectors: list[tuple[Any, ...]] = []
    for (text, key), position in writes.items():
        op = ops[position]
        assert isinstance(op, PutOp)
        if op.value is None:
            deleted.append((text, key))
            continue
        now = clock()
        ttl = None if op.ttl is None else float(op.ttl)
        expires = None if ttl is None else dialect.time(now + timedelta(minutes=ttl))
        stamp = dialect.time(now)
        rows.append((text, key, dialect.encode_value(op.value), stamp, stamp, expires, ttl))
        if embedded is not None:
            vectors.extend(
                (text, key, field, dialect.encode_vector(vector))
                for field, vector in embedded.documents.get(position, [])
            )
    # In key order, so two batches writing the same keys lock them in the
    # same order and cannot deadlock each other.
    if deleted:
        yield dialect.delete_items(sorted(deleted))
    if rows:
        yield dialect.upsert_items(sorted(rows, key=lambda row: (row[0], row[1])))
    if embedded is not None:
        yield dialect.delete_vectors_of(sorted(writes))
        if vectors:
            yield dialect.insert_vectors(sorted(vectors, key=lambda row: row[:3]))


def _search(
    dialect: Dialect,
    op: SearchOp,
    positions: list[int],
    query: list[float] | None,
    horizon: Any,
    deserialize: Deserializer,
    results: list[Result],
    stale: dict[tuple[str, str], None],
) -> Plan:
    conditions = for_sql(parse_filter(op.filter))
    if conditions is None:
        for position in positions:
            results[position] = []
        return
    sql, params = dialect.search(op, conditions, query, horizon)
    rows = yield Statement(sql, params, "all")
    if op.refresh_ttl:
        stale.update(((row[0], row[1]), None) for row in rows if row[5] is not None)
    for position in positions:
        results[position] = [
            SearchItem(
                _namespaces.decode(row[0]),
                row[1],
                deserialize(row[2]),
                dialect.from_time(row[3]),
                dialect.from_time(row[4]),
                None if row[6] is None else float(row[6]),
            )
            for row in rows
        ]


def _list_namespaces(
    dialect: Dialect,
    op: ListNamespacesOp,
    positions: list[int],
    horizon: Any,
    results: list[Result],
) -> Plan:
    prefix = _namespaces.literal_prefix(op)
    if prefix:
        rows = yield Statement(
            dialect.select_namespaces_under, (horizon, *_namespaces.prefix_bounds(prefix)), "all"
        )
    else:
        rows = yield Statement(dialect.select_namespaces, (horizon,), "all")
    found = _namespaces.list_namespaces([_namespaces.decode(row[0]) for row in rows], op)
    for position in positions:
        results[position] = list(found)


def _item(dialect: Dialect, row: Sequence[Any], deserialize: Deserializer) -> Item:
    return Item(
        value=deserialize(row[2]),
        key=row[1],
        namespace=_namespaces.decode(row[0]),
        created_at=dialect.from_time(row[3]),
        updated_at=dialect.from_time(row[4]),
    )


def sweep(dialect: Dialect) -> Plan:
    """Delete expired items (and their vectors); returns how many."""
    now = dialect.time(wall_time())
    yield Statement(dialect.sweep_vectors, (now,))
    count = yield Statement(dialect.sweep, (now,), "count")
    return int(count or 0)


def encode_json(value: dict[str, Any]) -> str:
    """``value`` as the JSON text the SQL stores keep, or a clear error."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"value {value!r} cannot be stored as JSON ({exc}); store JSON data: dicts, "
            "lists, strings, finite numbers, booleans and None"
        ) from None
    if "\\u0000" in text and has_nul(value):
        raise ValueError(
            "the value has a string containing a NUL character, which SQL stores cannot "
            "keep or compare; remove it or encode the string (e.g. base64)"
        )
    return text


class SqlStore(BaseStore):
    """What the SQL stores share: their configuration and each batch's plan.
    A store runs the plan over its own connections."""

    MIGRATIONS: ClassVar[tuple[str, ...]]
    """The SQL statements ``setup()`` runs on a new database, in order (as
    LangGraph's savers and stores list theirs); for reading: ``setup()``
    keeps its own copy and records how far a database got."""

    supports_ttl = True
    _dialect: ClassVar[Dialect]

    def _configure(
        self,
        deserializer: Callable[[Any], dict[str, Any]] | None,
        index: IndexConfig | Mapping[str, Any] | None,
        ttl: TTLConfig | None,
    ) -> None:
        self._index = None if index is None else _index.Index(index)
        self.index_config: IndexConfig | None = None if index is None else dict(index)  # type: ignore[assignment]
        self.embeddings = None if self._index is None else self._index.user_embeddings
        self.ttl_config: TTLConfig | None = ttl
        self._deserialize = deserializer or json.loads
        self._ready = False

    def _plan(self, ops: list[Op], embedded: Embedded | None) -> Plan:
        omit = omits_expired(self.ttl_config)
        return run_batch(self._dialect, ops, embedded, self._deserialize, omit)

    def _single(self, ops: list[Op]) -> bool:
        return one_statement(ops, self._index is not None)
