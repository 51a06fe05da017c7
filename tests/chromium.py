"""Headless Chromium for the browser tests (the ``browser`` fixture of
conftest.py), driven with Playwright.

Chromium is the system's (Debian: ``apt-get install chromium``; ``.ci/run``
installs it, ``PREGELKIT_CHROMIUM`` names another); Playwright's own browser
download is never used. Without it a browser test skips, except under
``CI=true``, where a missing browser fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("PREGELKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing(what: str) -> None:
    message = (
        f"{what}: the browser tests need Chromium (apt-get install chromium) and "
        "Playwright (pip install -e '.[test]')"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium (skips or fails the test when there is none)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    if not os.path.exists(CHROMIUM):
        _missing(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
