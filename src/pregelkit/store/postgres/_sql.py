"""SQL of the PostgreSQL stores, shared by PostgresStore and AsyncPostgresStore.

Values are ``jsonb``; vectors are ``real[]``, scored by a dot product written
in plain SQL (no pgvector needed). A filter key becomes a chain of
``-> %s::text`` steps, one bound parameter per label, which step into
objects only. Namespaces and keys use the "C" collation, so prefix ranges
and string filters compare by code point whatever the database's locale.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pregelkit._internal._plan import Statement
from pregelkit.store import _namespaces
from pregelkit.store._filter import ORDERING, Condition
from pregelkit.store._sqlcore import UPSERT, Dialect, encode_json
from pregelkit.store.base import SearchOp

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE pregelkit_store (
            prefix text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value jsonb NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            expires_at timestamptz,
            ttl_minutes double precision,
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
            prefix text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            field text NOT NULL,
            embedding real[] NOT NULL,
            PRIMARY KEY (prefix, key, field)
        )
        """,
    ),
    # 2: the items move to LangGraph's table name, ``store`` (same columns,
    # namespaces encoded the same way), so a database LangGraph's
    # PostgresStore wrote is read as it is. If LangGraph's table is already
    # there, it is adopted: it gains what pregelkit needs (expiry columns,
    # fractional TTLs, code-point order for namespace ranges, an index for
    # newest-first search) and pregelkit's rows move into it, the newer
    # write winning when both have an item.
    (
        """
        DO $$
        BEGIN
            IF to_regclass('store') IS NULL THEN
                ALTER TABLE pregelkit_store RENAME TO store;
                ALTER INDEX pregelkit_store_updated RENAME TO store_updated_at_idx;
                ALTER INDEX pregelkit_store_expires RENAME TO store_expires_at_idx;
            ELSE
                ALTER TABLE store
                    ADD COLUMN IF NOT EXISTS expires_at timestamptz,
                    ADD COLUMN IF NOT EXISTS ttl_minutes double precision;
                ALTER TABLE store
                    ALTER COLUMN prefix TYPE text COLLATE "C",
                    ALTER COLUMN key TYPE text COLLATE "C",
                    ALTER COLUMN ttl_minutes TYPE double precision;
                UPDATE store SET created_at = coalesce(created_at, now()),
                    updated_at = coalesce(updated_at, now())
                    WHERE created_at IS NULL OR updated_at IS NULL;
                INSERT INTO store AS s
                    (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
                    SELECT prefix, key, value, created_at, updated_at, expires_at, ttl_minutes
                    FROM pregelkit_store
                    ON CONFLICT (prefix, key) DO UPDATE SET
                        value = excluded.value, created_at = excluded.created_at,
                        updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                        ttl_minutes = excluded.ttl_minutes
                    WHERE s.updated_at < excluded.updated_at;
                DELETE FROM pregelkit_store_vectors v USING pregelkit_store p, store s
                    WHERE v.prefix = p.prefix AND v.key = p.key
                    AND s.prefix = p.prefix AND s.key = p.key
                    AND s.updated_at IS DISTINCT FROM p.updated_at;
                DROP TABLE pregelkit_store;
                CREATE INDEX IF NOT EXISTS store_updated_at_idx ON store (updated_at);
                CREATE INDEX IF NOT EXISTS store_expires_at_idx ON store (expires_at)
                    WHERE expires_at IS NOT NULL;
            END IF;
        END $$
        """,
    ),
)
"""Migration N (1-based) is ``MIGRATIONS[N - 1]``; append, never edit."""

MIGRATION_LOCK_KEY = 0x7072_6567_5354_4F52
"""Advisory lock serializing the store's ``setup()`` across processes."""
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(%s)"
CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS pregelkit_store_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SELECT_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM pregelkit_store_migrations"
RECORD_MIGRATION = "INSERT INTO pregelkit_store_migrations (version) VALUES (%s)"

_COLUMNS = "s.prefix, s.key, s.value::text, s.created_at, s.updated_at, s.ttl_minutes"
_LIVE = "(s.expires_at IS NULL OR s.expires_at > %s)"


class PostgresDialect(Dialect):
    placeholder = "%s"
    select_namespaces = f"SELECT DISTINCT s.prefix FROM store s WHERE {_LIVE}"
    select_namespaces_under = (
        f"{select_namespaces} AND (s.prefix = %s OR (s.prefix >= %s AND s.prefix < %s))"
    )
    sweep_vectors = """
        DELETE FROM pregelkit_store_vectors WHERE (prefix, key) IN (
            SELECT prefix, key FROM store WHERE expires_at <= %s
        )
    """
    sweep = "DELETE FROM store WHERE expires_at <= %s"

    # One row goes out as a plain statement: unnesting arrays of one costs a
    # single get or put a third more (measured: 0.45 against 0.3 ms).
    def select_items(self, keys: list[tuple[str, str]], now: Any) -> Statement:
        if len(keys) == 1:
            return Statement(_SELECT_ITEM, (*keys[0], now), "all")
        return Statement(_SELECT_ITEMS, (*_columns(keys), now), "all")

    def upsert_items(self, rows: list[tuple[Any, ...]]) -> Statement:
        if len(rows) == 1:
            return Statement(_UPSERT_ITEM, rows[0])
        return Statement(_UPSERT_ITEMS, _columns(rows))

    def delete_items(self, keys: list[tuple[str, str]]) -> Statement:
        if len(keys) == 1:
            return Statement(_DELETE_ITEM, keys[0])
        return Statement(_DELETE_ITEMS, _columns(keys))

    def delete_vectors_of(self, keys: list[tuple[str, str]]) -> Statement:
        if len(keys) == 1:
            return Statement(_DELETE_VECTORS_OF_ONE, keys[0])
        return Statement(_DELETE_VECTORS, _columns(keys))

    def insert_vectors(self, rows: list[tuple[Any, ...]]) -> Statement:
        return Statement(_INSERT_VECTORS, _columns(rows))

    def refresh(self, now: Any, keys: list[tuple[str, str]]) -> Statement:
        # One statement for all the keys: psycopg runs a statement per
        # parameter row in pipeline mode, which costs a millisecond even for
        # one row (a search refreshing its 10 results: 6 ms, now 0.5).
        return Statement(
            _REFRESH_TTLS, (now, [text for text, _ in keys], [key for _, key in keys]), None, True
        )

    def time(self, moment: datetime) -> datetime:
        return moment

    def from_time(self, value: Any) -> datetime:
        return value.astimezone(UTC)  # type: ignore[no-any-return]

    def encode_value(self, value: dict[str, Any]) -> str:
        return encode_json(value)

    def encode_vector(self, vector: list[float]) -> str:
        # As a ``real[]`` literal: a list of them goes out as one ``text[]``
        # (an array of arrays would be one two-dimensional array to unnest).
        return "{" + ",".join(map(repr, vector)) + "}"

    def search(
        self,
        op: SearchOp,
        conditions: list[Condition],
        query: list[float] | None,
        now: Any,
    ) -> tuple[str, list[Any]]:
        params: list[Any] = []
        if query is None:
            score = "NULL::double precision"
            order = "s.updated_at DESC, s.prefix, s.key"
        else:
            # Written out rather than a SQL function, which PostgreSQL would
            # not inline (it has a FROM): a third faster.
            score = (
                "(SELECT max((SELECT sum(x::double precision * y) "
                "FROM unnest(v.embedding, %s::real[]) AS t(x, y))) "
                "FROM pregelkit_store_vectors v WHERE v.prefix = s.prefix AND v.key = s.key)"
            )
            params.append(query)
            order = "score DESC NULLS LAST, s.updated_at DESC, s.prefix, s.key"
        where = [_LIVE]
        params.append(now)
        if op.namespace_prefix:
            where.append("(s.prefix = %s OR (s.prefix >= %s AND s.prefix < %s))")
            params.extend(_namespaces.prefix_bounds(op.namespace_prefix))
        for condition in conditions:
            sql, condition_params = _condition(condition)
            where.append(sql)
            params.extend(condition_params)
        params.extend((op.limit, op.offset))
        return (
            f"SELECT {_COLUMNS}, {score} AS score FROM store s "
            f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT %s OFFSET %s",
            params,
        )


def _columns(rows: list[tuple[Any, ...]]) -> tuple[list[Any], ...]:
    """``rows`` as one list per column: the arrays a statement unnests, so a
    batch's rows of one kind go out as one statement of a few parameters."""
    return tuple(map(list, zip(*rows, strict=True)))


# Every ``unnest`` names its column types and compares under "C", as the
# tables do, so the index on (prefix, key) answers each row. The arrays go
# in binary (``%b``): psycopg dumps a 1,000-row batch's in a third of the
# time it takes to write them as text.
_KEYS = "unnest(%b::text[], %b::text[]) AS t(prefix, key)"
_SAME_KEY = 'x.prefix = t.prefix COLLATE "C" AND x.key = t.key COLLATE "C"'
_SELECT_ITEM = f"SELECT {_COLUMNS} FROM store s WHERE s.prefix = %s AND s.key = %s AND {_LIVE}"
_SELECT_ITEMS = f"""
    SELECT {_COLUMNS} FROM {_KEYS}
    JOIN store s ON {_SAME_KEY.replace("x.", "s.")}
    WHERE {_LIVE}
"""
_INSERT = """
    INSERT INTO store AS s
        (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
"""
_UPSERT_ITEM = f"{_INSERT} VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s) {UPSERT}"
_UPSERT_ITEMS = f"""{_INSERT}
    SELECT * FROM unnest(%b::text[], %b::text[], %b::jsonb[], %b::timestamptz[],
        %b::timestamptz[], %b::timestamptz[], %b::double precision[])
    {UPSERT}
"""
_DELETE_ITEM = "DELETE FROM store WHERE prefix = %s AND key = %s"
_DELETE_ITEMS = f"DELETE FROM store x USING {_KEYS} WHERE {_SAME_KEY}"
_DELETE_VECTORS_OF_ONE = "DELETE FROM pregelkit_store_vectors WHERE prefix = %s AND key = %s"
_DELETE_VECTORS = f"DELETE FROM pregelkit_store_vectors x USING {_KEYS} WHERE {_SAME_KEY}"
_INSERT_VECTORS = """
    INSERT INTO pregelkit_store_vectors (prefix, key, field, embedding)
    SELECT prefix, key, field, embedding::real[]
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[]) AS t(prefix, key, field, embedding)
"""

_REFRESH_TTLS = """
    UPDATE store AS s SET expires_at = %s + s.ttl_minutes * interval '1 minute'
    FROM unnest(%b::text[], %b::text[]) AS t(prefix, key)
    WHERE s.prefix = t.prefix COLLATE "C" AND s.key = t.key COLLATE "C"
    AND s.ttl_minutes IS NOT NULL
"""

_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _condition(condition: Condition) -> tuple[str, list[Any]]:
    path = list(condition.path)
    value = "(s.value" + " -> %s::text" * len(path) + ")"
    operand = condition.operand
    if condition.op in ORDERING:
        sign = _SQL_OPERATORS[condition.op]
        if isinstance(operand, str):
            text = f"({value} #>> '{{}}') COLLATE \"C\""
            sql = f"(jsonb_typeof({value}) = 'string' AND {text} {sign} %s)"
            return sql, [*path, *path, operand]
        sql = f"(jsonb_typeof({value}) = 'number' AND {value} {sign} %s::jsonb)"
        return sql, [*path, *path, json.dumps(operand)]
    sql = f"coalesce({value}, 'null'::jsonb) = %s::jsonb"
    params = [*path, json.dumps(operand)]
    return (f"(NOT {sql})" if condition.op == "$ne" else sql), params
