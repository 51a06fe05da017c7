"""``import pregelkit.func`` loads only what every workflow needs.

The import-time goal (< 50 ms, measured in ``benchmarks/``) is kept by
loading optional extras and rarely used machinery (the run queue, the
stdlib's ``uuid``/``socket``/``asyncio``...) on first use. A timing test
would be flaky; which modules a fresh interpreter holds is not.
"""

from __future__ import annotations

import subprocess
import sys

LAZY = (
    # optional extras: never imported by `import pregelkit`
    "psycopg",
    "cryptography",
    "dask",
    "distributed",
    "opentelemetry",
    "rich",
    "playwright",
    # loaded on first use
    "pregelkit.checkpoint._runqueue",
    "pregelkit.checkpoint.runs",
    "pregelkit.worker",
    "asyncio",
    "concurrent.futures",
    "sqlite3",
    "uuid",
    "socket",
    "platform",
    "logging",
    "json",
)


def test_import_func_loads_no_optional_or_rarely_used_module() -> None:
    code = (
        "import sys, pregelkit, pregelkit.func\n"
        f"print(sorted(m for m in {LAZY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_submit_still_finds_the_run_queue(tmp_path) -> None:
    """The lazy import is the submit path's: queueing a run works."""
    from pregelkit.checkpoint.sqlite import SqliteSaver
    from pregelkit.func import entrypoint

    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:

        @entrypoint(checkpointer=saver)
        def flow(x: int) -> int:
            return x

        handle = flow.submit(1, {"configurable": {"thread_id": "t"}})
        assert handle.thread_id == "t"
        assert handle.status() == "queued"
