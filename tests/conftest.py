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
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
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

# No per-example deadline: a slow moment of a busy machine is not a failure.
# Under CI the examples are derandomized, so a run explores what the previous
# one did and a red CI always points at the change, not at a new random draw.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "default")

T = TypeVar("T")

SAVER_KINDS = ["memory", "sqlite", "postgres"]
_TABLES = "pregelkit_checkpoints, pregelkit_blobs, pregelkit_writes, pregelkit_thread_control"


def _postgres_bin() -> Path:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parts[4].split(".")],
    )
    if not found:
        pytest.fail(
            "PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/initdb. Install it "
            "with `bash .ci/postgres-binaries` (or `apt-get install postgresql`), or set "
            "PREGELKIT_TEST_PG_DSN to a server to use.",
            pytrace=False,
        )
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.fail(
            f"{what} failed ({' '.join(cmd)}):\n{done.stdout}\n{done.stderr}", pytrace=False
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """DSN of the server's ``postgres`` database (the maintenance database)."""
    if dsn := os.environ.get("PREGELKIT_TEST_PG_DSN"):
        yield dsn
        return
    bindir = _postgres_bin()
    root = tempfile.mkdtemp(prefix="pregelkit-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail(
                "running as root, PostgreSQL must run as the `postgres` user, which does not "
                "exist: install the `postgresql` package (`bash .ci/postgres-binaries`) or "
                "create the user",
                pytrace=False,
            )
        os.chown(root, entry.pw_uid, entry.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log, port = os.path.join(root, "data"), os.path.join(root, "log"), _free_port()
    try:
        _run(
            [*as_user, str(bindir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-locale", "--no-sync"],
            "initdb",
        )  # fmt: skip
        options = (
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        _run(
            [*as_user, str(bindir / "pg_ctl"), "-D", data, "-l", log, "-o", options, "-w",
             "-t", "60", "start"],
            f"starting PostgreSQL (log: {log})",
        )  # fmt: skip
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
        finally:
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                capture_output=True,
                check=False,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _create_database(server_dsn: str, name: str) -> str:
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


def _truncate(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as conn:
        conn.execute(f"TRUNCATE {_TABLES}")


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
        _truncate(pool)
        yield PostgresSaver(pool)


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
        _truncate(request.getfixturevalue("_saver_pool"))
        # Built on the session loop, so its sync methods know which loop to use.
        yield _loop_runner.run(_make_async_postgres_saver(pool))


async def _make_async_postgres_saver(pool: AsyncConnectionPool[Any]) -> AsyncPostgresSaver:
    return AsyncPostgresSaver(pool)
