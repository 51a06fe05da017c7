"""A ``grouped`` block's inserts, sent as one statement.

A run's saves are a few rows in each of four tables (blobs, checkpoints,
pending writes, attempt records), and psycopg spends ~50 µs of the
client's CPU on each statement it sends, pipelined or not, while the
server parses and plans each too. So a block keeps the rows of its
inserts instead of sending them (``Batch.add``) and, when it ends, or
before a statement that reads, sends them as one statement: an insert of
all its rows per table (a ``VALUES`` list, with the table's own
``ON CONFLICT`` rule), joined by data-modifying ``WITH`` clauses. One
statement is atomic by itself, so a block with nothing else needs no
BEGIN/COMMIT. (Arrays and ``unnest`` would keep one statement text for
any number of rows, but psycopg dumps a list several times slower than
as many single values.)

``ON CONFLICT DO UPDATE`` refuses to meet one key twice in a statement
(a start record and the finished record of one attempt, a special write
replaced in the same block), so a table whose rows repeat a key is sent
row by row, in order, as it was before.

Pending writes keep their insertion order (``seq``): a ``VALUES`` list is
inserted in its order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pregelkit._internal._plan import Statement
from pregelkit.checkpoint._rows import ON_CHECKPOINT_CONFLICT, ON_WRITE_CONFLICT
from pregelkit.checkpoint.attempts import ATTEMPT_COLUMNS, ATTEMPT_KEY, attempt_conflict
from pregelkit.checkpoint.postgres import _sql

__all__ = ["Batch", "Combined"]


class Combined(Statement):
    """The batch's statement, written with PostgreSQL's own ``$n``
    placeholders, for a raw cursor: psycopg parses a ``%s`` query of more
    than 50 parameters again at each execute (its cache stops there), and
    a run's saves have a hundred."""

    __slots__ = ()


class _Table:
    """How the rows of one single-row insert go into the combined statement."""

    __slots__ = ("casts", "conflict", "head", "key")

    def __init__(
        self,
        table: str,
        columns: Sequence[str],
        conflict: str,
        key: tuple[int, ...] = (),
        casts: dict[str, str] | None = None,
    ) -> None:
        self.key = key
        """Where a row's conflict key is, for a ``DO UPDATE`` table (none:
        ``DO NOTHING`` takes a key twice)."""
        self.head = f"INSERT INTO {table} ({', '.join(columns)})\nVALUES "
        self.casts = [(casts or {}).get(column, "") for column in columns]
        self.conflict = conflict

    def clause(self, rows: int, first: int) -> str:
        """The insert of ``rows`` rows (a VALUES row each, inserted in order)
        whose parameters start at ``$first``."""
        width = len(self.casts)
        values = ", ".join(
            "("
            + ", ".join(f"${first + r * width + i}{cast}" for i, cast in enumerate(self.casts))
            + ")"
            for r in range(rows)
        )
        return f"{self.head}{values}\n{self.conflict}"


_JSON = {"metadata_json": "::jsonb", "channel_versions": "::jsonb"}
_TABLES: dict[str, _Table] = {
    _sql.INSERT_BLOB: _Table(
        "pregelkit_blobs",
        ["thread_id", "checkpoint_ns", "channel", "version", "type", "blob"],
        "ON CONFLICT DO NOTHING",
    ),
    _sql.UPSERT_CHECKPOINT: _Table(
        "pregelkit_checkpoints",
        [
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "parent_checkpoint_id",
            "type",
            "checkpoint",
            "metadata_type",
            "metadata",
            "metadata_json",
            "channel_versions",
        ],
        ON_CHECKPOINT_CONFLICT,
        (0, 1, 2),
        _JSON,
    ),
    _sql.UPSERT_WRITE: _Table(
        "pregelkit_writes",
        [
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "task_id",
            "idx",
            "channel",
            "type",
            "value",
            "task_path",
        ],
        ON_WRITE_CONFLICT + "WHERE excluded.idx < 0",
        (0, 1, 2, 3, 4),
    ),
    _sql.UPSERT_ATTEMPT: _Table(
        "pregelkit_attempts", ATTEMPT_COLUMNS.split(", "), attempt_conflict(), ATTEMPT_KEY
    ),
}


def _repeats(rows: list[Sequence[Any]], table: _Table) -> bool:
    """Whether two rows share the conflict key of a ``DO UPDATE`` table."""
    key = table.key
    if not key or len(rows) == 1:
        return False
    return len({tuple(row[i] for i in key) for row in rows}) < len(rows)


class Batch:
    """The rows of a block's inserts, by statement, in the order they came."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[str, list[Sequence[Any]]] = {}

    def add(self, statement: Statement) -> bool:
        """Keep ``statement``'s rows if it is an insert this module combines."""
        if statement.sql not in _TABLES:
            return False
        rows = self.rows.setdefault(statement.sql, [])
        if statement.fetch == "many":
            rows.extend(statement.params)
        else:
            rows.append(statement.params)
        return True

    def take(self) -> list[Statement]:
        """The kept rows as statements to send now, and none kept any more:
        the combined statement (more than one when the rows have more
        parameters than one statement may: PostgreSQL takes 65,535), then
        the rows of tables that repeat a key, one by one."""
        combined: list[Statement] = []
        shape: list[tuple[str, int]] = []
        params: list[Any] = []
        alone: list[Statement] = []
        for sql, rows in self.rows.items():
            table = _TABLES[sql]
            if _repeats(rows, table):
                alone.append(Statement(sql, rows, "many"))
                continue
            width = len(table.casts)
            start = 0
            while start < len(rows):
                room = (MOST_PARAMETERS - len(params)) // width
                if room == 0 and shape:
                    combined.append(Combined(_combined(tuple(shape)), params))
                    shape, params, room = [], [], MOST_PARAMETERS // width
                chunk = rows[start : start + max(room, 1)]
                shape.append((sql, len(chunk)))
                for row in chunk:
                    params.extend(row)
                start += len(chunk)
        self.rows = {}
        if shape:
            combined.append(Combined(_combined(tuple(shape)), params))
        return combined + alone


MOST_PARAMETERS = 30_000
"""Parameters of one combined statement at most (PostgreSQL's limit is
65,535; a statement this large is parsed in a few milliseconds anyway)."""

_SHAPES: dict[tuple[tuple[str, int], ...], str] = {}
"""The combined statement of each small shape met (tables and row counts):
a workflow's steps come in a few shapes, met again and again."""
_MOST_SHAPES = 256
_CACHED_ROWS = 64
"""Shapes of more rows are rare and their SQL long: built each time."""


def _combined(shape: tuple[tuple[str, int], ...]) -> str:
    sql = _SHAPES.get(shape)
    if sql is not None:
        return sql
    clauses, first = [], 1
    for insert, rows in shape:
        table = _TABLES[insert]
        clauses.append(table.clause(rows, first))
        first += rows * len(table.casts)
    *firsts, last = clauses
    head = ",\n".join(f"t{i} AS (\n{clause}\n)" for i, clause in enumerate(firsts))
    sql = f"WITH {head}\n{last}" if head else last
    if sum(rows for _, rows in shape) <= _CACHED_ROWS:
        if len(_SHAPES) >= _MOST_SHAPES:
            _SHAPES.clear()
        _SHAPES[shape] = sql
    return sql
