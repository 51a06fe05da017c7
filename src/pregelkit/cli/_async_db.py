"""The database named by ``--db`` opened with an async saver
(``AsyncSqliteSaver`` or ``AsyncPostgresSaver``), for the ``AsyncWorker``
that runs the ``async def`` workflows of ``pregelkit worker`` and
``pregelkit serve``. Opened in the event loop it is used on: an async
PostgreSQL pool belongs to the loop it was opened in. The location is
checked as ``_db.open_database`` checks it, and errors say the same."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pregelkit.cli._db import CONNECT_TIMEOUT_S, _check_sqlite_file, _is_postgres
from pregelkit.cli._errors import CliError
from pregelkit.cli._render import _short
from pregelkit.cli._secrets import Redactor

if TYPE_CHECKING:
    from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    Saver = AsyncSqliteSaver | AsyncPostgresSaver

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


@contextlib.asynccontextmanager
async def open_async_saver(location: str, *, pool_size: int) -> AsyncIterator[Saver]:
    """An async saver on ``location`` (created if missing), set up; on
    PostgreSQL over a pool of ``pool_size`` connections (an async worker's
    runs save concurrently)."""
    shown = Redactor().mask(location)
    if _is_postgres(location):
        async with _open_postgres(location, shown, pool_size) as saver:
            yield saver
        return
    if _SCHEME.match(location):
        raise CliError(
            f"unsupported database URL {shown!r}: --db takes a SQLite file path or a "
            "postgresql:// URL",
            kind="database",
        )
    if location != ":memory:":
        _check_sqlite_file(location, create=True)
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with contextlib.AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(location))
            await saver.setup()
        except sqlite3.Error as exc:
            raise CliError(f"cannot use the database {shown!r}: {exc}", kind="database") from None
        yield saver


@contextlib.asynccontextmanager
async def _open_postgres(dsn: str, shown: str, size: int) -> AsyncIterator[Saver]:
    try:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        raise CliError(
            f"the database {shown!r} needs psycopg: pip install 'pregelkit[postgres]'",
            kind="database",
        ) from None
    redact = Redactor([dsn])
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in dsn:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=size, kwargs=options, open=False
    )
    try:
        await pool.open(wait=True, timeout=options.get("connect_timeout", CONNECT_TIMEOUT_S))
    except Exception as exc:
        await pool.close()
        raise CliError(
            f"cannot connect to the database {shown!r}: {redact.mask(_short(str(exc), 300))}",
            kind="database",
        ) from None
    try:
        saver = AsyncPostgresSaver(pool)
        try:
            await saver.setup()
        except psycopg.Error as exc:
            raise CliError(
                f"database error on {shown!r}: {redact.mask(_short(str(exc), 300))}",
                kind="database",
            ) from None
        yield saver
    finally:
        await pool.close()
