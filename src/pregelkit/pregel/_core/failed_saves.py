"""A run whose save failed: what it stops, and what it says.

Once one saver call of a run fails, the run must not advance: a task body
started afterwards could have effects whose results can never be recorded,
and a checkpoint saved afterwards could claim progress that was lost. The
loop records the first failure here; every task boundary (a call being
scheduled, a body about to start, a step ending) asks ``raise_if_failed``,
and the saver calls that come after are not made, only listed, so the final
error can say exactly what was not saved.

A failed cache write stops the run the same way, but the saver's saves go
on: the cache holds nothing a checkpoint depends on, and dropping them lost
what the run had finished (with ``durability="exit"``, the whole run).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from pregelkit.errors import LeaseLostError, StorageError
from pregelkit.pregel._core.effects import SaveWrites

__all__ = ["RunFaults", "asave_now", "describe_call", "save_now"]

_ID = re.compile(r" \(id [^)]*\)")


class RunFaults:
    """The first failed save of one run, and every save not made after it."""

    __slots__ = ("_lock", "failure", "not_saved", "saver_failure", "thread_id")

    def __init__(self, thread_id: str | None) -> None:
        self.thread_id = thread_id
        self.failure: BaseException | None = None
        """The first failed save, of the saver or the cache: the run stops."""
        self.saver_failure: BaseException | None = None
        """The first failed saver save: nothing more is saved."""
        self.not_saved: list[str] = []
        self._lock = threading.Lock()

    def record(self, exc: BaseException, what: str, *, saver: bool = True) -> None:
        """A save of ``what`` failed with ``exc`` (only the first failure is
        kept); ``saver=False``: a cache write, which stops no save."""
        with self._lock:
            if self.failure is None:
                self.failure = exc
            if saver and self.saver_failure is None:
                self.saver_failure = exc
            self.not_saved.append(what)

    def skip(self, what: str) -> None:
        """``what`` is not saved because an earlier save failed."""
        with self._lock:
            self.not_saved.append(what)

    def raise_if_failed(self, step: int) -> None:
        if self.failure is not None:
            raise self.error(step)

    def error(self, step: int) -> BaseException:
        """What the run raises: for a storage failure, a ``StorageError``
        naming the thread, the step and what was not saved, with the
        driver's error as its cause; any other failed save (a value the
        serializer refused) is raised as it is."""
        failure = self.saver_failure or self.failure
        assert failure is not None
        if not isinstance(failure, StorageError) or isinstance(failure, LeaseLostError):
            return failure  # a lost lease is the worker's to handle, as it is
        with self._lock:
            lost = list(dict.fromkeys(self.not_saved))
        counts = Counter(_ID.sub("", what) for what in lost)
        shown = "; ".join(f"{what} (x{n})" if n > 1 else what for what, n in counts.items())
        about = f"thread {self.thread_id!r}" if self.thread_id is not None else "the run"
        error = StorageError(
            f"{about} stopped at step {step}: a save failed, so no further task was started. "
            f"Not saved: {shown}. Cause: {failure}",
            thread_id=self.thread_id,
            not_saved=lost,
        )
        error.__cause__ = failure.__cause__ or failure
        return error


def describe_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """What a saver or cache call the loop queued would have saved."""
    name = getattr(fn, "__name__", "")
    if args and isinstance(args[-1], SaveWrites):  # the lanes' put_writes
        return f"the writes of {args[-1].who}"
    if name in ("put", "aput") and len(args) >= 3 and isinstance(args[2], dict):
        return f"the checkpoint of step {args[2].get('step')}"
    if name in ("set", "aset"):
        return "cache entries"
    return name or repr(fn)


def save_now(faults: RunFaults, step: int, fn: Callable[..., Any], *args: Any) -> Any:
    """A saver call made on the caller's path (``durability="sync"``): a
    storage failure stops the run; once one has, nothing more is saved."""
    if faults.saver_failure is not None:
        faults.skip(describe_call(fn, args))
        raise faults.error(step)
    try:
        return fn(*args)
    except StorageError as exc:
        faults.record(exc, describe_call(fn, args))
        raise faults.error(step) from exc


async def asave_now(faults: RunFaults, step: int, afn: Callable[..., Any], *args: Any) -> Any:
    """The async twin of ``save_now``."""
    if faults.saver_failure is not None:
        faults.skip(describe_call(afn, args))
        raise faults.error(step)
    try:
        return await afn(*args)
    except StorageError as exc:
        faults.record(exc, describe_call(afn, args))
        raise faults.error(step) from exc
