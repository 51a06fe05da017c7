"""A TCP proxy in front of a PostgreSQL server that can stop a client's
statement half-way: the tests of the batched write path use it to kill a
client, or to lose its connection, while its saves are on the wire.

``FaultProxy(dsn, marker, action)``: the first client chunk holding
``marker`` (bytes of the SQL text) is met by ``action``:

- ``"freeze"``: nothing more goes to the server (the chunk is held back),
  ``hit`` is set; the test then kills the client, and the server sees the
  connection close with the statement never received;
- ``"mute"``: the chunk goes to the server, whose answers no longer reach
  the client: the server commits, the client never hears of it (the test
  kills it then);
- ``"cut"``: half of the chunk goes to the server, then both connections
  close: the server gets a truncated message, the client a broken
  connection.

Later connections (a client reconnecting) pass through untouched.
"""

from __future__ import annotations

import socket
import threading
from typing import Literal

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class FaultProxy:
    def __init__(self, dsn: str, marker: bytes, action: Literal["freeze", "mute", "cut"]) -> None:
        params = conninfo_to_dict(dsn)
        self._target = (str(params.get("host") or "localhost"), int(params.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        self.dsn = make_conninfo(
            dsn, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
        )
        self.marker = marker
        self.action = action
        self.hit = threading.Event()
        self._muted: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                if not self.hit.is_set() and self.marker in data:
                    if self.action == "cut":
                        server.sendall(data[: len(data) // 2])
                        self.hit.set()
                        _close(client, server)
                        return
                    if self.action == "mute":
                        self._muted = client
                        server.sendall(data)
                        self.hit.set()
                        continue
                    self.hit.set()
                    client.recv(65536)  # held until the client dies
                    return
                server.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                if self._muted is not client:
                    client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, server)

    def close(self) -> None:
        # shut down before closing: a socket closed while another thread
        # is blocked in its recv stays open in the kernel (no FIN goes
        # out), so the server would keep the session, and its locks, on
        self._listener.close()
        _close(*self._sockets)
        for sock in self._sockets:
            sock.close()


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
