"""SqliteSaver's thread locks never let two processes hold one thread at
once: several processes take turns on one thread, each doing a
read-modify-write that loses counts if two of them ever overlap. Both kinds
are run: byte ranges of one file (Linux) and, as on other systems, per-thread
lock files that exist only while held (deleting them must not let two in)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pregelkit.checkpoint.sqlite
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite._filelock import RANGE_LOCKS, RANGES_FILE
from pregelkit.errors import ThreadBusyError

WORKER = """
import sys
import time
from pathlib import Path

import pregelkit.checkpoint.sqlite
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.errors import ThreadBusyError

db, counter, rounds, wait = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pregelkit.checkpoint.sqlite.RANGE_LOCKS = sys.argv[5] == "ranges"
done = 0
with SqliteSaver.from_conn_string(db) as saver:
    while done < rounds:
        try:
            with saver.lock_thread("shared", wait=wait == "wait"):
                value = int(counter.read_text())
                time.sleep(0.0002)  # widen the window a broken lock would let a second process in
                counter.write_text(str(value + 1))
        except ThreadBusyError:
            continue
        done += 1
"""

PROCESSES = 4
ROUNDS = 150


KINDS = ["ranges", "files"] if RANGE_LOCKS else ["files"]
LEFT = {"ranges": [RANGES_FILE], "files": []}
"""What the lock directory holds when no thread is held."""


def _hammer(tmp_path: Path, wait: str, kind: str) -> None:
    db = tmp_path / "state.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    counter = tmp_path / "counter"
    counter.write_text("0")
    worker = tmp_path / "worker.py"
    worker.write_text(textwrap.dedent(WORKER))
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(db), str(counter), str(ROUNDS), wait, kind],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert int(counter.read_text()) == PROCESSES * ROUNDS
    assert os.listdir(tmp_path / "state.sqlite.locks") == LEFT[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_waiting_lockers_exclude_each_other_and_leave_no_lock_file(
    tmp_path: Path, kind: str
) -> None:
    _hammer(tmp_path, "wait", kind)


@pytest.mark.parametrize("kind", KINDS)
def test_non_waiting_lockers_exclude_each_other_and_leave_no_lock_file(
    tmp_path: Path, kind: str
) -> None:
    _hammer(tmp_path, "nowait", kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_held_thread_shows_as_running_without_being_locked(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pregelkit.checkpoint.sqlite, "RANGE_LOCKS", kind == "ranges")
    with (
        SqliteSaver.from_conn_string(str(tmp_path / "state.sqlite")) as saver,
        SqliteSaver.from_conn_string(str(tmp_path / "state.sqlite")) as other,
    ):
        saver.setup()
        assert not saver.thread_is_running("t")
        with saver.lock_thread("t"):
            assert saver.thread_is_running("t")
            assert other.thread_is_running("t")
            assert not saver.thread_is_running("other")
            for run in (saver, other):  # another run, of this saver or of another one
                with pytest.raises(ThreadBusyError), run.lock_thread("t"):
                    pass
        assert not saver.thread_is_running("t")
        assert os.listdir(tmp_path / "state.sqlite.locks") == LEFT[kind]
