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

A leased run's rows come with its lease (the fenced inserts of
``_runqueue.fenced``): the combined statement then checks the fence in a
``WITH`` clause of its own (``FOR SHARE``) and ends by dividing by the
count of it, so a lost lease fails the statement, nothing of it written,
with a division by zero that the saver reports as ``LeaseLostError``. No
BEGIN/COMMIT and no separate fence read: a worker's save is one statement.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from pregelkit._internal._plan import Statement
from pregelkit.checkpoint._rows import ON_CHECKPOINT_CONFLICT, ON_WRITE_CONFLICT
from pregelkit.checkpoint.attempts import ATTEMPT_COLUMNS, ATTEMPT_KEY, attempt_conflict
from pregelkit.checkpoint.postgres import _sql
from pregelkit.errors import LeaseLostError

__all__ = ["Batch", "Combined", "refusing"]


class Combined(Statement):
    """The batch's statement, written with PostgreSQL's own ``$n``
    placeholders, for a raw cursor: psycopg parses a ``%s`` query of more
    than 50 parameters again at each execute (its cache stops there), and
    a run's saves have a hundred. ``lease``: the (run id, fence) it checks."""

    __slots__ = ("lease",)

    def __init__(self, sql: str, params: Any, lease: tuple[str, int] | None = None) -> None:
        super().__init__(sql, params)
        self.lease = lease


@contextmanager
def refusing(batch: Batch) -> Iterator[None]:
    """Around the statements ``batch`` sent: a fenced one that found its
    lease lost (a division by zero, nothing of it written) raises
    ``LeaseLostError``."""
    try:
        yield
    except psycopg.errors.DivisionByZero as exc:
        if batch.fenced is None:
            raise
        raise LeaseLostError(*batch.fenced, "saving") from exc


class _Table:
    """How the rows of one single-row insert go into the combined statement."""

    __slots__ = ("casts", "conflict", "head", "key", "large")

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
        self.large = tuple(i for i, column in enumerate(columns) if column in _LARGE)
        """Where a row's values of any size are (see ``MOST_BYTES``)."""

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
_LARGE = {"blob", "checkpoint", "metadata", "metadata_json", "value", "error_message"}
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


_FENCED = {
    _sql.SQL.fenced_checkpoint: _sql.UPSERT_CHECKPOINT,
    _sql.SQL.fenced_write: _sql.UPSERT_WRITE,
    _sql.SQL.fenced_attempt: _sql.UPSERT_ATTEMPT,
}
"""A leased run's fenced insert of a row, and the insert the batch keeps
the row for (the lease goes to the batch)."""

_FENCE = (
    "f AS (SELECT 1 FROM pregelkit_runs WHERE run_id = ${} AND fence = ${} "
    "AND status = 'running' FOR SHARE)"
)


def _repeats(rows: list[Sequence[Any]], table: _Table) -> bool:
    """Whether two rows share the conflict key of a ``DO UPDATE`` table."""
    key = table.key
    if not key or len(rows) == 1:
        return False
    return len({tuple(row[i] for i in key) for row in rows}) < len(rows)


class Batch:
    """The rows of a block's inserts, by statement, in the order they came."""

    __slots__ = ("fenced", "lease", "rows")

    def __init__(self) -> None:
        self.rows: dict[str, list[Sequence[Any]]] = {}
        self.lease: tuple[str, int] | None = None
        """The lease the kept rows are fenced by, if a leased run sent them."""
        self.fenced: tuple[str, int] | None = None
        """The lease of the last fenced statement taken (see ``refusing``)."""

    def add(self, statement: Statement) -> bool:
        """Keep ``statement``'s rows if it is an insert this module combines
        (a fenced one's lease too, if it is the lease of the rows kept)."""
        sql = statement.sql
        if sql in _FENCED:
            *row, run_id, fence = statement.params
            if self.lease is not None and self.lease != (run_id, fence):
                return False
            self.lease = (run_id, fence)
            self.rows.setdefault(_FENCED[sql], []).append(row)
            return True
        if sql not in _TABLES:
            return False
        rows = self.rows.setdefault(sql, [])
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
        size = 0  # bytes of the large values in params
        alone: list[Statement] = []
        for sql, rows in self.rows.items():
            table = _TABLES[sql]
            if _repeats(rows, table):
                alone.append(Statement(sql, rows, "many"))
                continue
            width, large = len(table.casts), table.large
            count = 0  # rows of this table in params
            for row in rows:
                if params and (len(params) + width > MOST_PARAMETERS or size > MOST_BYTES):
                    if count:
                        shape.append((sql, count))
                    combined.append(self._combined(shape, params))
                    shape, params, size, count = [], [], 0, 0
                params.extend(row)
                count += 1
                for i in large:
                    if (value := row[i]) is not None:
                        size += len(value)
            if count:
                shape.append((sql, count))
        self.rows = {}
        lease = self.lease
        if shape:
            combined.append(self._combined(shape, params))
        elif lease is not None and alone:  # the rows sent alone are fenced too
            combined.append(self._combined([], []))
        if lease is not None:
            self.fenced, self.lease = lease, None
        return combined + alone

    def _combined(self, shape: list[tuple[str, int]], params: list[Any]) -> Combined:
        """One combined statement; a leased run's checks the lease first."""
        lease = self.lease
        if lease is None:
            return Combined(_combined(tuple(shape)), params)
        return Combined(_combined(tuple(shape), fenced=True), [*params, *lease], lease)


MOST_PARAMETERS = 30_000
"""Parameters of one combined statement at most (PostgreSQL's limit is
65,535; a statement this large is parsed in a few milliseconds anyway)."""

MOST_BYTES = 128 * 2**20
"""Once its large values (blobs, serialized values, metadata, error
messages) pass this many bytes (characters, for text: up to 4 bytes each),
a combined statement takes no more rows:
PostgreSQL refuses a message of more than 1 GB ("invalid message length")
and closes the connection, and the rows of one statement are one message.
Twelve task results of 100 MB saved at a run's exit failed so."""

_SHAPES: dict[tuple[tuple[tuple[str, int], ...], bool], str] = {}
"""The combined statement of each small shape met (tables and row counts):
a workflow's steps come in a few shapes, met again and again."""
_MOST_SHAPES = 256
_CACHED_ROWS = 64
"""Shapes of more rows are rare and their SQL long: built each time."""


def _combined(shape: tuple[tuple[str, int], ...], fenced: bool = False) -> str:
    """The statement of ``shape``; ``fenced``: its last two parameters are
    the lease, and it fails with a division by zero if the lease is lost
    (every insert a ``WITH`` clause, run whatever the main query reads)."""
    sql = _SHAPES.get((shape, fenced))
    if sql is not None:
        return sql
    clauses, first = [], 1
    for insert, rows in shape:
        table = _TABLES[insert]
        clauses.append(table.clause(rows, first))
        first += rows * len(table.casts)
    if fenced:
        withs = [_FENCE.format(first, first + 1)]
        withs += [f"t{i} AS (\n{clause}\n)" for i, clause in enumerate(clauses)]
        sql = "WITH " + ",\n".join(withs) + "\nSELECT 1 / (SELECT count(*) FROM f)"
    else:
        *firsts, last = clauses
        head = ",\n".join(f"t{i} AS (\n{clause}\n)" for i, clause in enumerate(firsts))
        sql = f"WITH {head}\n{last}" if head else last
    if sum(rows for _, rows in shape) <= _CACHED_ROWS:
        if len(_SHAPES) >= _MOST_SHAPES:
            _SHAPES.clear()
        _SHAPES[(shape, fenced)] = sql
    return sql
