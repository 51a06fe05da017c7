"""Issue 29's features attacked as a hostile user would: wrong types and
values at the edges, and where schedules, queues and retention meet. Each
test here was a break (a crash, a poisoned row, SQLite and PostgreSQL
disagreeing) before its fix; SQLite and PostgreSQL each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pregelkit.checkpoint.postgres import PostgresSaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(connection string, saver) of an empty database."""
    if request.param == "sqlite":
        url = str(tmp_path / "a.db")
        with SqliteSaver.from_conn_string(url) as sqlite:
            sqlite.setup()
            yield url, sqlite
    else:
        url = request.getfixturevalue("postgres_database")("pregelkit_attacks")
        with PostgresSaver.from_conn_string(url) as pg:
            pg.setup()
            yield url, pg


@pytest.fixture
def saver(db: tuple[str, Any]) -> Any:
    return db[1]


def _echo(saver: Any) -> Any:
    @entrypoint(checkpointer=saver)
    def echo(value: Any) -> Any:
        return value

    return echo


def test_priority_is_bounded_alike_on_both_databases(saver: Any) -> None:
    """A priority past 32 bits was stored by SQLite and refused by
    PostgreSQL with its own ``integer out of range`` (2**70: SQLite's
    OverflowError): both now refuse it before the database, naming the
    bound; the bound itself is taken."""
    echo = _echo(saver)
    for priority in (2**31, -(2**31) - 1, 2**70):
        with pytest.raises(ValueError, match="priority must be between"):
            echo.submit(1, {"configurable": {"thread_id": f"p{priority}"}}, priority=priority)
    for priority in (2**31 - 1, -(2**31)):
        echo.submit(1, {"configurable": {"thread_id": f"p{priority}"}}, priority=priority)

