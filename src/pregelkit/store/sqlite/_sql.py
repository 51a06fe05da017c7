"""SQL of the SQLite stores.

Values are JSON text; times are integer microseconds since the epoch (UTC);
vectors are float32 BLOBs (see ``_index.pack``), scored by the
``pregelkit_dot`` function every store connection registers. A filter key
becomes a JSON path of quoted labels (``$."meta"."author"``), bound as a
parameter, so no part of it is read as path syntax or SQL.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from pregelkit._internal._plan import Statement
from pregelkit.store import _index, _namespaces
from pregelkit.store._filter import ORDERING, Condition, canonical_json
from pregelkit.store._sqlcore import ITEM_COLUMNS, UPSERT, Dialect, encode_json
from pregelkit.store.base import SearchOp

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE pregelkit_store (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            expires_at INTEGER,
            ttl_minutes REAL,
            PRIMARY KEY (prefix, key)
        )
        """,
        "CREATE INDEX pregelkit_store_updated ON pregelkit_store (updated_at)",
        """
        CREATE INDEX pregelkit_store_expires ON pregelkit_store (expires_at)
        WHERE expires_at IS NOT NULL
        """,
        """
        CREATE TABLE pregelkit_store_vectors (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            field TEXT NOT NULL,
            embedding BLOB NOT NULL,
            PRIMARY KEY (prefix, key, field)
        )
        """,
    ),
)
"""Migration N (1-based) is ``MIGRATIONS[N - 1]``; append, never edit."""

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS pregelkit_store_migrations (version INTEGER PRIMARY KEY)
"""
SELECT_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM pregelkit_store_migrations"
RECORD_MIGRATION = "INSERT INTO pregelkit_store_migrations (version) VALUES (?)"

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@functools.lru_cache(maxsize=16)
def _query_vector(blob: bytes) -> Any:
    return _index.unpack(blob)


def _dot(embedding: bytes, query: bytes) -> float:
    return _index.dot(_query_vector(query), _index.unpack(embedding))


def _canonical(text: str | None) -> str | None:
    return None if text is None else canonical_json(json.loads(text))


def register_functions(conn: sqlite3.Connection) -> None:
    """The SQL functions the store's queries call, on ``conn``."""
    conn.create_function("pregelkit_dot", 2, _dot, deterministic=True)
    conn.create_function("pregelkit_canonical_json", 1, _canonical, deterministic=True)


class SqliteDialect(Dialect):
    upsert_item = f"""
        INSERT INTO pregelkit_store AS s
            (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
        VALUES (?, ?, ?, ?, ?, ?, ?) {UPSERT}
    """
    delete_item = "DELETE FROM pregelkit_store WHERE prefix = ? AND key = ?"
    delete_vectors = "DELETE FROM pregelkit_store_vectors WHERE prefix = ? AND key = ?"
    insert_vector = """
        INSERT INTO pregelkit_store_vectors (prefix, key, field, embedding) VALUES (?, ?, ?, ?)
    """
    refresh_ttl = """
        UPDATE pregelkit_store SET expires_at = ?1 + CAST(ttl_minutes * 60000000 AS INTEGER)
        WHERE prefix = ?2 AND key = ?3 AND ttl_minutes IS NOT NULL
    """
    select_namespaces = f"SELECT DISTINCT prefix FROM pregelkit_store WHERE {_LIVE}"
    select_namespaces_under = (
        f"{select_namespaces} AND (prefix = ? OR (prefix >= ? AND prefix < ?))"
    )
    sweep_vectors = """
        DELETE FROM pregelkit_store_vectors WHERE (prefix, key) IN (
            SELECT prefix, key FROM pregelkit_store WHERE expires_at <= ?
        )
    """
    sweep = "DELETE FROM pregelkit_store WHERE expires_at <= ?"

    def select_items(self, keys: list[tuple[str, str]], now: Any) -> Statement:
        if len(keys) == 1:  # the common get: no JSON list to build and unpack
            ((prefix, key),) = keys
            return Statement(_SELECT_ITEM, (prefix, key, now), "all")
        return Statement(_SELECT_ITEMS, (json.dumps(keys), now), "all")

    def time(self, moment: datetime) -> int:
        delta = moment - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

    def from_time(self, value: Any) -> datetime:
        # exact integer arithmetic, and a fraction of fromtimestamp().replace()'s cost
        return _EPOCH + timedelta(microseconds=value)

    def encode_value(self, value: dict[str, Any]) -> str:
        return encode_json(value)

    def encode_vector(self, vector: list[float]) -> bytes:
        return _index.pack(vector)

    def search(
        self,
        op: SearchOp,
        conditions: list[Condition],
        query: list[float] | None,
        now: Any,
    ) -> tuple[str, list[Any]]:
        params: list[Any] = []
        if query is None:
            score = "NULL"
            order = "s.updated_at DESC, s.prefix, s.key"
        else:
            score = (
                "(SELECT max(pregelkit_dot(v.embedding, ?)) FROM pregelkit_store_vectors v "
                "WHERE v.prefix = s.prefix AND v.key = s.key)"
            )
            params.append(_index.pack(query))
            order = "score DESC NULLS LAST, s.updated_at DESC, s.prefix, s.key"
        where = [_LIVE]
        params.append(now)
        if op.namespace_prefix:
            where.append("(s.prefix = ? OR (s.prefix >= ? AND s.prefix < ?))")
            params.extend(_namespaces.prefix_bounds(op.namespace_prefix))
        for condition in conditions:
            sql, condition_params = _condition(condition)
            where.append(sql)
            params.extend(condition_params)
        params.extend((op.limit, op.offset))
        return (
            f"SELECT {_prefixed(ITEM_COLUMNS)}, {score} AS score FROM pregelkit_store s "
            f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ? OFFSET ?",
            params,
        )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _prefixed(columns: str) -> str:
    return ", ".join(f"s.{column.strip()}" for column in columns.split(","))


# The keys come as one JSON array of [namespace text, key] pairs, walked
# first (CROSS JOIN keeps that order), each looked up by the primary key.
_SELECT_ITEM = f"""
    SELECT {_prefixed(ITEM_COLUMNS)} FROM pregelkit_store s
    WHERE s.prefix = ? AND s.key = ? AND {_LIVE}
"""
_SELECT_ITEMS = f"""
    SELECT {_prefixed(ITEM_COLUMNS)} FROM json_each(?) AS t
    CROSS JOIN pregelkit_store s
        ON s.prefix = json_extract(t.value, '$[0]') AND s.key = json_extract(t.value, '$[1]')
    WHERE {_LIVE}
"""


def _condition(condition: Condition) -> tuple[str, list[Any]]:
    path = "$" + "".join(f'."{part}"' for part in condition.path)
    kind = "coalesce(json_type(s.value, ?), 'null')"
    value = "json_extract(s.value, ?)"
    operand = condition.operand
    params: list[Any]
    if condition.op in ORDERING:
        sign = _SQL_OPERATORS[condition.op]
        kinds = "= 'text'" if isinstance(operand, str) else "IN ('integer', 'real')"
        return f"({kind} {kinds} AND {value} {sign} ?)", [path, path, operand]
    if operand is None:
        sql, params = f"{kind} = 'null'", [path]
    elif isinstance(operand, bool):
        sql, params = f"{kind} = ?", [path, "true" if operand else "false"]
    elif isinstance(operand, int | float):
        sql, params = f"({kind} IN ('integer', 'real') AND {value} = ?)", [path, path, operand]
    elif isinstance(operand, str) and not operand.startswith(("{", "[")):
        # json_extract gives a string as TEXT, a number or boolean as a
        # number, an object or array as JSON text (starting "{" or "["): so
        # equal TEXT means an equal string, and the JSON is parsed once.
        sql, params = f"{value} IS ?", [path, operand]
    elif isinstance(operand, str):
        sql, params = f"({kind} = 'text' AND {value} = ?)", [path, path, operand]
    else:
        json_kind = "object" if isinstance(operand, dict) else "array"
        sql = f"({kind} = ? AND pregelkit_canonical_json({value}) = ?)"
        params = [path, json_kind, path, canonical_json(operand)]
    return (f"(NOT {sql})" if condition.op == "$ne" else sql), params
