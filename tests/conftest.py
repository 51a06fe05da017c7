"""Shared fixtures: a real PostgreSQL server, and savers of every kind.

``saver`` is a sync saver, once per kind: memory, sqlite (a file under
``tmp_path``), postgres (a pool on the test server). ``async_saver`` is the
async twin of each: memory, AsyncSqliteSaver, AsyncPostgresSaver. Each test
gets empty storage.

Async tests run their coroutines with the ``arun`` fixture, not
``asyncio.run``: the async PostgreSQL pool belongs to one event loop for the
whole session, and ``arun`` runs coroutines on it. (Memory and SQLite savers
work in any loop.)

PostgreSQL: the session starts its own server from the newest
``/usr/lib/postgresql/*/bin`` (``.ci/postgres-binaries`` installs it), unless
``PREGELKIT_TEST_PG_DSN`` names a server to use instead (its ``postgres``
database; the tests create and drop databases named ``pregelkit_*`` on it). A
missing server fails the tests that need it; it never skips them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from hypothesis import settings
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

import _pg_server

# A suite started in the background by a shell without job control (``cmd &``)
# inherits SIGINT ignored, and so would every interpreter the Ctrl-C tests
# start: Python installs its KeyboardInterrupt handler only where SIGINT is
# not ignored. A handler of our own is reset to the default in a child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest imports readline (capture.py's _readline_workaround), and GNU
# readline writes COLUMNS=80 and LINES=24 into the process's C environment.
# os.environ never shows them, but every child started without an env of its
# own inherits them: pytest-xdist's workers (in whose os.environ they then
# are), and so every ``pregelkit`` the tests start, whose tables honour
# COLUMNS even on a pipe and were cut at 80 cells. A test that wants a width
# sets COLUMNS itself.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)

# No per-example deadline: a slow moment of a busy machine is not a failure.
# Under CI the examples are derandomized, so a run explores what the previous
# one did and a red CI always points at the change, not at a new random draw.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "default")

T = TypeVar("T")

SAVER_KINDS = ["memory", "sqlite", "postgres"]
_TABLES = (
    "pregelkit_checkpoints, pregelkit_blobs, pregelkit_writes, pregelkit_thread_control, "
    "pregelkit_attempts"
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """DSN of the server's ``postgres`` database (the maintenance database)."""
    if dsn := os.environ.get("PREGELKIT_TEST_PG_DSN"):
        yield dsn
        return
    try:
        with _pg_server.postgres_server() as dsn:
            yield dsn
    except _pg_server.PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def _create_database(server_dsn: str, name: str) -> str:
    # pytest-xdist's workers each start a server of their own, but share the
    # one PREGELKIT_TEST_PG_DSN names: there each drops and makes its own
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get("PREGELKIT_TEST_PG_DSN"):
        name = f"{name}_{worker}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    if server_dsn.startswith(("postgresql://", "postgres://")):
        return urllib.parse.urlsplit(server_dsn)._replace(path=f"/{name}").geturl()
    return psycopg.conninfo.make_conninfo(server_dsn, dbname=name)


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: str) -> str:
    """DSN of a database for tests to use as they like (created empty once
    per session; tests that need isolation use unique thread ids or their
    own database)."""
    return _create_database(postgres_server, "pregelkit_test")


@pytest.fixture(scope="session")
def postgres_database(postgres_server: str) -> Callable[[str], str]:
    """Makes an empty database of the given name (dropping any old one) and
    returns its DSN."""
    return lambda name: _create_database(postgres_server, name)


@pytest.fixture(scope="session")
def _saver_pool(postgres_server: str) -> Iterator[ConnectionPool[Any]]:
    dsn = _create_database(postgres_server, "pregelkit_savers")
    with ConnectionPool(
        dsn, min_size=1, max_size=8, kwargs={"autocommit": True}, open=True
    ) as pool:
        PostgresSaver(pool).setup()
        yield pool


def truncate_saver_tables(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as conn:
        _empty(conn, _TABLES)


def _empty(conn: psycopg.Connection[Any], tables: str) -> None:
    """TRUNCATE ``tables``, failing the test (rather than hanging the run)
    if a session left open by an earlier test holds a lock on them."""
    try:
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '60s'")
            conn.execute(f"TRUNCATE {tables}")
    except psycopg.errors.LockNotAvailable:
        left = conn.execute(_LEFT_OPEN).fetchall()
        pytest.fail(f"an earlier test left PostgreSQL sessions in a transaction: {left}")


_LEFT_OPEN = """
SELECT pid, state, now() - state_change, query FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state IN ('idle in transaction', 'idle in transaction (aborted)')
"""


def _fail_on_open_transactions(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as conn:
        _no_open_transactions(conn)


def _no_open_transactions(conn: psycopg.Connection[Any]) -> None:
    """A session the test left idle inside a transaction holds its locks
    forever: the next test's TRUNCATE would hang the whole run. Name the test
    that left it instead, and end the session so the run goes on. (A session
    is given six seconds to finish what it was doing.)"""
    for _ in range(30):
        left = conn.execute(_LEFT_OPEN).fetchall()
        if not left:
            return
        conn.execute("SELECT pg_sleep(0.2)")
    for pid, *_ in left:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    pytest.fail(f"the test left PostgreSQL sessions idle in a transaction: {left}")


@pytest.fixture(scope="session")
def _loop_runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def arun(_loop_runner: asyncio.Runner) -> Callable[[Awaitable[T]], T]:
    """Runs a coroutine to completion on the session's event loop."""

    def run(coro: Awaitable[T]) -> T:
        async def main() -> T:
            return await coro

        return _loop_runner.run(main())

    return run


@pytest.fixture(scope="session")
def _async_saver_pool(
    postgres_server: str, _saver_pool: ConnectionPool[Any], _loop_runner: asyncio.Runner
) -> Iterator[AsyncConnectionPool[Any]]:
    dsn = _saver_pool.conninfo
    assert isinstance(dsn, str)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=8, kwargs={"autocommit": True}, open=False
    )
    _loop_runner.run(pool.open(wait=True))
    try:
        yield pool
    finally:
        _loop_runner.run(pool.close())


@pytest.fixture(params=SAVER_KINDS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """A sync saver with empty storage: memory, sqlite or postgres."""
    kind = request.param
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        with SqliteSaver.from_conn_string(str(tmp_path / "state.db")) as sqlite_saver:
            yield sqlite_saver
    else:
        pool = request.getfixturevalue("_saver_pool")
        truncate_saver_tables(pool)
        yield PostgresSaver(pool)
        _fail_on_open_transactions(pool)


@pytest.fixture(params=SAVER_KINDS)
def async_saver(
    request: pytest.FixtureRequest, tmp_path: Path, _loop_runner: asyncio.Runner
) -> Iterator[BaseCheckpointSaver[Any]]:
    """An async saver with empty storage: memory, AsyncSqliteSaver or
    AsyncPostgresSaver. Run coroutines that use it with ``arun``."""
    kind = request.param
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        opened = AsyncSqliteSaver.from_conn_string(str(tmp_path / "state.db"))
        yield _loop_runner.run(opened.__aenter__())
        _loop_runner.run(opened.__aexit__(None, None, None))
    else:
        pool = request.getfixturevalue("_async_saver_pool")
        truncate_saver_tables(request.getfixturevalue("_saver_pool"))
        # Built on the session loop, so its sync methods know which loop to use.
        yield _loop_runner.run(_make_async_postgres_saver(pool))
        _fail_on_open_transactions(request.getfixturevalue("_saver_pool"))


async def _make_async_postgres_saver(pool: AsyncConnectionPool[Any]) -> AsyncPostgresSaver:
    return AsyncPostgresSaver(pool)


# Stores: every kind behind one calling convention.

STORE_KINDS = ["memory", "sqlite", "async_sqlite", "postgres", "async_postgres"]


class StoreUnderTest:
    """A store and a way to call it: ``call("put", ...)`` runs ``put`` on a
    sync store, ``aput`` (on the session loop) on an async one."""

    def __init__(self, kind: str, store: Any, arun: Callable[[Awaitable[Any]], Any]) -> None:
        self.kind = kind
        self.store = store
        self.is_async = kind.startswith("async")
        self._arun = arun

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return self._arun(getattr(self.store, "a" + method)(*args, **kwargs))
        return getattr(self.store, method)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.kind} store>"

    def sweep_ttl(self) -> Any:
        # The TTL methods of async stores are coroutines under the same names.
        swept = self.store.sweep_ttl()
        return self._arun(swept) if self.is_async else swept

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        stopped = self.store.stop_ttl_sweeper(timeout)
        return self._arun(stopped) if self.is_async else stopped

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self.call(method, *args, **kwargs)


@pytest.fixture(scope="session")
def _store_dsn(postgres_server: str) -> str:
    from pregelkit.store.postgres import PostgresStore

    dsn = _create_database(postgres_server, "pregelkit_stores")
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
    return dsn


@pytest.fixture(params=STORE_KINDS)
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, _loop_runner: asyncio.Runner
) -> Iterator[Callable[..., StoreUnderTest]]:
    """Builds an empty store of each kind: ``make_store(index=..., ttl=...)``."""
    from contextlib import ExitStack

    kind: str = request.param
    exits = ExitStack()
    arun = request.getfixturevalue("arun")
    if kind.endswith("postgres"):
        dsn = request.getfixturevalue("_store_dsn")
        with psycopg.connect(dsn, autocommit=True) as conn:
            _empty(conn, "store, pregelkit_store_vectors")
    count = 0

    def make(**options: Any) -> StoreUnderTest:
        nonlocal count
        count += 1
        if kind == "memory":
            from pregelkit.store.memory import InMemoryStore

            return StoreUnderTest(kind, InMemoryStore(index=options.get("index")), arun)
        if kind == "sqlite":
            from pregelkit.store.sqlite import SqliteStore

            path = str(tmp_path / "store.db")
            return StoreUnderTest(
                kind, exits.enter_context(SqliteStore.from_conn_string(path, **options)), arun
            )
        if kind == "async_sqlite":
            from pregelkit.store.sqlite.aio import AsyncSqliteStore

            opened = AsyncSqliteStore.from_conn_string(str(tmp_path / "store.db"), **options)
            store = _loop_runner.run(opened.__aenter__())
            exits.callback(lambda: _loop_runner.run(opened.__aexit__(None, None, None)))
            return StoreUnderTest(kind, store, arun)
        if kind == "postgres":
            from pregelkit.store.postgres import PostgresStore

            opened_pg = PostgresStore.from_conn_string(dsn, **options)
            return StoreUnderTest(kind, exits.enter_context(opened_pg), arun)
        from pregelkit.store.postgres.aio import AsyncPostgresStore

        opened_apg = AsyncPostgresStore.from_conn_string(dsn, **options)
        store = _loop_runner.run(opened_apg.__aenter__())
        exits.callback(lambda: _loop_runner.run(opened_apg.__aexit__(None, None, None)))
        return StoreUnderTest(kind, store, arun)

    with exits:
        yield make
    if kind.endswith("postgres"):
        with psycopg.connect(dsn, autocommit=True) as conn:
            _no_open_transactions(conn)


# the run queue and its workers (test_worker*.py)

_QUEUE_TABLES = (
    "pregelkit_checkpoints, pregelkit_blobs, pregelkit_writes, pregelkit_thread_control, "
    "pregelkit_attempts, pregelkit_runs, pregelkit_workers, pregelkit_messages, pregelkit_events, "
    "pregelkit_retention, pregelkit_queues, pregelkit_queue_starts, fleet_log"
)


@pytest.fixture(scope="module")
def _queue_pg(postgres_database: Any) -> Iterator[tuple[str, ConnectionPool[Any]]]:
    import fleet_flows

    dsn = postgres_database("pregelkit_fleet")
    with ConnectionPool(dsn, min_size=1, max_size=12, kwargs={"autocommit": True}) as pool:
        PostgresSaver(pool).setup()
        fleet_flows.create_log(dsn)
        yield dsn, pool


@pytest.fixture(params=["sqlite", "postgres"])
def queue_db(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Any]]:
    """(URL, saver) of an empty queue database; fleet_flows logs to it."""
    import fleet_flows

    if request.param == "sqlite":
        path = str(tmp_path / "queue.db")
        with SqliteSaver.from_conn_string(path) as saver:
            saver.setup()
            fleet_flows.create_log(path)
            monkeypatch.setenv("FLEET_DB", path)
            yield path, saver
        return
    dsn, pool = request.getfixturevalue("_queue_pg")
    with pool.connection() as conn:
        _empty(conn, _QUEUE_TABLES)
    monkeypatch.setenv("FLEET_DB", dsn)
    yield dsn, PostgresSaver(pool)
    _fail_on_open_transactions(pool)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for a module's browser tests (``chromium.py``)."""
    from chromium import launched

    with launched() as chromium:
        yield chromium
