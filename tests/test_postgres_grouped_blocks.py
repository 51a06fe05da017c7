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
