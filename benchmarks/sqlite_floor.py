"""How much of a short run on SqliteSaver is SQLite's own work.

    python benchmarks/sqlite_floor.py [--runs 300] [--rounds 5]

Records every statement a short run (the ``short_sqlite`` workload: one task,
a new thread each run, default durability) sends to its connection, with its
parameters, then replays those statements with plain ``sqlite3`` on a fresh
database of the same schema and settings, each run's rows under a new thread
id: the same SQL, the same rows, the same transactions, and no pregelkit
code. The replay's time per run is the floor the engine's own time adds to,
and so bounds how fast a short run on SQLite can be on this machine.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from short_runs import SHORT_WARMUP_RUNS, _short_sync
from workload_base import Lib

Call = tuple[str, str, Any]
"""(method, sql, parameters): one call the saver made on its connection."""


class _Recording(sqlite3.Connection):
    """A connection that notes each call while ``calls`` is a list."""

    calls: list[Call] | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if self.calls is not None:
            self.calls.append(("execute", sql, tuple(parameters)))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        rows = [tuple(row) for row in parameters]
        if self.calls is not None:
            self.calls.append(("executemany", sql, rows))
        return super().executemany(sql, rows)


SETTINGS = ("page_size", "synchronous", "wal_autocheckpoint")
"""The saver's connection settings the replay copies (WAL besides)."""


def _record(runs: int, path: str) -> tuple[list[Call], list[Call], dict[str, Any]]:
    """The calls of the warm-up and of ``runs`` short runs on pregelkit, and
    the connection's settings."""
    from pregelkit.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, factory=_Recording)
    saver = SqliteSaver(conn)
    try:
        saver.setup()  # the schema is copied, not replayed
        prepared = _short_sync(Lib("pregelkit"), runs, saver, lambda: None)
        warmup: list[Call] = []
        conn.calls = warmup
        prepared.warmup()
        calls: list[Call] = []
        conn.calls = calls
        prepared.run()
        conn.calls = None
        settings = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in SETTINGS}
    finally:
        saver.close()
    return warmup, calls, settings


def _whole(runs: int, path: str) -> float:
    """Time per run of ``runs`` short runs on pregelkit (a plain connection:
    the recording one adds a Python call per statement)."""
    from pregelkit.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path) as saver:
        prepared = _short_sync(Lib("pregelkit"), runs, saver, lambda: None)
        prepared.warmup()
        start = time.perf_counter()
        prepared.run()
        return (time.perf_counter() - start) / runs


def _renamed(value: Any, prefix: str) -> Any:
    """``value`` with the benchmark's thread ids under ``prefix``."""
    if isinstance(value, str) and value.startswith(("timed-", "warmup-")):
        return prefix + value
    return value


def _prepared(calls: Sequence[Call], prefix: str) -> list[Call]:
    """``calls`` with their thread ids renamed, settings (PRAGMA) left out."""
    return [
        (
            method,
            sql,
            [tuple(_renamed(v, prefix) for v in row) for row in params]
            if method == "executemany"
            else tuple(_renamed(v, prefix) for v in params),
        )
        for method, sql, params in calls
        if not sql.lstrip().upper().startswith("PRAGMA")
    ]


def _make(conn: sqlite3.Connection, calls: Sequence[Call]) -> None:
    for method, sql, params in calls:
        if method == "execute":
            conn.execute(sql, params).fetchall()
        else:
            conn.executemany(sql, params)


def _replay(
    warmup: Sequence[Call],
    calls: Sequence[Call],
    schema_from: str,
    settings: dict[str, Any],
    runs: int,
    prefix: str,
) -> float:
    """Time per run of ``calls``, after ``warmup``, made with plain sqlite3 on
    a copy of the recorded database's schema and settings (WAL,
    synchronous=NORMAL, the saver's autocheckpoint)."""
    with tempfile.TemporaryDirectory(prefix="sqlite-floor-") as tmp:
        path = os.path.join(tmp, "replay.db")
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA page_size = {settings['page_size']}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {settings['synchronous']}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {settings['wal_autocheckpoint']}")
        source = sqlite3.connect(schema_from)
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        ).fetchall():
            conn.execute(sql)
        source.close()
        _make(conn, _prepared(warmup, prefix))
        timed = _prepared(calls, prefix)
        start = time.perf_counter()
        _make(conn, timed)
        seconds = time.perf_counter() - start
        conn.close()
    return seconds / runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    whole: list[float] = []
    floor: list[float] = []
    statements = 0
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="sqlite-floor-") as tmp:
            path = os.path.join(tmp, "short.db")
            whole.append(_whole(args.runs, os.path.join(tmp, "whole.db")))
            warmup, calls, settings = _record(args.runs, path)
            statements = len(calls)
            floor.append(_replay(warmup, calls, path, settings, args.runs, f"replay{round_}-"))
    print(
        f"short run on SqliteSaver ({args.runs} runs after {SHORT_WARMUP_RUNS} warm-up, "
        f"median of {args.rounds} rounds): {statistics.median(whole) * 1e6:,.0f} µs per run; "
        f"its {statements / args.runs:.1f} SQLite calls per run replayed with plain sqlite3: "
        f"{statistics.median(floor) * 1e6:,.0f} µs per run "
        f"(rounds: {', '.join(f'{s * 1e6:,.0f}' for s in floor)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
