"""``PostgresSaver.grouped()`` / ``AsyncPostgresSaver.agrouped()`` save all
or nothing, as SQLite's blocks do: a call that fails after some of its
statements ran must not get them committed with the rest of the block when
its caller catches the error and goes on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pregelkit.checkpoint.base import empty_checkpoint
from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver
from pregelkit.checkpoint.serde import JsonPlusSerializer
from pregelkit.errors import StorageError


class _SealsNothing(JsonPlusSerializer):
    """A serializer whose values are bound to their thread, and which cannot
    seal a copy: ``copy_thread`` fails after its copying statements ran."""

    def reseal(self, data: tuple[str, bytes], source: Any, target: Any) -> tuple[str, bytes]:
        raise RuntimeError("cannot seal for the new thread")


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def test_a_postgres_block_whose_call_failed_partway_saves_nothing_though_its_caller_goes_on(
    postgres_database: Callable[[str], str],
) -> None:
    dsn = postgres_database("pregelkit_grouped_partway")
    with PostgresSaver.from_conn_string(dsn, serde=_SealsNothing()) as saver:
        source = saver.put(_cfg("src"), empty_checkpoint(), {"source": "input"}, {})
        saver.put_writes(source, [("x", 1)], "task-0")
        with pytest.raises(StorageError, match="a save in this grouped"), saver.grouped():
            kept = saver.put(_cfg("a"), empty_checkpoint(), {"source": "input"}, {})
            with pytest.raises(RuntimeError, match="cannot seal"):
                saver.copy_thread("src", "dst")
            with pytest.raises(StorageError, match="a save in this grouped"):
                saver.put_thread_control("a", "mark")
        assert saver.get_tuple(kept) is None
        assert list(saver.list(_cfg("dst"))) == []
        assert saver.get_thread_control("a") is None
        # the saver goes on: the next block saves
        with saver.grouped():
            saver.put(_cfg("b"), empty_checkpoint(), {"source": "input"}, {})
        assert saver.get_tuple(_cfg("b")) is not None


def test_an_async_postgres_block_whose_call_failed_partway_saves_nothing_though_its_caller_goes_on(
    postgres_database: Callable[[str], str], arun: Callable[[Awaitable[Any]], Any]
) -> None:
    dsn = postgres_database("pregelkit_agrouped_partway")

    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(dsn, serde=_SealsNothing()) as saver:
            source = await saver.aput(_cfg("src"), empty_checkpoint(), {"source": "input"}, {})
            await saver.aput_writes(source, [("x", 1)], "task-0")
            with pytest.raises(StorageError, match="a save in this grouped"):
                async with saver.agrouped():
                    kept = await saver.aput(_cfg("a"), empty_checkpoint(), {}, {})
                    with pytest.raises(RuntimeError, match="cannot seal"):
                        await saver.acopy_thread("src", "dst")
            assert await saver.aget_tuple(kept) is None
            assert [t async for t in saver.alist(_cfg("dst"))] == []

    arun(main())


def _kill_block_connection(dsn: str) -> None:
    """End the server backend of the grouped block this context is in."""
    import psycopg

    from pregelkit.checkpoint.postgres._core import GROUP

    group = GROUP.get()
    assert group is not None
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (group.conn.info.backend_pid,))


def test_a_connection_lost_inside_a_postgres_block_is_a_storage_error(
    postgres_database: Callable[[str], str],
) -> None:
    dsn = postgres_database("pregelkit_grouped_lost")
    with PostgresSaver.from_conn_string(dsn) as saver:
        # the block's statements are pipelined: the loss shows at its next
        # sync, a call's or the block's end, as a StorageError either way
        with pytest.raises(StorageError, match=r"PostgreSQL: .* failed"), saver.grouped():
            kept = saver.put(_cfg("a"), empty_checkpoint(), {"source": "input"}, {})
            _kill_block_connection(dsn)
            saver.put_writes(kept, [("x", 1)], "task-0")
            saver.get_tuple(kept)
        # the saver goes on on a new connection; nothing of the block was saved
        assert saver.get_tuple(kept) is None
        with saver.grouped():
            saver.put(_cfg("b"), empty_checkpoint(), {"source": "input"}, {})
        assert saver.get_tuple(_cfg("b")) is not None


def test_a_connection_lost_inside_an_async_postgres_block_is_a_storage_error(
    postgres_database: Callable[[str], str], arun: Callable[[Awaitable[Any]], Any]
) -> None:
    dsn = postgres_database("pregelkit_agrouped_lost")

    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            with pytest.raises(StorageError, match=r"PostgreSQL: .* failed"):
                async with saver.agrouped():
                    kept = await saver.aput(_cfg("a"), empty_checkpoint(), {}, {})
                    _kill_block_connection(dsn)
                    await saver.aput_writes(kept, [("x", 1)], "task-0")
                    await saver.aget_tuple(kept)
            assert await saver.aget_tuple(kept) is None

    arun(main())
