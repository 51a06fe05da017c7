"""One run per thread across processes: a lock the OS releases when the
holder dies, however it dies.

Where the OS has open file description locks (Linux), a thread is a
one-byte range of one file, ``<database>.locks/threads``, at an offset from
the hash of its id (``RangeLock``): taking it is an ``open`` of a file that
exists and one ``fcntl``, and nothing piles up. Elsewhere it is an
exclusive ``flock`` on a file of its own that exists only while someone
holds it (``FileLock``):

A lock file left behind after every run would pile up (one per thread ever
run), but deleting a lock file is only safe if nobody can end up holding a
lock on a file that is no longer the one at the path. So the holder deletes
the file while it still holds the lock, and whoever gets the lock checks
that the file it locked is still the one at the path; if not (its last holder
deleted it meanwhile), it starts again on the file now there. At any moment
only the holder of the file linked at the path counts as holding the thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import sys
from contextlib import AbstractContextManager

import xxhash

from pregelkit.errors import ThreadBusyError

if sys.platform != "win32":
    import fcntl

_PROC_LOCKS = "/proc/locks"

RANGE_LOCKS = sys.platform == "linux" and hasattr(fcntl, "F_OFD_SETLK")
"""Whether threads are held as byte ranges of one file (``RangeLock``)."""

RANGES_FILE = "threads"
"""The file of ``RangeLock``, in the database's lock directory."""


def _flock(kind: int, offset: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)


def _offset(thread_id: str) -> int:
    """Where ``thread_id``'s byte lies: 62 bits of its hash (a collision of
    two ids in 2**62 would make them exclude each other, nothing worse)."""
    return xxhash.xxh3_64_intdigest(thread_id.encode()) >> 2


class _ThreadLock(AbstractContextManager[None]):
    """A lock on ``thread_id`` held through a descriptor of ``path``."""

    def __init__(self, path: str, thread_id: str, wait: bool) -> None:
        self.path = path
        self.thread_id = thread_id
        self.wait = wait
        self.fd = -1


class RangeLock(_ThreadLock):
    """An exclusive open-file-description lock on ``thread_id``'s byte of
    ``path``, through a descriptor of its own: it excludes other runs of this
    process as well as other processes, and closing the descriptor (or the
    process dying) releases it."""

    def __enter__(self) -> None:
        fd = _open_creating(self.path)
        try:
            fcntl.fcntl(
                fd,
                fcntl.F_OFD_SETLKW if self.wait else fcntl.F_OFD_SETLK,
                _flock(fcntl.F_WRLCK, _offset(self.thread_id)),
            )
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise ThreadBusyError(self.thread_id, f"(lock file: {self.path})") from None
            raise
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def __exit__(self, *exc: object) -> None:
        fd, self.fd = self.fd, -1
        os.close(fd)  # releases the lock


def _open_creating(path: str) -> int:
    """``path`` opened for writing, created (with the lock directory, beside
    the database, if it is missing) if need be."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:  # no lock directory yet (or it was removed): make it
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.dirname(path))
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def range_is_held(path: str, thread_id: str) -> bool:
    """Whether some run holds ``thread_id``'s byte of ``path``, asked
    without taking it (a probing lock could make a starting run fail)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # no run ever took a thread of this database
    try:
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _flock(fcntl.F_WRLCK, _offset(thread_id)))
    finally:
        os.close(fd)
    return bool(struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK)


class FileLock(_ThreadLock):
    """An exclusive ``flock`` on ``path``: per open file, so it excludes other
    threads of this process as well as other processes. The file is removed
    when the lock is released; the directory stays (one empty directory)."""

    def __enter__(self) -> None:
        while True:
            fd = _open_creating(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ThreadBusyError(self.thread_id, f"(lock file: {self.path})") from None
            except BaseException:
                os.close(fd)
                raise
            if _is_linked(fd, self.path):
                self.fd = fd
                return
            os.close(fd)  # its last holder deleted it meanwhile: lock the file there now

    def __exit__(self, *exc: object) -> None:
        fd, self.fd = self.fd, -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # still holding it: nobody can lock this file and keep it
        os.close(fd)  # closing the last descriptor releases the flock


def _is_linked(fd: int, path: str) -> bool:
    """Whether the open file ``fd`` is still the file at ``path``."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (opened.st_dev, opened.st_ino)


def is_held(path: str) -> bool:
    """Whether some process holds the lock on ``path``, without taking it (a
    probing lock could make a starting run fail as busy): read from
    ``/proc/locks`` where the OS has one, else a probe with a shared lock."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False  # released (the holder deletes the file) or never taken
    try:
        with open(_PROC_LOCKS, encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        return _probe(path)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF"; "1: -> FLOCK ..." is a waiter
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            return True
    return False


def _probe(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
