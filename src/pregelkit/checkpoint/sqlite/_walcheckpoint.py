"""WAL checkpoints of a saver's database, made on a thread of their own.

Every commit appends pages to the write-ahead log; SQLite copies them into
the database file (a WAL checkpoint) once the log reaches
``wal_autocheckpoint`` pages, inside the commit that crossed the mark. That
commit pays for copying every page written since the last one and for two
fsyncs: tens of milliseconds, against ~50 µs for a commit. Short runs on new
threads write ~60 KiB each, so on a 2-core machine that was 15-30% of their
wall-clock time, and all of it lands on one unlucky run (its p99).

``WalCheckpointer`` moves that work off the committing thread: every
``CHECKPOINT_EVERY`` commits the saver wakes a thread that makes a PASSIVE
checkpoint on a connection of its own. A passive checkpoint never takes the
write lock, so no commit waits for it. The writer keeps its own automatic
checkpoint, at ``BACKSTOP_PAGES``, as the backstop: while commits keep
coming a passive checkpoint cannot restart the log from its beginning, and
when the backstop does, it finds nearly every page copied already.
Durability is untouched: a WAL checkpoint only moves committed pages.
"""

from __future__ import annotations

import sqlite3
import threading
from urllib.parse import quote

__all__ = ["BACKSTOP_PAGES", "CHECKPOINT_EVERY", "WalCheckpointer"]

CHECKPOINT_EVERY = 100
"""Write commits between two background checkpoints (a short run on a new
thread is one commit of ~15 pages, a durable task one of ~4)."""

THREAD_NAME = "pregelkit-sqlite-wal"

BACKSTOP_PAGES = 5000
"""The writer's own ``wal_autocheckpoint`` (pages of 4 KiB: ~20 MiB of log)."""


class WalCheckpointer:
    """The background checkpoints of one saver's database file."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._commits = 0
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def committed(self) -> None:
        """Count a write commit; called by the saver after each one (its
        commits are serialized by its lock, so the count needs no lock)."""
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY:
            return
        self._commits = 0
        if self._thread is None:
            with self._start_lock:
                if self._closed or self._thread is not None:
                    return
                thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                try:
                    thread.start()
                except RuntimeError:
                    # no new threads at interpreter shutdown: the commit is
                    # made, and the writer's own checkpoint copies the log
                    return
                self._thread = thread
        self._wake.set()

    def _run(self) -> None:
        try:
            # mode=rw: a file removed under the saver is not created anew here
            uri = f"file:{quote(self._path)}?mode=rw"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return  # the writer's own automatic checkpoint still copies the log
        try:
            # a checkpoint that finds another one running skips, never waits
            conn.execute("PRAGMA busy_timeout = 0")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closed:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    pass  # busy, or a fault of the file: the writer's backstop tries again
        finally:
            conn.close()

    def close(self, wait: bool = True) -> None:
        """Stop the thread and close its connection; with ``wait``, before
        returning, so the saver's own connection is the last to close (the
        last connection closed checkpoints and removes the log). A saver
        dropped without ``close`` stops its thread this way too, not waiting."""
        with self._start_lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()
