"""Count what a PostgreSQL client sends, on the wire, for either library.

A run's cost on a real network is mostly its round trips, which a benchmark
against a local server hides: each costs ~1 ms across a data centre.
``WireCounter`` is a TCP proxy in front of the server that reads the
client's protocol messages, so it counts the same things for pregelkit and
LangGraph without touching either library or the server (any
``BENCH_PG_DSN`` works, no extension or server log needed):

- statements: each ``Execute`` of the extended protocol (one per row of an
  ``executemany``) and each statement of a simple ``Query``;
- round trips: each point where the client stops to wait for the server: a
  ``Sync`` (the end of a statement, or of a whole pipeline), a ``Flush``
  (psycopg's fetch inside a pipeline) or a simple ``Query``, unless the
  server has not answered the previous one yet (psycopg ends a pipeline with
  a ``Sync`` and a ``Flush`` at once); the statements of one pipeline before
  its ``Sync`` are one round trip;
- BEGIN / COMMIT / ROLLBACK statements, statements outside an explicit
  transaction, and the implicit transactions they make up on the server
  (``implicit``: those of one simple ``Query``, or sent before one
  ``Sync``, are one transaction);
- connections opened (each costs its own handshakes).

Checked against the server's own log (``log_statement=all``, 20 short
runs of each library): the same statements, BEGINs and COMMITs per run.

The proxy adds a hop and a thread per direction, so a timed run must not go
through it: count in a separate pass.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

SPECIAL_REQUESTS = {80877102, 80877103, 80877104}  # cancel, SSL, GSS encryption
WAITS = {b"S", b"H"}  # Sync, Flush: the client reads the server's answers next


class _ClientStream:
    """Parses one connection's client-to-server bytes into counts."""

    def __init__(self, counts: Counter[str]) -> None:
        self.counts = counts
        self.buffer = b""
        self.started = False  # past the untyped startup messages
        self.statements: dict[bytes, str] = {}  # prepared name -> SQL
        self.portals: dict[bytes, str] = {}  # portal name -> SQL
        self.in_transaction = False
        self.implicit = False  # a statement ran outside BEGIN since the last Sync
        self.waiting = False  # a wait sent and no answer seen since

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head = 4 if not self.started else 5
            if len(self.buffer) < head:
                return
            if not self.started:
                (length,) = struct.unpack("!I", self.buffer[:4])
                kind, start = b"", 0
            else:
                kind = self.buffer[:1]
                (length,) = struct.unpack("!I", self.buffer[1:5])
                start = 1
            end = start + length
            if len(self.buffer) < end:
                return
            body, self.buffer = self.buffer[start + 4 : end], self.buffer[end:]
            if self.started:
                self._message(kind, body)
            elif struct.unpack("!I", body[:4])[0] not in SPECIAL_REQUESTS:
                self.started = True

    def _message(self, kind: bytes, body: bytes) -> None:
        if kind == b"Q":
            self._wait()
            sql = body.rstrip(b"\0").decode()
            for part in filter(str.strip, sql.split(";")):
                self._statement(part)
            self._end_implicit()
        elif kind == b"P":
            name, rest = body.split(b"\0", 1)
            self.statements[name] = rest.split(b"\0", 1)[0].decode()
        elif kind == b"B":
            portal, name, _ = body.split(b"\0", 2)
            self.portals[portal] = self.statements.get(name, "")
        elif kind == b"E":
            self._statement(self.portals.get(body.split(b"\0", 1)[0], ""))
        elif kind in WAITS:
            if kind == b"S":
                self._end_implicit()
            self._wait()

    def _wait(self) -> None:
        """A round trip, unless the client is still waiting for the answer to
        the previous one: psycopg ends a pipeline with Sync and Flush together."""
        if not self.waiting:
            self.counts["round_trips"] += 1
            self.waiting = True

    def answered(self, data: bytes) -> None:
        """The server sent something: the client's next wait is a new round
        trip. (A server sends only after a Sync, a Flush or a Query.)"""
        self.waiting = False

    def _statement(self, sql: str) -> None:
        self.counts["statements"] += 1
        words = sql.split(None, 2)
        verb = " ".join(words[:2]).upper()
        if verb.startswith(("BEGIN", "START TRANSACTION")):
            self.counts["begin"] += 1
            self.in_transaction = True
        elif verb.startswith(("COMMIT", "END")):
            self.counts["commit"] += 1
            self.in_transaction = False
        elif verb.startswith("ROLLBACK") and not verb.startswith("ROLLBACK TO"):
            self.counts["rollback"] += 1
            self.in_transaction = False
        elif not self.in_transaction:
            self.counts["autocommit"] += 1
            self.implicit = True

    def _end_implicit(self) -> None:
        """A Sync, or a simple Query's end: the statements run outside BEGIN
        since the last one were one transaction on the server."""
        if self.implicit:
            self.counts["implicit"] += 1
            self.implicit = False


class WireCounter:
    """A counting proxy to the server of ``dsn``; ``dsn`` of the counter is
    the one to connect to. ``snapshot()`` sums every connection's counts."""

    def __init__(self, dsn: str) -> None:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
        self._target = self._address(str(params.get("host") or "localhost"), params.get("port"))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        # plain text, so the proxy can read the messages
        self.dsn = make_conninfo(
            dsn, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
        )
        self._streams: list[_ClientStream] = []
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _address(host: str, port: Any) -> tuple[int, Any]:
        number = int(port or 5432)
        if host.startswith("/"):
            return socket.AF_UNIX, f"{host}/.s.PGSQL.{number}"
        return socket.AF_INET, (host, number)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            family, address = self._target
            server = socket.socket(family, socket.SOCK_STREAM)
            try:
                server.connect(address)
            except OSError:
                client.close()  # the client sees the server refuse, rather than wait
                server.close()
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if family == socket.AF_INET:
                server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = _ClientStream(Counter(connections=1))
            self._streams.append(stream)
            self._sockets += [client, server]
            for pump in ((client, server, stream.feed), (server, client, stream.answered)):
                threading.Thread(target=self._pump, args=pump, daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, seen: Callable[[bytes], None]) -> None:
        """Forwards bytes, after ``seen`` has read them: a message the client
        has had an answer to is always counted, and an answer is seen before
        the client can send its next wait."""
        try:
            while data := source.recv(65536):
                seen(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def snapshot(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for stream in list(self._streams):
            total.update(stream.counts)
        return total

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            sock.close()
