"""The database named by ``--db``: a SQLite file or a PostgreSQL URL, opened
with its checkpoint saver, checked before use so a typo never creates one."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pregelkit.cli._errors import CliError
from pregelkit.cli._render import _short

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver


DEFAULT_DB = "pregelkit.sqlite"
ENTRYPOINT_KEY = "pregelkit_entrypoint"
"""Checkpoint metadata key holding the ``MODULE:NAME`` a thread was started with."""


@dataclass
class Database:
    """The saver for ``--db`` plus the few catalogue queries the savers do not
    offer (which threads exist, and a thread's metadata without loading it)."""

    location: str
    saver: BaseCheckpointSaver[Any]
    kind: str
    conn: Any = field(repr=False)

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.kind == "postgres":
            sql = sql.replace("?", "%s")
        rows: list[tuple[Any, ...]] = self.conn.execute(sql, params).fetchall()
        return rows

    def threads(self) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT thread_id FROM pregelkit_checkpoints WHERE checkpoint_ns = ?", ("",)
        )
        return sorted(str(r[0]) for r in rows)

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
        """The ``MODULE:NAME`` the thread was started with, read from the JSON copy
        of its latest metadata (so nothing stored is unpickled)."""
        rows = self._rows(
            "SELECT metadata_json FROM pregelkit_checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ""),
        )
        if not rows:
            return None
        meta = rows[0][0]
        if isinstance(meta, (str, bytes)):
            try:
                meta = json.loads(meta)
            except ValueError:
                return None
        value = meta.get(ENTRYPOINT_KEY) if isinstance(meta, dict) else None
        return value if isinstance(value, str) else None


def _is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


@contextlib.contextmanager
def open_database(location: str, *, create: bool) -> Iterator[Database]:
    """The database at ``location``; unless ``create``, it must already hold
    pregelkit checkpoints (so a typo never creates an empty file)."""
    if _is_postgres(location):
        with _open_postgres(location) as db:
            yield db
        return
    if location != ":memory:" and not create:
        _check_sqlite_file(location)
    from pregelkit.checkpoint.sqlite import SqliteSaver

    try:
        with SqliteSaver.from_conn_string(location) as saver:
            saver.setup()
            yield Database(location, saver, "sqlite", saver.conn)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot use the database {location!r}: {exc}") from None


def _check_sqlite_file(path: str) -> None:
    if not os.path.exists(path):
        raise CliError(
            f"no database at {path!r}: start a workflow there with `pregelkit run`, or point "
            "--db (or PREGELKIT_DB) at the database your workflows use"
        )
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
            "the file your workflows use"
        ) from None
    if found is None:
        raise CliError(
            f"{path!r} is a SQLite database but holds no pregelkit checkpoints: point --db "
            "at the file your workflows use"
        )


@contextlib.contextmanager
def _open_postgres(dsn: str) -> Iterator[Database]:
    try:
        import psycopg

        from pregelkit.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise CliError(
            "a postgresql:// database needs psycopg: pip install 'pregelkit[postgres]'"
        ) from None
    try:
        manager = PostgresSaver.from_conn_string(dsn)
        saver = manager.__enter__()
    except psycopg.Error as exc:
        raise CliError(f"cannot connect to the database: {_short(str(exc), 200)}") from None
    try:
        saver.setup()
        yield Database(dsn, saver, "postgres", saver.conn)
    except psycopg.Error as exc:
        manager.__exit__(None, None, None)
        raise CliError(f"database error: {_short(str(exc), 200)}") from None
    except BaseException:
        manager.__exit__(*sys.exc_info())
        raise
    else:
        manager.__exit__(None, None, None)
