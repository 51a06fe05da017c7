"""The database named by ``--db``: a SQLite file or a PostgreSQL URL, opened
with its checkpoint saver, checked before use so a typo never creates one.
Messages name the database with its password masked."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pregelkit.cli._errors import CliError
from pregelkit.cli._render import _short
from pregelkit.cli._secrets import Redactor

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver


DEFAULT_DB = "pregelkit.sqlite"
ENTRYPOINT_KEY = "pregelkit_entrypoint"
"""Checkpoint metadata key holding the ``MODULE:NAME`` a thread was started with."""
TARGET_KEY = "pregelkit_target"
"""Checkpoint metadata key holding where that workflow was found (see ``_target``)."""
CONNECT_TIMEOUT_S = 10
"""How long to wait for a PostgreSQL server unless the URL says otherwise."""

_KEYWORD_DSN = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|service|sslmode|connect_timeout)\s*="
)


@dataclass
class Database:
    """The saver for ``--db`` plus the few catalogue queries the savers do not
    offer (which threads exist, and a thread's metadata without loading it)."""

    location: str
    """As given, password included: never print it, print ``shown``."""
    saver: BaseCheckpointSaver[Any]
    kind: str
    conn: Any = field(repr=False)

    @property
    def shown(self) -> str:
        """The location as it may be printed: password masked."""
        return Redactor().mask(self.location)

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.kind == "postgres":
            sql = sql.replace("?", "%s")
        rows: list[tuple[Any, ...]] = self.conn.execute(sql, params).fetchall()
        return rows

    def threads(self) -> list[str]:
        """Every thread, the most recently saved first (checkpoint ids grow
        with time), so ``threads --limit N`` reads only the rows it shows."""
        rows = self._rows(
            "SELECT thread_id, MAX(checkpoint_id) AS latest FROM pregelkit_checkpoints "
            "WHERE checkpoint_ns = ? GROUP BY thread_id ORDER BY latest DESC, thread_id",
            ("",),
        )
        return [str(r[0]) for r in rows]

    def has_thread(self, thread_id: str) -> bool:
        rows = self._rows(
            "SELECT 1 FROM pregelkit_checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
        )
        return bool(rows)

    def checkpoint_count(self, thread_id: str) -> int:
        rows = self._rows(
            "SELECT count(*) FROM pregelkit_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ""),
        )
        return int(rows[0][0])

    def entrypoint_of(self, thread_id: str) -> str | None:
        """The ``MODULE:NAME`` the thread was started with."""
        value = self.metadata_of(thread_id).get(ENTRYPOINT_KEY)
        return value if isinstance(value, str) else None

    def metadata_of(self, thread_id: str) -> dict[str, Any]:
        """The latest root checkpoint's metadata, read from its JSON copy (so
        nothing stored is unpickled); empty if there is none."""
        rows = self._rows(
            "SELECT metadata_json FROM pregelkit_checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ""),
        )
        if not rows:
            return {}
        meta = rows[0][0]
        if isinstance(meta, (str, bytes)):
            try:
                meta = json.loads(meta)
            except ValueError:
                return {}
        return meta if isinstance(meta, dict) else {}

    def task_paths(self, thread_id: str, checkpoint_id: str) -> dict[str, str]:
        """task id -> task path of the checkpoint's pending writes (the path
        names the node, or the node whose call made a functional task)."""
        rows = self._rows(
            "SELECT DISTINCT task_id, task_path FROM pregelkit_writes WHERE thread_id = ? "
            "AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread_id, "", checkpoint_id),
        )
        return {str(task_id): str(path) for task_id, path in rows}

    def is_running(self, thread_id: str) -> bool:
        """Whether a run holds the thread right now, seen without taking its lock."""
        if self.kind == "postgres":
            from pregelkit.checkpoint.postgres._sql import thread_lock_key

            key = thread_lock_key(thread_id) & 0xFFFF_FFFF_FFFF_FFFF
            rows = self._rows(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid = ?::bigint::oid AND objid = ?::bigint::oid AND objsubid = 1",
                (key >> 32, key & 0xFFFF_FFFF),
            )
            return bool(rows)
        running = getattr(self.saver, "thread_is_running", None)
        return bool(running(thread_id)) if running is not None else False


def _is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://")) or bool(
        _KEYWORD_DSN.match(location)
    )


def _serde(inspect: bool) -> Any:
    if not inspect:
        return None
    from pregelkit.cli._view import ViewSerializer

    return ViewSerializer()


@contextlib.contextmanager
def open_database(
    location: str, *, create: bool, inspect: bool = False, pool_size: int = 0
) -> Iterator[Database]:
    """The database at ``location``; unless ``create``, it must already hold
    pregelkit checkpoints (so a typo never creates an empty file). With
    ``inspect``, stored values load without importing anything (``_view``).
    ``pool_size``: a PostgreSQL saver gets a pool of that many connections
    (a worker's runs save in parallel); the catalogue queries are then not
    available."""
    if _is_postgres(location):
        with _open_postgres(location, inspect, pool_size) as db:
            yield db
        return
    shown = Redactor().mask(location)
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", location)
    if scheme:
        raise CliError(
            f"unsupported database URL {shown!r}: --db takes a SQLite file path or a "
            "postgresql:// URL",
            kind="database",
        )
    if location != ":memory:":
        _check_sqlite_file(location, create)
    from pregelkit.checkpoint.sqlite import SqliteSaver, connect

    try:
        conn = connect(location)
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the database {shown!r}: {exc}", kind="database") from None
    try:
        saver = SqliteSaver(conn, serde=_serde(inspect))
    except BaseException:
        conn.close()
        raise
    try:
        saver.setup()
        yield Database(location, saver, "sqlite", saver.conn)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot use the database {shown!r}: {exc}", kind="database") from None
    finally:
        saver.close()


def _check_sqlite_file(path: str, create: bool) -> None:
    """``path`` is a SQLite file holding pregelkit checkpoints, or (with
    ``create``) nothing yet or any SQLite file; else an error saying what it is."""
    if os.path.isdir(path):
        raise CliError(
            f"--db {path!r} is a directory: name a SQLite file, e.g. "
            f"{os.path.join(path, DEFAULT_DB)!r}",
            kind="database",
        )
    if not os.path.exists(path):
        if create:
            return
        raise CliError(
            f"no database at {path!r}: start a workflow there with `pregelkit run`, or point "
            "--db (or PREGELKIT_DB) at the database your workflows use",
            kind="database",
        )
    if create and os.path.getsize(path) == 0:
        return  # an empty file is an empty SQLite database
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                ("pregelkit_checkpoints",),
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise CliError(
            f"cannot read the database {path!r}: {exc}. Is it a SQLite file? Point --db at "
            "the file your workflows use",
            kind="database",
        ) from None
    if found is None and not create:
        raise CliError(
            f"{path!r} is a SQLite database but holds no pregelkit checkpoints: point --db "
            "at the file your workflows use",
            kind="database",
        )


@contextlib.contextmanager
def _open_postgres(dsn: str, inspect: bool, pool_size: int = 0) -> Iterator[Database]:
    shown = Redactor().mask(dsn)
    try:
        import psycopg

        from pregelkit.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise CliError(
            f"the database {shown!r} needs psycopg: pip install 'pregelkit[postgres]'",
            kind="database",
        ) from None
    redact = Redactor([dsn])
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in dsn:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        source: Any = (
            _open_pool(dsn, options, pool_size)
            if pool_size
            else psycopg.Connection.connect(dsn, **options)
        )
    except Exception as exc:
        raise CliError(
            f"cannot connect to the database {shown!r}: {redact.mask(_short(str(exc), 300))}",
            kind="database",
        ) from None
    with source:
        try:
            saver = PostgresSaver(source, serde=_serde(inspect))
            saver.setup()
            yield Database(dsn, saver, "postgres", source)
        except psycopg.Error as exc:
            raise CliError(
                f"database error on {shown!r}: {redact.mask(_short(str(exc), 300))}",
                kind="database",
            ) from None


def _open_pool(dsn: str, options: dict[str, Any], size: int) -> Any:
    """A pool of ``size`` connections, its first one open (or the error)."""
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, min_size=1, max_size=size, kwargs=options, open=False
    )
    try:
        pool.open(wait=True, timeout=options.get("connect_timeout", CONNECT_TIMEOUT_S))
    except BaseException:
        pool.close()
        raise
    return pool
