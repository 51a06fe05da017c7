"""A PostgreSQL server the fault-injection tests may stop and start again at
will (the suite's shared server is ``_pg_server.postgres_server``): started
as the ``postgres`` user when run as root, on a free port, with its data in a
temporary folder."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

from _pg_server import PostgresUnavailable, free_port, postgres_bin


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.fail(
            f"{what} failed ({' '.join(cmd)}):\n{done.stdout}\n{done.stderr}", pytrace=False
        )


class PgServer:
    """One server: ``start()`` once (initdb, then run), then ``stop()`` /
    ``start()`` again at will, and ``destroy()`` at the end."""

    def __init__(self, *, durable: bool = False) -> None:
        """``durable``: a commit survives ``stop()`` (an immediate shutdown),
        as in production; otherwise commits are not waited for (faster, and
        enough for tests that never crash the server)."""
        self.durable = durable
        try:
            self.bindir = postgres_bin()
        except PostgresUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        self.root = tempfile.mkdtemp(prefix="pregelkit-pg-")
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail(
                    "running as root, PostgreSQL must run as the `postgres` user, which does "
                    "not exist: install the `postgresql` package (`bash .ci/postgres-binaries`) "
                    "or create the user",
                    pytrace=False,
                )
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "log")
        self.port = free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"
        _run(
            [*self.as_user, str(self.bindir / "initdb"), "-D", self.data, "-U", "postgres",
             "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            "initdb",
        )  # fmt: skip

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit={'on' if self.durable else 'off'} -c full_page_writes=off "
            "-c max_connections=200"
        )
        _run(
            [*self.as_user, str(self.bindir / "pg_ctl"), "-D", self.data, "-l", self.log,
             "-o", options, "-w", "-t", "60", "start"],
            f"starting PostgreSQL (log: {self.log})",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop at once, as a crash would (``-m immediate``)."""
        subprocess.run(
            [*self.as_user, str(self.bindir / "pg_ctl"), "-D", self.data, "-m", "immediate",
             "-w", "stop"],
            capture_output=True,
            check=False,
        )  # fmt: skip

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
