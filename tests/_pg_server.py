"""A throwaway PostgreSQL server: initdb into a temporary folder, start it on
a free (or given) local port, stop it and delete everything on exit.

Shared by the test suite (``tests/conftest.py``) and the compatibility run
(``tools/compat``), which points LangGraph's PostgreSQL tests at it. It needs
only the standard library, so it can run before anything is installed.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """No server could be started; the message says what to install or set."""


def postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin``."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parts[4].split(".")],
    )
    if not found:
        raise PostgresUnavailable(
            "PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/initdb. Install it "
            "with `bash .ci/postgres-binaries` (or `apt-get install postgresql`), or set "
            "PREGELKIT_TEST_PG_DSN to a server to use."
        )
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise PostgresUnavailable(f"{what} failed ({' '.join(cmd)}):\n{done.stdout}\n{done.stderr}")


@contextmanager
def postgres_server(port: int | None = None) -> Iterator[str]:
    """Yields the DSN of the new server's ``postgres`` database (user
    ``postgres``, trust authentication, so any password is accepted)."""
    bindir = postgres_bin()
    root = tempfile.mkdtemp(prefix="pregelkit-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailable(
                "running as root, PostgreSQL must run as the `postgres` user, which does not "
                "exist: install the `postgresql` package (`bash .ci/postgres-binaries`) or "
                "create the user"
            ) from None
        os.chown(root, entry.pw_uid, entry.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(root, "data")
    try:
        _run(
            [*as_user, str(bindir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-locale", "--no-sync"],
            "initdb",
        )  # fmt: skip
        port = _start(bindir, as_user, root, port)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
        finally:
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                capture_output=True,
                check=False,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _start(bindir: Path, as_user: list[str], root: str, port: int | None) -> int:
    """Start the server initdb made under ``root``; its port. A free port is
    free only when asked: another process (a client's own end of a
    connection, another pytest-xdist worker's server) may take it before the
    server binds it, and then another one is tried."""
    data, log = os.path.join(root, "data"), os.path.join(root, "log")
    attempts = 1 if port else 3
    while True:
        chosen = port or free_port()
        options = (
            f"-p {chosen} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        try:
            _run(
                [*as_user, str(bindir / "pg_ctl"), "-D", data, "-l", log, "-o", options, "-w",
                 "-t", "60", "start"],
                f"starting PostgreSQL (log: {log})",
            )  # fmt: skip
            return chosen
        except PostgresUnavailable:
            attempts -= 1
            taken = "Address already in use" in Path(log).read_text("utf-8", "replace")
            if not attempts or not taken:
                raise
