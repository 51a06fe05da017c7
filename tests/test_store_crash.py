"""A batch is all or nothing, even when the process is killed in the middle
of it: SIGKILL a writer of a SQLite store and a PostgreSQL store while it
rewrites many items per batch, then check every item is from one batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

WRITER = textwrap.dedent(
    """
    import sys
    from pregelkit.store.base import PutOp

    kind, target = sys.argv[1], sys.argv[2]
    if kind == "sqlite":
        from pregelkit.store.sqlite import SqliteStore as Store
    else:
        from pregelkit.store.postgres import PostgresStore as Store
    with Store.from_conn_string(target) as store:
        generation = 0
        while True:
            generation += 1
            store.batch(
                [PutOp(("gen",), str(i), {"generation": generation}) for i in range(300)]
            )
            print(generation, flush=True)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_sigkill_mid_batch_leaves_whole_batches(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        target = str(tmp_path / "store.db")
    else:
        target = request.getfixturevalue("postgres_database")("pregelkit_store_crash")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    for attempt in range(2):
        proc = subprocess.Popen(
            [sys.executable, str(script), kind, target], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        written = 0
        deadline = time.monotonic() + 60
        while written < 2 + attempt and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            written = int(line)
        time.sleep(0.05 * attempt)  # land inside a later batch
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        generations = _generations(kind, target)
        assert len(generations) == 1, f"a partial batch is visible: {sorted(generations)}"
        assert min(generations) >= written


def _generations(kind: str, target: str) -> set[Any]:
    if kind == "sqlite":
        from pregelkit.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(target) as store:
            items = store.search(("gen",), limit=1000)
    else:
        from pregelkit.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(target) as store:
            items = store.search(("gen",), limit=1000)
    assert len(items) == 300
    return {item.value["generation"] for item in items}
