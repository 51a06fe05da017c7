"""The storage plan vocabulary: what the savers, the stores and the run queue
do, written once for sync and async code and for SQLite and PostgreSQL.

An operation is a *plan*: a generator that yields the effects it needs (most
often a :class:`Statement`) and is sent back what came of each, or has the
error thrown into it; it returns the operation's result. Which statements
run, with which parameters, in which order, and how rows become results are
decided in plans alone. A driver performs the effects over its own
connections, with :func:`drive` (sync) or :func:`adrive` (async): the
statements with :func:`execute` or :func:`aexecute`, and whatever other
effects its plans yield (a pause, a lock, a transaction of its own).
SQLite's async drivers are the sync ones on a worker thread.

Plans compose (:func:`sequence`): a step's saves are one plan, which a
driver runs as one transaction (SQLite) or one pipeline (PostgreSQL).

This module knows no database driver: a cursor is anything with DB-API's
``execute``, ``executemany``, ``fetchone``, ``fetchall`` and ``rowcount``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from types import ModuleType, TracebackType
from typing import Any, Generic, Literal, TypeAlias, TypeVar

__all__ = [
    "all_statements",
    "Dialect",
    "Fetch",
    "Plan",
    "Run",
    "Statement",
    "Together",
    "Whole",
    "adrive",
    "aexecute",
    "afetched",
    "done",
    "drive",
    "ended",
    "execute",
    "fetched",
    "migrate",
    "sequence",
]

T = TypeVar("T")

Plan: TypeAlias = Generator[Any, Any, T]
"""Yields effects, is sent their results, returns the operation's result."""

Fetch: TypeAlias = Literal["one", "all", "many", "count"] | None


class Statement:
    """Run ``sql`` with ``params``. ``fetch``: ``"one"`` sends back the first
    row (or ``None``), ``"all"`` every row, ``"many"`` runs the statement once
    per parameter row (``executemany``), ``"count"`` sends back how many rows
    it changed; otherwise ``None``. ``later``: a write a read-only plan makes
    (restarting TTLs), which a driver may run in a transaction of its own
    after the plan's.

    A class with slots, neither a dataclass nor a NamedTuple: a run makes a
    dozen, a frozen dataclass costs several times more to build, and a
    NamedTuple's ``__new__`` is a Python function called through ``type``
    (twice the cost of this ``__init__``)."""

    __slots__ = ("fetch", "later", "params", "sql")

    def __init__(
        self, sql: str, params: Any = (), fetch: Fetch = None, later: bool = False
    ) -> None:
        self.sql, self.params, self.fetch, self.later = sql, params, fetch, later

    def __repr__(self) -> str:
        return f"Statement({self.sql!r}, {self.params!r}, {self.fetch!r}, later={self.later!r})"


class Together(tuple[Statement, ...]):
    """Statements a plan yields as one effect because none needs another's
    result: a driver may send them all before it waits for the first
    result (PostgreSQL: one pipeline, with the transaction's BEGIN, one
    round trip); elsewhere they run one after another. Sends back each
    one's result, in order. Fetches ``"one"``, ``"all"`` or none (a
    pipeline knows a row count only once synced)."""

    __slots__ = ()


class Whole(Together):
    """``Together`` as a plan's last effect: the whole of its transaction,
    so a driver may send the COMMIT with them too (PostgreSQL: BEGIN, the
    statements and COMMIT as one simple query, one round trip, the
    transaction's locks held for no client round trip). The plan returns
    once it is sent their results; it yields nothing after."""

    __slots__ = ()


class Dialect:
    """How one database spells SQL written once for all: placeholders are
    written ``?`` and become the database's own. Subclasses add the
    statements that differ by more than that."""

    placeholder: str = "?"

    def sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def statement(self, sql: str, params: Any = (), fetch: Fetch = None) -> Statement:
        return Statement(self.sql(sql), params, fetch)


class Run(Generic[T]):
    """A plan started: its code up to the first effect has run (argument
    checks, encoding), so a driver can see that a plan has nothing to do
    before it takes a connection. ``effect`` is what it waits for, ``None``
    once it has returned ``result``. Perform the effect inside ``with run:``
    and set ``run.value``: leaving the block sends the plan that value, or
    throws the error raised in the block into it."""

    __slots__ = ("effect", "plan", "result", "value")

    def __init__(self, plan: Plan[T]) -> None:
        self.plan = plan
        self.value: Any = None
        self.result: T
        try:
            self.effect: Any = plan.send(None)
        except StopIteration as done:
            self.effect = None
            self.result = done.value

    def __enter__(self) -> Run[T]:
        self.value = None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            if exc is None:
                self.effect = self.plan.send(self.value)
            else:
                self.effect = self.plan.throw(exc)
        except StopIteration as done:
            self.effect = None
            self.result = done.value
        return True


def ended(run: Run[T]) -> T:
    """The result of ``run``, sent the results of its ``Whole`` effect: the
    transaction is over, so the plan must have returned."""
    if run.effect is not None:
        raise RuntimeError(f"a plan yielded {run.effect!r} after its Whole effect")
    return run.result


def drive(plan: Plan[T] | Run[T], perform: Callable[[Any], Any]) -> T:
    """Run ``plan`` to its end, performing each effect with ``perform``; an
    error ``perform`` raises is thrown into the plan. (``adrive``'s loop,
    written out without the ``with``: every sync storage call comes here.)"""
    if isinstance(plan, Run):
        gen, effect = plan.plan, plan.effect
        if effect is None:
            return plan.result
    else:
        gen = plan
        try:
            effect = gen.send(None)
        except StopIteration as done:
            first: T = done.value
            return first
    try:
        while True:
            try:
                value = perform(effect)
            except BaseException as exc:
                effect = gen.throw(exc)
            else:
                effect = gen.send(value)
    except StopIteration as done:
        result: T = done.value
        return result


async def adrive(plan: Plan[T] | Run[T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """:func:`drive` with an async ``perform``."""
    run = plan if isinstance(plan, Run) else Run(plan)
    while run.effect is not None:
        with run:
            run.value = await perform(run.effect)
    return run.result


def done(result: T) -> Plan[T]:
    """A plan that runs no statement and returns ``result``."""
    yield from ()
    return result


def sequence(*plans: Plan[Any]) -> Plan[list[Any]]:
    """One plan doing ``plans`` one after another; returns their results."""
    results = []
    for plan in plans:
        results.append((yield from plan))
    return results


def migrate(sql: ModuleType, tables: str) -> Plan[None]:
    """Create or migrate the tables ``sql`` (a module) spells, in the
    caller's transaction: ``MIGRATIONS[N - 1]`` is migration N, and the
    ``pregelkit_migrations``-style table (``CREATE_MIGRATIONS_TABLE``,
    ``SELECT_SCHEMA_VERSION``, ``RECORD_MIGRATION``) says how far a database
    got. A schema newer than this code is refused: writing rows an unknown
    migration changed could corrupt them."""
    migrations: Sequence[Sequence[str]] = sql.MIGRATIONS
    yield Statement(sql.CREATE_MIGRATIONS_TABLE)
    (current,) = yield Statement(sql.SELECT_SCHEMA_VERSION, (), "one")
    if current > len(migrations):
        raise RuntimeError(
            f"the {tables} are at schema version {current}, newer than this pregelkit knows "
            f"({len(migrations)}): upgrade pregelkit to use them"
        )
    for version in range(current + 1, len(migrations) + 1):
        for statement in migrations[version - 1]:
            yield Statement(statement)
        yield Statement(sql.RECORD_MIGRATION, (version,))


def all_statements(sql: ModuleType) -> tuple[str, ...]:
    """Every statement of ``sql.MIGRATIONS``, in order: what a new database
    runs (the ``MIGRATIONS`` LangGraph's savers and stores list, for reading)."""
    return tuple(statement for version in sql.MIGRATIONS for statement in version)


def execute(cursor: Any, statement: Statement | Together) -> Any:
    """Perform ``statement`` on a DB-API cursor (or a ``sqlite3`` connection)."""
    if isinstance(statement, Together):
        return [execute(cursor, each) for each in statement]
    if statement.fetch == "many":
        rows = statement.params
        if len(rows) == 1:  # one row: no batch machinery (psycopg's is a pipeline)
            cursor.execute(statement.sql, rows[0])
        else:
            cursor.executemany(statement.sql, rows)
        return None
    return fetched(cursor.execute(statement.sql, statement.params), statement)


def fetched(cursor: Any, statement: Statement) -> Any:
    """What ``statement`` sends back, from the ``cursor`` that ran it."""
    fetch = statement.fetch
    if fetch is None:
        return None
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    return cursor.rowcount


async def aexecute(cursor: Any, statement: Statement | Together) -> Any:
    """:func:`execute` on an async cursor (psycopg's)."""
    if isinstance(statement, Together):
        return [await aexecute(cursor, each) for each in statement]
    if statement.fetch == "many":
        rows = statement.params
        if len(rows) == 1:
            await cursor.execute(statement.sql, rows[0])
        else:
            await cursor.executemany(statement.sql, rows)
        return None
    await cursor.execute(statement.sql, statement.params)
    return await afetched(cursor, statement)


async def afetched(cursor: Any, statement: Statement) -> Any:
    """:func:`fetched` from an async cursor."""
    fetch = statement.fetch
    if fetch is None:
        return None
    if fetch == "one":
        return await cursor.fetchone()
    if fetch == "all":
        return await cursor.fetchall()
    return cursor.rowcount
