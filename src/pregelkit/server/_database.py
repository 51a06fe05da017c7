"""The server's database: ``--db`` opened as the CLI opens it (a SQLite file
or a ``postgresql://`` URL), with the store (``/store``, and what the
workflows' ``store`` sees) and the server's thread rows in it too."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pregelkit.cli._db import Database, open_database
from pregelkit.server._records import ThreadRecords
from pregelkit.store.base import BaseStore


@dataclass
class Backend:
    db: Database
    store: BaseStore
    records: ThreadRecords


@contextlib.contextmanager
def open_backend(location: str, pool_size: int) -> Iterator[Backend]:
    """Everything the API keeps in ``location`` (created if new), closed after."""
    with open_database(location, create=True, pool_size=pool_size) as db:
        store: Any
        if db.kind == "postgres":
            from pregelkit.store.postgres import PostgresStore

            store = PostgresStore(db.conn)
            store.setup()
            yield Backend(db, store, ThreadRecords("postgres", db.conn))
            return
        from pregelkit.store.sqlite import SqliteStore, connect

        with contextlib.closing(connect(location)) as conn:
            store = SqliteStore(conn)
            store.setup()
            records = ThreadRecords.sqlite(location)
            try:
                yield Backend(db, store, records)
            finally:
                records.close()
