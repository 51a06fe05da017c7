"""Other sites' web pages cannot drive ``pregelkit serve`` through the
user's browser: a cross-origin POST is refused before it queues anything
(a real headless Chromium tries, from a page of another origin), and a
server without keys answers only requests addressed to a loopback name,
so a name rebound to 127.0.0.1 reaches nothing."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_serve import Server, _config

KEY = "origin-test-key"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No keys: listens on 127.0.0.1 alone."""
    tmp = tmp_path_factory.mktemp("origin")
    srv = Server(["--config", str(_config(tmp)), "--db", str(tmp / "o.sqlite")], tmp)
    yield srv
    srv.stop()


def _threads(server: Server, **headers: str) -> int:
    found = httpx.post(server.url + "/threads/search", json={"limit": 1000}, headers=headers)
    assert found.status_code == 200, found.text
    return len(found.json())


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "null"},  # a sandboxed frame or a file:// page
        {"origin": "http://127.0.0.1:1"},  # another port is another origin
        {"sec-fetch-site": "cross-site"},
    ],
)
def test_a_cross_origin_post_is_refused_before_anything_is_queued(
    open_server: Server, headers: dict[str, str]
) -> None:
    before = _threads(open_server)
    # a form's body: what a page may send with no preflight
    sent = httpx.post(
        open_server.url + "/threads",
        content=b'{"metadata": {"by": "evil"}}',
        headers={"content-type": "text/plain", **headers},
    )
    assert sent.status_code == 403, sent.text
    assert "refused" in sent.json()["detail"]
    assert _threads(open_server) == before


def test_the_servers_own_origin_and_programs_without_one_are_served(open_server: Server) -> None:
    own = httpx.post(open_server.url + "/threads", json={}, headers={"origin": open_server.url})
    assert own.status_code == 200, own.text
    assert httpx.post(open_server.url + "/threads", json={}).status_code == 200  # the SDK, curl
    # reads are not refused for their origin: no CORS header lets a page read them
    read = httpx.get(open_server.url + "/info", headers={"origin": "http://evil.example"})
    assert read.status_code == 200
    assert not any(h.startswith("access-control-") for h in read.headers)
    for typed in ("none", "same-origin"):  # an address typed in; the server's own page
        assert httpx.get(open_server.url + "/info", headers={"sec-fetch-site": typed}).is_success


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_get_made_for_another_sites_page_is_refused(open_server: Server, site: str) -> None:
    """A GET has effects too: ``join_stream`` with ``cancel_on_disconnect``
    cancels a run when its reader goes (an <img> of another page would be
    such a reader)."""
    url = open_server.url + "/threads/" + "0" * 32 + "/runs/" + "1" * 32 + "/stream"
    got = httpx.get(url, params={"cancel_on_disconnect": "true"}, headers={"sec-fetch-site": site})
    assert got.status_code == 403 and "another site" in got.json()["detail"]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:2024", "10.0.0.1"])
def test_a_server_without_keys_answers_only_loopback_names(open_server: Server, host: str) -> None:
    rebound = httpx.get(open_server.url + "/info", headers={"host": host})
    assert rebound.status_code == 403
    assert "localhost" in rebound.json()["detail"]
    for name in ("localhost", f"localhost:{open_server.port}", "127.0.0.1", "127.0.0.2:80"):
        assert httpx.get(open_server.url + "/info", headers={"host": name}).status_code == 200


def test_a_server_with_keys_is_reached_by_any_name_but_still_not_cross_origin(
    tmp_path: Path,
) -> None:
    srv = Server(
        ["--config", str(_config(tmp_path)), "--db", str(tmp_path / "k.sqlite")],
        tmp_path,
        PREGELKIT_API_KEY=KEY,
    )
    try:
        key = {"x-api-key": KEY}
        assert httpx.get(srv.url + "/info", headers={**key, "host": "api.example"}).is_success
        evil = httpx.post(
            srv.url + "/threads", json={}, headers={**key, "origin": "http://evil.example"}
        )
        assert evil.status_code == 403
    finally:
        srv.stop()


def test_a_page_of_another_origin_in_a_real_browser_queues_nothing(
    open_server: Server, browser: Any
) -> None:
    """What an attacker's page would do, from another origin on this
    machine (another port: the browser's private-network rules let it
    through): a no-cors POST, no preflight, its answer unreadable."""
    before = _threads(open_server)
    page_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Elsewhere)
    threading.Thread(target=page_server.serve_forever, daemon=True).start()
    page = browser.new_page()
    try:
        page.goto(f"http://127.0.0.1:{page_server.server_address[1]}/")
        status = page.evaluate(
            """url => fetch(url + "/threads", {method: "POST", mode: "no-cors",
                  headers: {"content-type": "text/plain"}, body: "{}"})
                  .then(r => "sent").catch(e => "blocked: " + e)""",
            open_server.url,
        )
    finally:
        page.close()
        page_server.shutdown()
    assert status == "sent"  # the browser sent it: the server refused it
    assert _threads(open_server) == before


class _Elsewhere(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<title>elsewhere</title>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None
