"""What a run under the crash checker leaves behind: one JSON line per event,
written straight to the file (``os.write`` on an ``O_APPEND`` descriptor,
no buffer), so every line written before a SIGKILL is there after it.

The events: ``save`` (a checkpoint or a task's writes, committed), ``effect``
(``effect(name)``, with the task it ran in), ``out`` (the run's result,
pickled) and ``error`` (the run raised).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["CrashLog", "effect", "open_log"]

_log: CrashLog | None = None


class CrashLog:
    __slots__ = ("fd",)

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, event: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(event, default=repr) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


def open_log(path: str) -> CrashLog:
    """Make ``path`` the log this process's ``effect()`` calls go to."""
    global _log
    if _log is not None:
        _log.close()
    _log = CrashLog(path)
    return _log


def effect(name: str) -> None:
    """Mark a side effect of the workflow (an email sent, a card charged) so
    the crash checker can count it: once the task it ran in has saved its
    result, or a call that task made later has, a resume after a crash must
    not do it again. Call it right where the effect happens; outside
    ``check_crash_safety`` it does nothing."""
    if _log is None:
        return
    from pregelkit._internal._constants import CONFIG_KEY_TASK_ID
    from pregelkit._internal._current import CURRENT

    scope = CURRENT.get()  # None outside a run: never made at-most-once by a save
    task = None if scope is None else scope.config["configurable"].get(CONFIG_KEY_TASK_ID)
    _log.write({"effect": name, "task": task})
