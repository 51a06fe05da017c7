"""What the SQL savers do, written once for SQLite and PostgreSQL.

Each saver operation that is the same on both databases is a plan here (the
vocabulary of ``pregelkit._internal._plan``) over a :class:`SaverSQL`, which
holds one database's statements. The savers run these plans in their own
transactions; a step's saves composed into one plan (``_plan.sequence``)
are one transaction on SQLite and one pipeline on PostgreSQL.

What differs is not here: reading a checkpoint (one query with arrays on
PostgreSQL, three on SQLite), creating the tables, locks and faults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from types import ModuleType
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pregelkit._internal._plan import Dialect, Plan, Run, Statement
from pregelkit.checkpoint import _runqueue
from pregelkit.checkpoint._rows import (
    RESEAL_SELECTS,
    RESEAL_UPDATES,
    ListScope,
    StoredCheckpoint,
    check_filter,
    checkpoint_config,
    decode_checkpoint,
    encode_checkpoint,
    encode_writes,
    list_scope,
    reseal_params,
)
from pregelkit.checkpoint.attempts import AttemptList, AttemptRecord, AttemptRow, attempt_from_row
from pregelkit.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    OpenedThread,
    RunnableConfig,
    prune_targets,
    thread_coordinates,
)
from pregelkit.checkpoint.base._open import Gate
from pregelkit.checkpoint.serde.base import SerializerProtocol

__all__ = ["Call", "SaverSQL", "SqlSaver"]

T = TypeVar("T")


class SaverSQL(Dialect):
    """One database's statements for the plans of this module, taken from
    the module that spells them (its upper-case names, and ``list_query``)."""

    checkpoint_in_one_statement: bool = False
    """``read_checkpoint`` is one SELECT (the row holds its blobs and writes):
    a ``single`` call."""

    def __init__(self, sql: ModuleType, queue: _runqueue.Dialect) -> None:
        self.queue = queue
        self.placeholder = queue.placeholder
        self.upsert_checkpoint: str = sql.UPSERT_CHECKPOINT
        self.insert_blob: str = sql.INSERT_BLOB
        self.upsert_write: str = sql.UPSERT_WRITE
        self.upsert_attempt: str = sql.UPSERT_ATTEMPT
        self.fenced_checkpoint = _runqueue.fenced_insert(queue, sql.UPSERT_CHECKPOINT)
        self.fenced_write = _runqueue.fenced_insert(queue, sql.UPSERT_WRITE)
        self.fenced_attempt = _runqueue.fenced_insert(queue, sql.UPSERT_ATTEMPT)
        """The upserts of a leased run: each checks the lease (see
        ``_runqueue.fenced``); params: the row's, then run id and fence."""
        self.select_attempts: str = sql.SELECT_ATTEMPTS
        self.select_thread_control: str = sql.SELECT_THREAD_CONTROL
        self.select_thread_gate: str = sql.SELECT_THREAD_GATE
        """Params: thread id, thread id."""
        self.upsert_thread_control: str = sql.UPSERT_THREAD_CONTROL
        self.delete_thread_control: str = sql.DELETE_THREAD_CONTROL
        self.delete_thread: tuple[str, ...] = sql.DELETE_THREAD
        self.copy_thread: tuple[str, ...] = sql.COPY_THREAD
        """Params of each: target thread id, source thread id."""
        self.prune_keep_latest: tuple[str, ...] = sql.PRUNE_KEEP_LATEST
        self.select_checkpoint: str = sql.SELECT_CHECKPOINT
        """Params: thread id, namespace, checkpoint id."""
        self.select_latest_checkpoint: str = sql.SELECT_LATEST_CHECKPOINT
        """Params: thread id, namespace."""
        self.list_query: Callable[[ListScope, dict[str, Any], int | None], tuple[str, list[Any]]]
        self.list_query = sql.list_query
        """The SELECT of the checkpoint rows ``list`` yields, newest first."""

    def stored(self, row: Sequence[Any]) -> Plan[StoredCheckpoint]:
        """The checkpoint of a row ``select_checkpoint`` returns, with its
        blobs and writes."""
        raise NotImplementedError

    def one_row(self, sql: str, row: Sequence[Any]) -> Statement:
        """The write of one row: a plain statement by default."""
        return Statement(sql, row)

    def write_rows(self, rows: list[Any]) -> list[Any]:
        """The pending-write rows as ``upsert_write`` takes them."""
        return rows


def thread_of(config: RunnableConfig | None) -> str | None:
    """The thread a call is about, for its error message."""
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if thread_id is None else str(thread_id)


def read_checkpoint(sql: SaverSQL, config: RunnableConfig) -> Plan[StoredCheckpoint | None]:
    """The checkpoint ``config`` names, or the latest of its thread and namespace."""
    row = yield checkpoint_select(sql, config)
    return None if row is None else (yield from sql.stored(row))


def checkpoint_select(sql: SaverSQL, config: RunnableConfig) -> Statement:
    """The SELECT of the checkpoint row ``config`` names (the latest of its
    thread and namespace without a checkpoint id)."""
    thread_id, checkpoint_ns, checkpoint_id = thread_coordinates(config)
    if checkpoint_id:
        return Statement(sql.select_checkpoint, (thread_id, checkpoint_ns, checkpoint_id), "one")
    return Statement(sql.select_latest_checkpoint, (thread_id, checkpoint_ns), "one")


def put(
    sql: SaverSQL,
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    keep_latest: bool = False,
) -> Plan[RunnableConfig]:
    """The checkpoint row and the blobs of its new versions; ``keep_latest``
    (the shallow savers): then the thread's history before it goes."""
    row, blobs = encode_checkpoint(serde, config, checkpoint, metadata, new_versions)
    if blobs:
        yield Statement(sql.insert_blob, blobs, "many")
    lease = _runqueue.lease_of(config)
    if lease is None:
        yield sql.one_row(sql.upsert_checkpoint, row)
    else:
        yield from _runqueue.fenced(sql.queue, sql.fenced_checkpoint, row, lease, "put")
    if keep_latest:
        yield from prune(sql, [row.thread_id], "keep_latest")
    return checkpoint_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id)


def put_writes(
    sql: SaverSQL,
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    attempts: Sequence[AttemptRow] = (),
) -> Plan[None]:
    """A task's writes and attempt rows; a leased run's last row checks its
    fence, in the same transaction. Nothing to save runs no statement."""
    rows = sql.write_rows(encode_writes(serde, config, writes, task_id, task_path))
    lease = _runqueue.lease_of(config)
    last: tuple[str, Any] | None = None
    if lease is not None:
        # the transaction's last row carries the fence check
        if attempts:
            attempts, last = attempts[:-1], (sql.fenced_attempt, attempts[-1])
        elif rows:
            rows, last = rows[:-1], (sql.fenced_write, rows[-1])
    if rows:
        yield Statement(sql.upsert_write, rows, "many")
    if attempts:
        yield Statement(sql.upsert_attempt, list(attempts), "many")
    if last is not None:
        assert lease is not None
        yield from _runqueue.fenced(sql.queue, *last, lease, "put_writes")


def put_attempts(sql: SaverSQL, records: Sequence[AttemptRow]) -> Plan[None]:
    if records:
        yield Statement(sql.upsert_attempt, list(records), "many")


def list_attempts(sql: SaverSQL, thread_id: str) -> Plan[list[AttemptRecord]]:
    rows = yield Statement(sql.select_attempts, (thread_id,), "all")
    return [attempt_from_row(tuple(row)) for row in rows]


def fetch_all(sql: str, params: Sequence[Any]) -> Plan[list[Any]]:
    rows: list[Any] = yield Statement(sql, params, "all")
    return rows


def delete_thread(sql: SaverSQL, thread_id: str) -> Plan[None]:
    for statement in sql.delete_thread:
        yield Statement(statement, (thread_id,))


def copy_thread(
    sql: SaverSQL, serde: SerializerProtocol, source_thread_id: str, target_thread_id: str
) -> Plan[None]:
    for statement in sql.copy_thread:
        yield Statement(statement, (target_thread_id, source_thread_id))
    reseal = getattr(serde, "reseal", None)
    if reseal is not None:  # values sealed to their thread: seal the copies again
        rows = []
        for select in RESEAL_SELECTS:
            rows.append((yield sql.statement(select, (source_thread_id,), "all")))
        params = reseal_params(reseal, source_thread_id, target_thread_id, rows)
        for update, batch in zip(RESEAL_UPDATES, params):
            if batch:
                yield sql.statement(update, batch, "many")


def prune(sql: SaverSQL, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
    """``thread_ids`` and ``strategy`` as ``prune_targets`` checked them."""
    statements = sql.prune_keep_latest if strategy == "keep_latest" else sql.delete_thread
    for thread_id in thread_ids:
        for statement in statements:
            yield Statement(statement, (thread_id,))


def get_thread_control(sql: SaverSQL, thread_id: str) -> Plan[str | None]:
    row = yield Statement(sql.select_thread_control, (thread_id,), "one")
    return mark_of(row)


def mark_of(row: Sequence[Any] | None) -> str | None:
    """The mark in a row of ``select_thread_control``."""
    return None if row is None else str(row[0])


def get_thread_gate(sql: SaverSQL, thread_id: str) -> Plan[tuple[str | None, str | None]]:
    row = yield Statement(sql.select_thread_gate, (thread_id, thread_id), "one")
    return gate_of(row)


def gate_of(row: Sequence[Any] | None) -> tuple[str | None, str | None]:
    """The mark and queued state in a row of ``select_thread_gate``."""
    mark, run = row if row is not None else (None, None)
    return (None if mark is None else str(mark)), (None if run is None else str(run))


def overrides(saver: object, cls: type, names: Sequence[str]) -> bool:
    """Whether ``saver``'s class, or ``saver`` itself, replaces one of
    ``cls``'s methods ``names`` (a subclass that logs or caches its reads,
    or a test's ``mock.patch.object(saver, "get_tuple")``, must still be
    asked for them)."""
    kind = type(saver)
    if kind is not cls and any(getattr(kind, n) is not getattr(cls, n) for n in names):
        return True
    own: dict[str, Any] = getattr(saver, "__dict__", {})
    return any(n in own for n in names)


def opening_reads(
    sql: SaverSQL, thread_id: str, config: RunnableConfig, gate: Gate
) -> tuple[Statement, ...]:
    """What ``open_thread`` reads with the lock: the ``gate``, then the
    checkpoint (a dialect whose checkpoint is one SELECT)."""
    checkpoint = checkpoint_select(sql, config)
    if gate == "gate":
        return Statement(sql.select_thread_gate, (thread_id, thread_id), "one"), checkpoint
    if gate == "mark":
        return Statement(sql.select_thread_control, (thread_id,), "one"), checkpoint
    return (checkpoint,)


def opened_thread(
    sql: SaverSQL, serde: SerializerProtocol, lock: Any, gate: Gate, rows: Sequence[Any]
) -> OpenedThread:
    """``open_thread``'s answer from the rows of ``opening_reads``; the
    checkpoint is decoded only if the run asks for it."""
    read = None
    if gate == "gate":
        read = gate_of(rows[0])
    elif gate == "mark":
        read = mark_of(rows[0]), None
    row = rows[-1]

    def checkpoint() -> CheckpointTuple | None:
        if row is None:
            return None
        stored = Run(sql.stored(row))  # one row holds it all: no statement to run
        assert stored.effect is None
        return decode_checkpoint(serde, stored.result)

    return OpenedThread(lock, read, checkpoint)


def put_thread_control(sql: SaverSQL, thread_id: str, mark: str | None) -> Plan[None]:
    if mark is None:
        yield Statement(sql.delete_thread_control, (thread_id,))
    else:
        yield Statement(sql.upsert_thread_control, (thread_id, mark))


class Call(Generic[T]):
    """A saver call: the plan ``make()`` builds, and how to run it.
    ``writes``: the plan writes; ``single``: it runs one statement, which
    needs no transaction of its own (SQLite takes the shortcut);
    ``pipelined``: its statements may go out as one pipeline (PostgreSQL).
    ``about``: the thread it is about (its id, or the config that names it),
    for errors: its ``thread_id`` is read only when one needs it. (A class
    with slots: a saver makes one a call, and a NamedTuple costs twice as
    much to build.)"""

    __slots__ = ("about", "make", "operation", "pipelined", "single", "writes")

    def __init__(
        self,
        make: Callable[[], Plan[T]],
        operation: str,
        about: RunnableConfig | str | None = None,
        writes: bool = False,
        single: bool = False,
        pipelined: bool = False,
    ) -> None:
        self.make, self.operation, self.about = make, operation, about
        self.writes, self.single, self.pipelined = writes, single, pipelined

    @property
    def thread_id(self) -> str | None:
        """The thread the call is about, named in its errors."""
        about = self.about
        return thread_of(about) if isinstance(about, dict) else about


class SqlSaver(BaseCheckpointSaver[str]):
    """The methods of the SQL savers that are one shared plan each: a saver
    runs the plan with its ``_run`` (in one transaction, retried as its
    database needs) and only says how it reads (``get_tuple``, ``list``),
    locks and polls."""

    _statements: ClassVar[SaverSQL]
    MIGRATIONS: ClassVar[tuple[str, ...]]
    """The SQL statements ``setup()`` runs on a new database, in order (as
    LangGraph's savers list theirs); for reading: ``setup()`` keeps its own
    copy and records how far a database got."""
    _keep_latest: ClassVar[bool] = False
    """Each ``put`` drops the thread's earlier checkpoints (the shallow savers)."""

    def _run(self, call: Call[T]) -> T:
        """Run ``call``'s plan, in one transaction of its own (or in this
        context's ``grouped`` block), tried again as the database needs."""
        raise NotImplementedError

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and
        namespace; ``None`` if there is none."""
        stored = self._run(
            Call(
                partial(read_checkpoint, self._statements, config),
                "get_tuple",
                config,
                single=self._statements.checkpoint_in_one_statement,
            )
        )
        return None if stored is None else decode_checkpoint(self.serde, stored)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of every thread (``config=None``), of one
        thread, or of one namespace when ``config`` names it; ``filter`` keeps
        those whose metadata equals it on each of its keys (JSON values only).
        The arguments are checked now; the rows are read in one query when
        iteration starts, and each checkpoint is loaded as it is reached, so
        no connection is held while the caller iterates."""
        query = self._statements.list_query(list_scope(config, before), check_filter(filter), limit)
        return self._iter_list(query, thread_of(config))

    def _iter_list(
        self, query: tuple[str, Sequence[Any]], thread_id: str | None
    ) -> Iterator[CheckpointTuple]:
        for row in self._run(Call(partial(fetch_all, *query), "list", thread_id, single=True)):
            stored = self._run(Call(partial(self._statements.stored, row), "list", str(row[0])))
            yield decode_checkpoint(self.serde, stored)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as a child of the checkpoint ``config`` names,
        with blobs for the channels in ``new_versions`` only."""
        return self._run(
            Call(
                partial(
                    put,
                    self._statements,
                    self.serde,
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    self._keep_latest,
                ),
                "put",
                config,
                writes=True,
            )
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
        *,
        attempts: Sequence[AttemptRow] = (),
    ) -> None:
        """Record a task's writes against the checkpoint ``config`` names: a
        special write replaces the task's earlier one in place, a regular write
        already stored is kept. ``attempts`` go in the same transaction."""
        self._run(
            Call(
                partial(
                    put_writes,
                    self._statements,
                    self.serde,
                    config,
                    writes,
                    task_id,
                    task_path,
                    attempts,
                ),
                "put_writes",
                config,
                writes=True,
                # the common case, a task that made one write: one statement
                single=len(writes) == 1 and not attempts and _runqueue.lease_of(config) is None,
            )
        )

    def put_attempts(self, thread_id: str, records: Sequence[AttemptRow]) -> None:
        self._run(
            Call(
                partial(put_attempts, self._statements, records),
                "put_attempts",
                str(thread_id),
                writes=True,
                single=len(records) == 1,
            )
        )

    def list_attempts(self, thread_id: str) -> AttemptList:
        return self._run(
            Call(
                partial(list_attempts, self._statements, str(thread_id)),
                "list_attempts",
                str(thread_id),
            )
        )

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint, write and blob of ``thread_id``."""
        self._run(
            Call(
                partial(delete_thread, self._statements, thread_id),
                "delete_thread",
                thread_id,
                writes=True,
            )
        )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another; rows
        the target already has under the same ids are replaced, the rest of the
        target is left alone."""
        self._run(
            Call(
                partial(
                    copy_thread, self._statements, self.serde, source_thread_id, target_thread_id
                ),
                "copy_thread",
                target_thread_id,
                writes=True,
            )
        )

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        """Drop the history of threads: ``delete`` forgets them entirely;
        ``keep_latest`` keeps each namespace's latest checkpoint with its pending
        writes and the blobs it references. One transaction for all threads."""
        self._run(
            Call(
                partial(prune, self._statements, prune_targets(thread_ids, strategy), strategy),
                "prune",
                writes=True,
            )
        )

    def run_queue(
        self,
        make: Callable[[_runqueue.Dialect], _runqueue.RunPlan[T]],
        op: str,
        *,
        single: bool = False,
    ) -> T:
        """Run a queue plan in one transaction: on SQLite ``BEGIN IMMEDIATE``,
        so claims by several worker processes are serialized by its write
        lock; on PostgreSQL claims use ``FOR UPDATE SKIP LOCKED``, so workers
        take different runs without waiting for each other."""
        return self._run(
            Call(partial(make, self._statements.queue), op, writes=True, single=single)
        )
