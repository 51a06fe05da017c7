"""The server's cron rows: what a LangGraph cron is beyond its schedule.

A cron is two rows in the server's database. Its firing is a schedule of
the fleet (``pregelkit.checkpoint.schedules``, id = the cron id), which the
workers fire as they fire every schedule. This table holds the rest, which
only the API reads: who created it (the digest of its API key, as threads
record theirs), its assistant, its thread (a thread cron), the payload and
metadata it was created with. Table ``pregelkit_server_crons``, created if
missing, beside ``pregelkit_server_threads`` and through the same
connection (``ThreadRecords.transaction``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pregelkit.checkpoint.schedules import get_schedule
from pregelkit.errors import ScheduleNotFoundError
from pregelkit.server._records import SCHEMA_LOCK, ThreadRecords

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pregelkit_server_crons ("
    "cron_id TEXT PRIMARY KEY, owner TEXT, assistant_id TEXT NOT NULL, thread_id TEXT, "
    "payload TEXT NOT NULL, metadata TEXT NOT NULL, "
    "created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
)
COLUMNS = "cron_id, owner, assistant_id, thread_id, payload, metadata, created_at, updated_at"


@dataclass(frozen=True)
class CronRow:
    cron_id: str
    owner: str | None
    """Who created it (``_auth.owner_of``); only its owner sees it."""
    assistant_id: str
    thread_id: str | None
    """A thread cron's thread; ``None``: each firing on a new thread."""
    payload: dict[str, Any]
    metadata: dict[str, Any]
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> CronRow:
        return cls(
            str(row[0]),
            None if row[1] is None else str(row[1]),
            str(row[2]),
            None if row[3] is None else str(row[3]),
            json.loads(row[4]),
            json.loads(row[5]),
            float(row[6]),
            float(row[7]),
        )


def _owned(owner: str | None) -> tuple[str, tuple[Any, ...]]:
    return ("owner IS NULL", ()) if owner is None else ("owner = ?", (owner,))


class CronRecords:
    """Cron rows, on the connection of the server's thread rows."""

    def __init__(self, records: ThreadRecords) -> None:
        self.records = records
        with records.transaction() as run:
            if records.kind != "sqlite":  # two servers starting at once: one creates
                run("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in SCHEMA:
                run(statement, ())

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.records.transaction() as run:
            return run(sql, params)

    def create(
        self,
        cron_id: str,
        owner: str | None,
        assistant_id: str,
        thread_id: str | None,
        payload: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> CronRow:
        now = time.time()
        rows = self._run(
            f"INSERT INTO pregelkit_server_crons ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            f"RETURNING {COLUMNS}",
            (cron_id, owner, assistant_id, thread_id, json.dumps(dict(payload)),
             json.dumps(dict(metadata)), now, now),
        )  # fmt: skip
        return CronRow.of(rows[0])

    def get(self, cron_id: str, owner: str | None) -> CronRow | None:
        """``owner``'s cron ``cron_id``: another owner's is not found."""
        cond, params = _owned(owner)
        rows = self._run(
            f"SELECT {COLUMNS} FROM pregelkit_server_crons WHERE cron_id = ? AND {cond}",
            (cron_id, *params),
        )
        return CronRow.of(rows[0]) if rows else None

    def owned(self, owner: str | None, thread_id: str | None = None) -> list[CronRow]:
        """All of ``owner``'s crons (of one thread, if named): a deployment
        has crons by the dozen, so the API filters and sorts them itself."""
        cond, params = _owned(owner)
        sql = f"SELECT {COLUMNS} FROM pregelkit_server_crons WHERE {cond}"
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params = (*params, thread_id)
        return [CronRow.of(r) for r in self._run(sql, params)]

    def update(
        self, cron_id: str, payload: Mapping[str, Any], metadata: Mapping[str, Any]
    ) -> CronRow:
        rows = self._run(
            "UPDATE pregelkit_server_crons SET payload = ?, metadata = ?, updated_at = ? "
            f"WHERE cron_id = ? RETURNING {COLUMNS}",
            (json.dumps(dict(payload)), json.dumps(dict(metadata)), time.time(), cron_id),
        )
        return CronRow.of(rows[0])

    def delete(self, cron_id: str) -> None:
        self._run("DELETE FROM pregelkit_server_crons WHERE cron_id = ?", (cron_id,))

    def of_thread(self, thread_id: str) -> list[str]:
        """The ids of the crons on ``thread_id``, whoever owns them."""
        rows = self._run(
            "SELECT cron_id FROM pregelkit_server_crons WHERE thread_id = ?", (thread_id,)
        )
        return [str(r[0]) for r in rows]


def forget(saver: Any, crons: CronRecords, cron_id: str) -> None:
    """Delete a cron: its schedule first (it fires no more), then its row.
    Runs it queued already still run."""
    try:
        get_schedule(saver, cron_id).delete()
    except ScheduleNotFoundError:  # deleted by an operator (`pregelkit schedules delete`)
        pass
    crons.delete(cron_id)


def forget_thread(saver: Any, crons: CronRecords, thread_id: str) -> None:
    """A deleted thread's crons go with it (they would run on a thread that
    is no more)."""
    for cron_id in crons.of_thread(thread_id):
        forget(saver, crons, cron_id)
