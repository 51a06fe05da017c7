"""Statements sent together as one simple query, planned once per connection.

A run's start sends its lock and its reads as one simple query: one round
trip, the parameters bound by the client (a third of a pipeline's client
CPU in psycopg). But the server parses and plans each statement of a
simple query every time, and the reads are costly to plan: on a local
PostgreSQL 15, ~315 µs for the checkpoint read (two lateral joins) and
~140 µs for the gate, against ~15 µs to execute each. So each statement
goes as ``EXECUTE name(...)`` of a statement the connection prepared once
(``PREPARE``, sent at the head of the same query the first time): the
server plans it from its plan cache (a generic plan after five runs), and
the opening round trip costs the server ~85 µs instead of ~470.

A connection whose ``prepare_threshold`` is ``None`` (prepared statements
turned off, as behind a transaction-pooling proxy) gets the plain
statements.

A name is used once per connection and never reused: a ``PREPARE`` whose
query failed may or may not be in place, so the next try prepares under a
new name instead of guessing. A connection that lost its prepared
statements (``DISCARD ALL`` from a pool's reset or a proxy) fails an
``EXECUTE`` with ``InvalidSqlStatementName``: ``forgetting`` drops its names
and the call is tried again (``_connect.is_transient``), preparing anew.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

import psycopg

from pregelkit._internal._plan import Statement

__all__ = ["OneQuery", "forgetting"]

_PREPARED: WeakKeyDictionary[Any, dict[str, str]] = WeakKeyDictionary()
"""Per connection: the SQL of each statement it has prepared, and its name."""

_NUMBERS = itertools.count()
_PLACEHOLDER = re.compile(r"%[s%]")


class OneQuery:
    """``statements`` as one simple query on ``conn``: ``query`` and
    ``params`` to send (``;``-joined, parameters bound by the client),
    ``skip``: the results of its ``PREPARE``s, which come first (after
    its ``BEGIN``, with ``begin``: a transaction the query opens and leaves
    open, unless ``commit`` ends it too). Call ``sent()`` once the query
    succeeded."""

    __slots__ = ("conn", "new", "params", "query", "skip")

    def __init__(
        self, conn: Any, statements: Sequence[Statement], begin: bool = False, commit: bool = False
    ) -> None:
        params: list[Any] = []
        for statement in statements:
            assert statement.fetch != "many", "one simple query runs each statement once"
            params.extend(statement.params)
        self.conn, self.params = conn, params
        self.new: dict[str, str] = {}
        head = ["BEGIN"] if begin else []
        tail = ["COMMIT"] if commit else []
        if conn.prepare_threshold is None:
            self.query = "; ".join(head + [s.sql for s in statements] + tail)
            self.skip = len(head)
            return
        names = _PREPARED.get(conn)
        if names is None:
            names = _PREPARED[conn] = {}
        parts, executes = [], []
        for statement in statements:
            name = names.get(statement.sql) or self.new.get(statement.sql)
            if name is None:
                name = self.new[statement.sql] = f"pregelkit_{next(_NUMBERS)}"
                parts.append(f"PREPARE {name} AS {_numbered(statement.sql)}")
            marks = ", ".join(["%s"] * len(statement.params))
            executes.append(f"EXECUTE {name}({marks})" if marks else f"EXECUTE {name}")
        self.skip = len(head) + len(parts)
        self.query = "; ".join(head + parts + executes + tail)

    def sent(self) -> None:
        """The query succeeded: what it prepared is in place."""
        if self.new:
            _PREPARED[self.conn].update(self.new)


@contextmanager
def forgetting(conn: Any) -> Iterator[None]:
    """Around a query of ``EXECUTE``s on ``conn``: if the server has lost
    the connection's prepared statements, forget them (the error is raised,
    a transient one: the next try prepares them again)."""
    try:
        yield
    except psycopg.errors.InvalidSqlStatementName:
        _PREPARED.pop(conn, None)
        raise


def _numbered(sql: str) -> str:
    """``%s`` placeholders as PostgreSQL's ``$1``, ``$2``, ... (a ``%%``
    stays as it is: the client formats the whole query)."""
    numbers = itertools.count(1)
    return _PLACEHOLDER.sub(lambda m: m[0] if m[0] == "%%" else f"${next(numbers)}", sql)
