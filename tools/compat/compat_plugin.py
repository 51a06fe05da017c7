"""pytest plugin for both sides of the compatibility run: runs only the
selected tests and records each one's outcome as JSON.

``COMPAT_SELECT`` names a file of ``path::Test`` keys (parameters left out):
tests not listed are deselected. ``COMPAT_NODEIDS``, if set, names a file of
exact node ids to keep (the pregelkit side runs only what passed on
LangGraph). ``COMPAT_RESULTS`` is where the outcomes go: node id ->
``{"outcome": ..., "reason": ...}``.

Tests parametrized with a Redis backend are never run: there is no Redis
server in the session (LangGraph's own runs of them would only wait for one
until they time out) and pregelkit has no Redis cache or store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_results: dict[str, dict[str, str]] = {}


def _lines(var: str) -> set[str] | None:
    name = os.environ.get(var)
    if not name:
        return None
    return set(Path(name).read_text(encoding="utf-8").splitlines())


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    keys = _lines("COMPAT_SELECT")
    nodeids = _lines("COMPAT_NODEIDS")
    keep, drop = [], []
    for item in items:
        key = item.nodeid.split("[", 1)[0]
        params = getattr(getattr(item, "callspec", None), "params", {})
        wanted = (
            (keys is None or key in keys)
            and (nodeids is None or item.nodeid in nodeids)
            and not any(isinstance(v, str) and v == "redis" for v in params.values())
        )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _reason(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    if isinstance(report.longrepr, tuple):  # a skip: (path, line, message)
        return str(report.longrepr[2])
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""


def pytest_runtest_logreport(report: Any) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
    if entry["outcome"] != "passed":
        return
    if report.failed:
        entry.update(outcome="failed", reason=_reason(report))
    elif report.skipped:
        entry.update(outcome="skipped", reason=_reason(report))
    elif report.when == "call" and hasattr(report, "wasxfail"):
        entry.update(outcome="skipped", reason="xfail")


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _results[report.nodeid] = {"outcome": "failed", "reason": _reason(report)}


def pytest_sessionfinish(session: Any) -> None:
    if out := os.environ.get("COMPAT_RESULTS"):
        Path(out).write_text(json.dumps(_results, indent=0, sort_keys=True), encoding="utf-8")
