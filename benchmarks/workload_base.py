"""What every benchmark workload is made of: the library chosen by name, and
a built workload (``Prepared``) that ``workloads.py`` warms up, times and checks.

Kept apart from ``workloads.py`` so the workload modules it gathers
(``short_runs.py``) can share it without importing the script that runs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LIBS = ("pregelkit", "langgraph")
WARMUP_N = 8


class Lib:
    """The modules of one library, looked up by name."""

    def __init__(self, name: str) -> None:
        if name not in LIBS:
            raise SystemExit(f"unknown library {name!r}; expected one of {LIBS}")
        self.name = name
        self.func = importlib.import_module(f"{name}.func")
        self.types = importlib.import_module(f"{name}.types")

    def module(self, suffix: str) -> Any:
        return importlib.import_module(f"{self.name}.{suffix}")


@dataclass
class Prepared:
    """A built workload: ``warmup()`` is run untimed, ``run()`` is timed.

    ``check(result)`` raises if the timed run did not compute what it should.
    ``close()`` releases resources (database files, connections).
    ``extra()`` returns figures beyond the time, after the timed run (and
    may run an untimed pass of its own for them, as the wire counts do).
    ``passes``: how many times ``run()`` is timed, the median kept; for a
    workload that can run again unchanged and whose one run is long enough
    for a burst of the machine's other work to move it (the CPU-bound
    fan-outs: one second each).
    """

    run: Callable[[], Any]
    passes: int = 1
    warmup: Callable[[], Any] = lambda: None
    check: Callable[[Any], None] = lambda result: None
    close: Callable[[], None] = lambda: None
    extra: Callable[[], dict[str, Any]] = dict


def expect(got: Any, want: Any) -> None:
    if got != want:
        raise AssertionError(f"wrong result: got {got!r}, expected {want!r}")


def thread_config(tid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid}, "recursion_limit": 10_000_000}
