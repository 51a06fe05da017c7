"""How savers meet a failing database: which errors are worth another try,
how long to keep trying, and how the final error reads.

Every saver operation is one transaction that is safe to run again (writes
are upserts keyed by what they store), so a transient failure (a dropped
connection, a server restarting, a serialization conflict, a busy file) is
retried with backoff inside the saver. When the budget is spent, or the
failure is not transient (disk full, read-only), the caller gets a
:class:`~pregelkit.errors.StorageError` naming the operation and the thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

from pregelkit._internal._dataclass import lazy_dataclass
from pregelkit.errors import StorageError

__all__ = ["Attempts", "StorageRetry", "storage_error"]


@lazy_dataclass(frozen=True, slots=True)
class StorageRetry:
    """The retry budget of a saver for transient database errors.

    ``attempts`` counts the first try; pauses grow from ``initial_delay`` by
    ``backoff`` up to ``max_delay`` (with up to 25% jitter), and no retry
    starts after ``deadline`` seconds. The default rides out a dropped
    connection or a quick server restart (about 5 s) and then gives up, so a
    run stops instead of hanging while the database is away.
    """

    # Field order, as @dataclass lays them out: pickles stay byte for byte.
    __slots__ = ("attempts", "initial_delay", "max_delay", "backoff", "deadline")  # noqa: RUF023

    attempts: int
    initial_delay: float
    max_delay: float
    backoff: float
    deadline: float

    def __init__(
        self,
        attempts: int = 6,
        initial_delay: float = 0.1,
        max_delay: float = 2.0,
        backoff: float = 2.0,
        deadline: float = 10.0,
    ) -> None:
        object.__setattr__(self, "attempts", attempts)
        object.__setattr__(self, "initial_delay", initial_delay)
        object.__setattr__(self, "max_delay", max_delay)
        object.__setattr__(self, "backoff", backoff)
        object.__setattr__(self, "deadline", deadline)
        self.__post_init__()

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"StorageRetry(attempts=...) must be an int, got {self.attempts!r}")
        if self.attempts < 1:
            raise ValueError(f"StorageRetry(attempts=...) must be at least 1, got {self.attempts}")
        for name in ("initial_delay", "max_delay", "backoff", "deadline"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"StorageRetry({name}=...) must be a finite number >= 0, got {value!r}"
                )

    def delays(self) -> Iterator[float]:
        """The pause before each retry (``attempts - 1`` of them)."""
        import random  # only on a failure path: keeps it out of `import pregelkit`

        delay = self.initial_delay
        for _ in range(self.attempts - 1):
            yield min(delay, self.max_delay) * (1 + random.random() / 4)
            delay *= self.backoff


class Attempts:
    """One operation's use of a ``StorageRetry`` budget."""

    __slots__ = ("_deadline", "_delays", "tries")

    def __init__(self, retry: StorageRetry) -> None:
        self._delays = retry.delays()
        self._deadline = time.monotonic() + retry.deadline
        self.tries = 0

    def pause_after_failure(self, transient: bool) -> float | None:
        """How long to wait before the next try, or ``None`` when there is to
        be none (the failure is not transient, or the budget is spent)."""
        delay = next(self._delays, None) if transient else None
        if delay is None or time.monotonic() + delay > self._deadline:
            return None
        return delay


def storage_error(
    database: str, operation: str, thread_id: str | None, cause: BaseException, *, tries: int
) -> StorageError:
    """The error a saver raises for a failure it cannot ride out."""
    about = f" for thread {thread_id!r}" if thread_id else ""
    tried = f" after {tries} tries" if tries > 1 else ""
    return StorageError(
        f"{database}: {operation}{about} failed{tried}: {type(cause).__name__}: "
        f"{str(cause).strip() or 'no detail'}. What was being written was not saved; "
        "everything saved before is intact. Once the database is back, resume the thread "
        "with invoke(None, config).",
        thread_id=thread_id,
    )
