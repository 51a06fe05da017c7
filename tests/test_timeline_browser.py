"""The ``pregelkit timeline --html`` page in a real headless Chromium, driven
with Playwright: it loads without errors or network requests, draws one bar
per attempt, shows an attempt's details on hover, zooms and pans, and shows
hostile task names as text. It also takes the guide's screenshot
(docs/images/timeline.png).

Chromium is the system's (the ``browser`` fixture, ``chromium.py``): without
it the tests skip, except under ``CI=true``, where a missing browser fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pregelkit.cli._timeline_html import render_html
from pregelkit.observe.timeline import Timeline
from timeline_samples import ATTEMPTS, HOSTILE_ERROR, HOSTILE_NAME, guide_timeline, sample_timeline

SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "images" / "timeline.png"


class Page:
    """A page showing one timeline, with what the browser reported meanwhile."""

    def __init__(self, browser: Any, path: Path, html: str) -> None:
        path.write_text(html, encoding="utf-8")
        self.url = path.as_uri()
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1100, "height": 620})
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(self.url)

    def bar(self, name: str, attempt: int = 1) -> Any:
        index = self.page.evaluate(
            """([name, attempt]) => {
                const data = JSON.parse(document.getElementById("timeline-data").textContent);
                const all = data.runs.flatMap((r) => r.attempts);
                return all.findIndex((a) => a.name === name && a.attempt === attempt);
            }""",
            [name, attempt],
        )
        assert index >= 0, name
        return self.page.locator(f'rect.bar[data-index="{index}"]')

    def view(self) -> tuple[float, float]:
        t0, t1 = self.page.evaluate(
            "() => [document.getElementById('timeline').dataset.t0, "
            "document.getElementById('timeline').dataset.t1]"
        )
        return float(t0), float(t1)


@pytest.fixture(scope="module")
def sample(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    folder = tmp_path_factory.mktemp("timeline")
    page = Page(
        browser, folder / "sample.html", render_html(sample_timeline(), running=False, now=0)
    )
    yield page
    page.page.close()


def test_page_loads_without_errors_or_network(sample: Page) -> None:
    sample.page.wait_for_selector("rect.bar")
    assert sample.problems == []
    assert sample.requests == [sample.url]


def test_one_bar_per_attempt(sample: Page) -> None:
    assert sample.page.locator("rect.bar").count() == ATTEMPTS
    assert sample.page.locator("rect.bar.s-unfinished").count() == 1
    assert sample.page.locator("rect.bar.s-cached").count() == 1
    assert sample.page.locator("text.run-title").count() == 2


def test_hovering_a_bar_shows_its_details(sample: Page) -> None:
    tip = sample.page.locator("#tip")
    sample.bar("fetch", attempt=2).hover()
    assert tip.is_visible()
    lines = tip.inner_text().splitlines()
    assert lines[:5] == ["fetch", "duration: 300ms", "outcome: ok", "attempt: 2", "step: 1"]
    sample.bar("fetch", attempt=1).hover()
    text = tip.inner_text()
    assert text.startswith("fetch\n") and "error: KeyError: 'missing'" in text
    sample.page.mouse.move(5, 5)
    assert not tip.is_visible()


def test_hostile_names_are_shown_as_text(sample: Page) -> None:
    sample.bar(HOSTILE_NAME).hover()
    text = sample.page.locator("#tip").inner_text()
    assert text.startswith(HOSTILE_NAME + "\n")
    assert f"error: ValueError: {HOSTILE_ERROR}" in text
    assert sample.page.evaluate("() => window.__pwned") is None
    assert sample.page.locator("img").count() == 0
    assert sample.problems == []


def test_wheel_zooms_and_drag_pans(sample: Page) -> None:
    bar = sample.bar("slow")
    before = bar.bounding_box()
    t0, t1 = sample.view()
    box = sample.page.locator("#timeline").bounding_box()
    x, y = box["x"] + box["width"] * 0.6, box["y"] + 60
    sample.page.mouse.move(x, y)
    for _ in range(3):
        sample.page.mouse.wheel(0, -100)
    sample.page.wait_for_function(f"document.getElementById('timeline').dataset.t1 < {t1}")
    z0, z1 = sample.view()
    assert z1 - z0 < (t1 - t0) / 1.5
    assert bar.bounding_box()["width"] > before["width"] * 1.5
    sample.page.mouse.down()
    sample.page.mouse.move(x - 200, y, steps=4)
    sample.page.mouse.up()
    p0, p1 = sample.view()
    assert p0 > z0 and p1 - p0 == pytest.approx(z1 - z0)
    for _ in range(8):  # far past the end: the view stops with part of the chart in it
        sample.page.mouse.move(x, y)
        sample.page.mouse.down()
        sample.page.mouse.move(x - 400, y, steps=2)
        sample.page.mouse.up()
    e0, e1 = sample.view()
    assert e1 - e0 == pytest.approx(z1 - z0)
    assert e0 == pytest.approx(t1 - (e1 - e0) * 0.1)
    sample.page.locator("#reset").click()
    assert sample.view() == (t0, t1)
    assert sample.problems == []


def test_a_thread_without_attempts_says_so(browser: Any, tmp_path: Path) -> None:
    page = Page(
        browser, tmp_path / "empty.html", render_html(Timeline("t", ()), running=False, now=0)
    )
    try:
        assert page.page.locator("#empty").is_visible()
        assert page.page.locator("rect.bar").count() == 0
        assert page.problems == []
    finally:
        page.page.close()


def test_guide_screenshot(browser: Any, tmp_path: Path) -> None:
    page = Page(
        browser, tmp_path / "guide.html", render_html(guide_timeline(), running=False, now=0)
    )
    try:
        page.bar("fetch_page", attempt=2).hover()
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.page.screenshot(path=str(SCREENSHOT), full_page=True)
        assert SCREENSHOT.stat().st_size > 10_000
        assert page.problems == []
    finally:
        page.page.close()
