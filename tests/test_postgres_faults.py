"""PostgreSQL going away under a saver: a dropped connection, a server
restart, a server that stays down. The saver rides out what is transient,
says ``StorageError`` for what is not, and never writes for a thread whose
lock went with a dropped connection.

Each test owns a server of its own (module scope), so it can stop, restart
and terminate connections without disturbing the rest of the suite."""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pregelkit.checkpoint import StorageRetry
from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.errors import StorageError
from pregelkit.func import entrypoint, task

from pgserver import PgServer

# LangGraph's documented settings for a pool shared with its saver.
LANGGRAPH_POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
QUICK = StorageRetry(attempts=2, initial_delay=0.05, deadline=1.0)


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    pg = PgServer(durable=True)
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def up(server: PgServer) -> PgServer:
    """The server, running (a test before may have left it stopped)."""
    try:
        psycopg.connect(server.dsn, connect_timeout=2).close()
    except psycopg.OperationalError:
        server.start()
    return server


def _terminate_others(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
    return len(rows)


def _workflow(saver: Any) -> Any:
    @task
    def double(x: int) -> int:
        return 2 * x

    @entrypoint(checkpointer=saver)
    def wf(xs: list[int]) -> int:
        return sum(double(x).result() for x in xs)

    return wf


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_pool_with_langgraph_documented_settings(up: PgServer) -> None:
    with ConnectionPool(up.dsn, kwargs=LANGGRAPH_POOL_KWARGS, open=True) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        wf = _workflow(saver)
        assert wf.invoke([1, 2, 3], _cfg("dict-rows")) == 12
        assert wf.get_state(_cfg("dict-rows")).values == 12
        with saver.lock_thread("dict-rows"):
            pass


def test_async_pool_with_langgraph_documented_settings(up: PgServer) -> None:
    async def main() -> None:
        async with AsyncConnectionPool(up.dsn, kwargs=LANGGRAPH_POOL_KWARGS, open=False) as pool:
            saver = AsyncPostgresSaver(pool)
            await saver.setup()
            wf = _workflow(saver)
            assert await wf.ainvoke([1, 2, 3], _cfg("adict-rows")) == 12
            assert (await wf.aget_state(_cfg("adict-rows"))).values == 12

    asyncio.run(main())


def test_from_conn_string_recovers_after_its_backend_is_terminated(up: PgServer) -> None:
    with PostgresSaver.from_conn_string(up.dsn) as saver:
        wf = _workflow(saver)
        assert wf.invoke([1], _cfg("term-1")) == 2
        assert _terminate_others(up.dsn) >= 1
        assert wf.invoke([1, 2], _cfg("term-2")) == 6
        assert wf.get_state(_cfg("term-1")).values == 2


def test_async_from_conn_string_recovers_after_its_backend_is_terminated(up: PgServer) -> None:
    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(up.dsn) as saver:
            wf = _workflow(saver)
            assert await wf.ainvoke([1], _cfg("aterm-1")) == 2
            assert _terminate_others(up.dsn) >= 1
            assert await wf.ainvoke([1, 2], _cfg("aterm-2")) == 6

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["connection", "pool"])
def test_serves_again_after_a_server_restart(up: PgServer, kind: str) -> None:
    """A long-lived process: the server restarts between two runs; the next
    run succeeds without the process doing anything."""
    if kind == "pool":
        pool: ConnectionPool[Any] = ConnectionPool(
            up.dsn, min_size=2, kwargs=LANGGRAPH_POOL_KWARGS, open=True
        )
        saver = PostgresSaver(pool)
    else:
        saver = PostgresSaver(psycopg.connect(up.dsn, autocommit=True))
    try:
        wf = _workflow(saver)
        assert wf.invoke([1], _cfg(f"restart-{kind}-1")) == 2
        up.stop()
        up.start()
        assert wf.invoke([5], _cfg(f"restart-{kind}-2")) == 10
        assert wf.get_state(_cfg(f"restart-{kind}-1")).values == 2
    finally:
        if isinstance(saver.conn, ConnectionPool):
            saver.conn.close()
        else:
            saver.conn.close()


def test_async_serves_again_after_a_server_restart(up: PgServer) -> None:
    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(up.dsn) as saver:
            wf = _workflow(saver)
            assert await wf.ainvoke([1], _cfg("arestart-1")) == 2
            up.stop()
            up.start()
            assert await wf.ainvoke([5], _cfg("arestart-2")) == 10

    asyncio.run(main())


def test_a_server_that_stays_down_is_a_storage_error(up: PgServer) -> None:
    with PostgresSaver.from_conn_string(up.dsn, retry=QUICK) as saver:
        saver.setup()
        up.stop()
        config = {"configurable": {"thread_id": "down", "checkpoint_ns": ""}}
        with pytest.raises(StorageError) as caught:
            saver.put(config, empty_checkpoint(), {}, {})
        assert caught.value.thread_id == "down"
        assert "put for thread 'down' failed after 2 tries" in str(caught.value)
        assert "resume the thread" in str(caught.value)
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        up.start()
        saved = saver.put(config, empty_checkpoint(), {}, {})
        assert saver.get_tuple(saved) is not None


def test_writes_for_a_thread_whose_lock_was_lost_are_refused(up: PgServer) -> None:
    """The connection holding a thread's advisory lock drops: another process
    may now run that thread, so this saver must not write for it; other
    threads' writes go on over a new connection."""
    with PostgresSaver.from_conn_string(up.dsn) as saver:
        saver.setup()
        held = {"configurable": {"thread_id": "locked", "checkpoint_ns": ""}}
        other = {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
        with saver.lock_thread("locked"):
            first = saver.put(held, empty_checkpoint(), {}, {})
            _terminate_others(up.dsn)
            with pytest.raises(StorageError, match="lock was lost"):
                saver.put_writes(first, [("x", 1)], "task-1")
            # the lock is really gone: another saver can take it
            with PostgresSaver.from_conn_string(up.dsn) as rival, rival.lock_thread("locked"):
                pass
            saver.put(other, empty_checkpoint(), {}, {})
            with pytest.raises(StorageError, match="lock was lost"):
                saver.put(held, empty_checkpoint(), {}, {})
        # the run that lost it has ended; a new run of the thread may write
        with saver.lock_thread("locked"):
            saver.put_writes(first, [("x", 1)], "task-1")
        assert saver.get_tuple(first).pending_writes == [("task-1", "x", 1)]  # type: ignore[union-attr]


def test_storage_retry_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="attempts"):
        StorageRetry(attempts=0)
    with pytest.raises(ValueError, match="deadline"):
        StorageRetry(deadline=float("nan"))
    with pytest.raises(TypeError, match="attempts"):
        StorageRetry(attempts=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["connection", "pool"])
def test_grouped_calls_are_one_transaction_saved_together_or_not_at_all(
    up: PgServer, kind: str
) -> None:
    """The engine makes the saves it finds queued together inside
    ``grouped``: one transaction, all saved when the block ends, none if an
    error leaves it; the saver works on after a failed group."""
    pool = ConnectionPool(up.dsn, min_size=2, kwargs={"autocommit": True}, open=True)
    conn = psycopg.connect(up.dsn, autocommit=True)
    try:
        saver = PostgresSaver(pool if kind == "pool" else conn)
        saver.setup()
        with psycopg.connect(up.dsn, autocommit=True) as watcher:

            def visible(thread: str) -> int:
                return watcher.execute(
                    "SELECT count(*) FROM pregelkit_checkpoints WHERE thread_id = %s", (thread,)
                ).fetchone()[0]  # type: ignore[index]

            with saver.grouped():
                first = saver.put(_cfg(f"{kind}-t"), empty_checkpoint(), {"source": "input"}, {})
                saver.put_writes(first, [("x", 1), ("y", 2)], "task-0")
                assert visible(f"{kind}-t") == 0  # not committed before the block ends
            assert visible(f"{kind}-t") == 1
            assert len(saver.get_tuple(first).pending_writes or []) == 2  # type: ignore[union-attr]

            with pytest.raises(RuntimeError, match="boom"), saver.grouped():
                config = saver.put(_cfg(f"{kind}-u"), empty_checkpoint(), {}, {})
                saver.put_writes(config, [("x", 1)], "task-0")
                raise RuntimeError("boom")
            assert visible(f"{kind}-u") == 0 and saver.get_tuple(_cfg(f"{kind}-u")) is None
            saver.put_writes(first, [("z", 3)], "task-1")
            assert len(saver.get_tuple(first).pending_writes or []) == 3  # type: ignore[union-attr]
    finally:
        pool.close()
        conn.close()


def test_async_grouped_calls_are_one_transaction(up: PgServer) -> None:
    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(up.dsn) as saver:
            await saver.setup()
            async with saver.agrouped():
                first = await saver.aput(_cfg("async-t"), empty_checkpoint(), {}, {})
                await saver.aput_writes(first, [("x", 1)], "task-0")
            tup = await saver.aget_tuple(first)
            assert tup is not None and tup.pending_writes == [("task-0", "x", 1)]
            with pytest.raises(RuntimeError, match="boom"):
                async with saver.agrouped():
                    config = await saver.aput(_cfg("async-u"), empty_checkpoint(), {}, {})
                    await saver.aput_writes(config, [("x", 1)], "task-0")
                    raise RuntimeError("boom")
            assert await saver.aget_tuple(_cfg("async-u")) is None

    asyncio.run(main())


def test_a_context_copied_inside_a_block_does_not_join_it_after_the_block_ends(
    up: PgServer,
) -> None:
    """A worker thread, task or timer started inside ``grouped()`` carries a
    copy of the block's context. After the block, its calls must run in a
    transaction of their own: joining the ended block ran them on a pool
    connection another block was using, and a session stayed idle in a
    transaction, holding locks (a TRUNCATE then waited forever)."""
    with ConnectionPool(up.dsn, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        with saver.grouped():
            stale = contextvars.copy_context()
            saver.put_thread_control("t", "cancel")
        with saver.grouped():  # the pool's one connection, in a new block
            saver.put(_cfg("other"), empty_checkpoint(), {}, {})
            done: list[str | None] = []
            reader = threading.Thread(
                target=lambda: done.append(stale.run(saver.get_thread_control, "t"))
            )
            reader.start()
            reader.join(0.5)
            assert reader.is_alive()  # waits for a connection of its own
        reader.join(10)
        assert done == ["cancel"]
        with psycopg.connect(up.dsn, autocommit=True) as watcher:
            idle = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'"
            ).fetchone()
        assert idle == (0,)


async def _saving(watcher: psycopg.AsyncConnection[Any]) -> None:
    """Until a save is on the server, in its slow trigger (a fixed pause
    before the cancel raced the run's first saves on a loaded machine)."""
    for _ in range(3000):
        cur = await watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
            "AND datname = current_database()"
        )
        if (await cur.fetchone()) != (0,):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the run never saved")


@pytest.mark.parametrize("saving", ["pregelkit_writes", "pregelkit_attempts"])
def test_a_run_cancelled_while_its_gathered_calls_save_ends_cancelled(
    postgres_database: Callable[[str], str], saving: str
) -> None:
    """``task.cancel()`` on an async run whose entrypoint gathered its calls,
    while their saves are on the wire (a slow insert). The gather cancels the
    calls, then the run's stop cancelled them again: the second cancel cut
    short psycopg's cancelling of the statement, which closed the saver's
    connection and the thread's lock with it. The run then ended with a
    StorageError (its exit's saves refused: lock lost) instead of
    CancelledError, and resuming met ThreadBusyError while the server still
    held the lock for the closed connection's busy backend."""
    dsn = postgres_database("pregelkit_cancel_gathered")
    with psycopg.connect(dsn, autocommit=True) as conn:
        PostgresSaver(conn).setup()
        conn.execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.1); RETURN NEW; END $$"
        )
        conn.execute(f"CREATE TRIGGER slow BEFORE INSERT ON {saving} EXECUTE FUNCTION slow()")

    @task
    async def leaf(i: int) -> int:
        return i

    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:

            @entrypoint(checkpointer=saver)
            async def gathered(n: int) -> int:
                return sum(await asyncio.gather(*[leaf(i) for i in range(n)]))

            config = _cfg("cancelled")
            run = asyncio.ensure_future(gathered.ainvoke(3, config, durability="sync"))
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
                await _saving(watcher)  # the calls' saves are on the wire
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            assert await gathered.ainvoke(None, config, durability="sync") == 3

    asyncio.run(main())


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_a_run_cancelled_during_its_exits_saves_gives_the_thread_back_after_them(
    postgres_database: Callable[[str], str], durability: str
) -> None:
    """A run cancelled (a timeout) while its exit's checkpoint is being saved
    on a pool connection: the save goes on (its lane is shielded), and the
    run gave its thread back at once. It was seen ended, a resume found the
    thread empty (EmptyInputError), and the checkpoint landed a moment
    later (the pool has a connection free for the resume's reads). The run
    now waits for its saves, then ends cancelled; the resume finds the
    finished run."""
    dsn = postgres_database("pregelkit_cancel_at_exit")
    _slow_checkpoint_inserts(dsn)
    ran: list[int] = []

    @task
    async def leaf(i: int) -> int:
        ran.append(i)
        return i

    async def main() -> None:
        async with (
            AsyncConnectionPool(dsn, min_size=4, kwargs={"autocommit": True}) as pool,
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher,
        ):
            saver = AsyncPostgresSaver(pool)

            @entrypoint(checkpointer=saver)
            async def chain(n: int) -> int:
                return sum([await leaf(i) for i in range(n)])

            config = _cfg("cancelled-at-exit")
            run = asyncio.ensure_future(chain.ainvoke(3, config, durability=durability))
            await _saving(watcher)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            assert await chain.ainvoke(None, config, durability=durability) == 3
            assert ran == [0, 1, 2]

    asyncio.run(main())


def test_ctrl_c_during_a_runs_last_save_is_raised_once_it_is_saved(
    postgres_database: Callable[[str], str],
) -> None:
    """Ctrl-C while a run's exit saves its steps (durability="exit": the
    run makes its lane's saves in its own thread): the grouped save is
    cancelled and rolled back, made again one by one, and the run ends with
    the KeyboardInterrupt. The lane swallowed it: the run went on and
    returned as if no Ctrl-C had come."""
    dsn = postgres_database("pregelkit_ctrl_c_at_exit")
    _slow_checkpoint_inserts(dsn)
    ran: list[int] = []

    @task
    def leaf(i: int) -> int:
        ran.append(i)
        return i

    def ctrl_c_while_saving() -> None:
        with psycopg.connect(dsn, autocommit=True) as watcher:
            for _ in range(3000):
                sleeping = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
                ).fetchone()
                if sleeping != (0,):
                    _thread.interrupt_main()
                    return
                time.sleep(0.005)

    with ConnectionPool(dsn, min_size=4, kwargs={"autocommit": True}) as pool:

        @entrypoint(checkpointer=PostgresSaver(pool))
        def chain(n: int) -> int:
            return sum([leaf(i).result() for i in range(n)])

        config = _cfg("ctrl-c-at-exit")
        watcher = threading.Thread(target=ctrl_c_while_saving)
        watcher.start()
        with pytest.raises(KeyboardInterrupt):
            chain.invoke(3, config, durability="exit")
        watcher.join()
        assert chain.invoke(None, config, durability="exit") == 3
        assert ran == [0, 1, 2]


def _slow_checkpoint_inserts(dsn: str) -> None:
    """Set up the savers' tables with a trigger that makes each checkpoint
    insert sleep 0.3 s: a run's exit saves take long enough to be hit."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        PostgresSaver(conn).setup()
        conn.execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER slow BEFORE INSERT ON pregelkit_checkpoints EXECUTE FUNCTION slow()"
        )
