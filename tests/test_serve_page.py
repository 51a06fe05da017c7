"""The browser example (examples/serve_page/) in a real headless Chromium:
``pregelkit serve --static`` serves its page at ``/ui/``; the page starts a
run, shows its ``updates`` as they stream, shows the interrupt's question,
answers it from a button with ``command: {resume: ...}`` and shows the
thread's final state. LangGraph's client then reads the same thread. The
API still wants its key: only the page's files are served without one.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from test_serve import Server, _env

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "serve_page"
KEY = "page-test-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve_page")
    config = str(EXAMPLE / "pregelkit.json")
    static = str(EXAMPLE / "static")
    args = ["--config", config, "--static", static, "--db", str(tmp / "page.sqlite")]
    srv = Server([*args, "--auth-key", KEY], tmp)
    yield srv
    srv.stop()


class Page:
    """The example's page, with what the browser reported meanwhile."""

    def __init__(self, browser: Any, url: str) -> None:
        self.url = url
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page()
        self.page.on(
            "console",
            lambda m: self.problems.append(m.text) if m.type in ("error", "warning") else None,
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url + "/ui/")

    def wait_for(self, state: str) -> None:
        self.page.wait_for_selector(f'#status[data-state="{state}"]', timeout=10_000)

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).inner_text())


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Page]:
    shown = Page(browser, server.url)
    yield shown
    shown.page.close()


def test_the_page_streams_a_run_and_answers_its_interrupt(server: Server, page: Page) -> None:
    page.page.fill("#api-key", KEY)
    page.page.fill("#topic", "gardens")
    page.page.click("#start")
    page.wait_for("interrupted")
    assert page.page.locator("#updates li").all_inner_texts() == [
        'draft: "A short note about gardens."',
        "count_words: 5",
        '__interrupt__: [{"value":{"question":"Publish this 5-word draft?",'
        f'"draft":"A short note about gardens."}},"id":"{_interrupt_id(page)}"}}]',
    ]
    assert page.text("#question-text") == "Publish this 5-word draft?"
    assert page.text("#question-draft") == "Draft: A short note about gardens."

    page.page.click("#approve")
    page.wait_for("done")
    final = {"draft": "A short note about gardens.", "words": 5, "published": True}
    assert json.loads(page.text("#result-values")) == final
    assert page.page.locator("#updates li").last.inner_text() == (
        f"review: {json.dumps(final, separators=(',', ':'))}"
    )
    assert page.page.locator("#question").is_hidden()
    assert page.problems == []
    assert all(url.startswith(server.url + "/") for url in page.requests)  # one origin

    # the same thread, read with LangGraph's client
    tid = page.page.locator("#thread").get_attribute("data-thread-id")
    client = get_sync_client(url=server.url, api_key=KEY)
    assert client.threads.get_state(tid)["values"] == final
    thread = client.threads.get(tid)
    assert thread["status"] == "idle" and thread["metadata"]["from"] == "serve_page"
    runs = client.runs.list(tid)  # newest first: the answer, then the run that asked
    assert [r["status"] for r in runs] == ["success", "interrupted"]


def _interrupt_id(page: Page) -> str:
    """The id the server gave the interrupt, as the page listed it."""
    shown = page.page.locator("#updates li.interrupt").inner_text()
    data = json.loads(shown.removeprefix("__interrupt__: "))
    return str(data[0]["id"])


def test_the_files_need_no_key_but_the_api_still_does(server: Server) -> None:
    ui = httpx.get(server.url + "/ui/")
    assert ui.status_code == 200 and ui.headers["content-type"].startswith("text/html")
    assert ui.headers["x-content-type-options"] == "nosniff"
    assert ui.headers["x-frame-options"] == "DENY"
    assert httpx.get(server.url + "/ui", follow_redirects=True).url.path == "/ui/"
    assert httpx.get(server.url + "/ui/missing.js").status_code == 404
    assert httpx.post(server.url + "/threads", json={}).status_code == 401

    # a path that climbs out of /ui/ reaches no route (httpx would tidy it)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/ui/../threads", body="{}", headers={"content-type": "application/json"})
    assert conn.getresponse().status in (404, 405)
    conn.close()


def test_the_page_says_when_its_key_is_wrong(page: Page) -> None:
    page.page.fill("#api-key", "not-the-key")
    page.page.click("#start")
    page.wait_for("error")
    assert page.text("#error") == "401 from /threads: wrong API key"
    assert page.page.locator("#updates li").count() == 0


def test_a_missing_static_directory_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pregelkit", "serve", "--config", str(EXAMPLE / "pregelkit.json"),
         "--static", str(tmp_path / "nowhere"), "--db", str(tmp_path / "x.sqlite")],
        env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "is not a directory of files to serve at /ui/" in proc.stderr
