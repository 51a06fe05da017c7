"""Web pages of other sites may not drive the API through the user's browser.

A browser lets any page the user visits send a "simple" cross-origin POST
(a form's ``text/plain`` body, no preflight) to ``http://127.0.0.1:2024``:
it cannot read the answer, but a server without keys would still queue the
run. And a site whose name its owner points at 127.0.0.1 (DNS rebinding)
makes the browser treat the local server as that site's own, answers
included. So:

- a request that changes anything (any method but GET, HEAD and OPTIONS)
  and names an ``Origin`` other than the server's own (its scheme and
  ``Host``) is refused, 403, as is any request a browser marks as made for
  another site's or another origin's page (``Sec-Fetch-Site`` other than
  ``same-origin`` or ``none``: a GET has effects too, a stream's
  ``cancel_on_disconnect``); programs (the SDK, curl) send neither;
- a server without keys or an auth hook, which only listens on the
  loopback interface, answers only requests addressed to a loopback name
  or address (``Host``: localhost, 127.0.0.1, [::1]): a rebound name is
  refused, 403.

No CORS headers are ever sent, so no other origin reads an answer either.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from pregelkit.server._auth import is_loopback, refuse

__all__ = ["SameOrigin"]

_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_OWN_SITE = frozenset({b"same-origin", b"none"})
"""``Sec-Fetch-Site`` of a request the browser makes for a page of this
server's own, or for its user (an address typed in)."""


class SameOrigin:
    """ASGI middleware refusing cross-site browser requests (module doc).
    ``open``: the server admits anybody who reaches it (no keys, no hook)."""

    def __init__(self, app: ASGIApp, open: bool) -> None:
        self.app = app
        self.open = open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if self.open and not is_loopback(_hostname(host)):
            await refuse(
                send,
                403,
                f"this server has no API key, so it answers only requests addressed to "
                f"localhost or 127.0.0.1, not to {host!r}: open it by that name, or give "
                "the server keys (--auth-key) to reach it by another",
            )
            return
        fetched_from = headers.get(b"sec-fetch-site")
        if fetched_from is not None and fetched_from not in _OWN_SITE:
            # any method: a GET has effects too (a stream's cancel_on_disconnect)
            await refuse(send, 403, "a request from another site's web page is refused")
            return
        if scope["method"] not in _READS:
            origin = headers.get(b"origin")
            own = f"{scope.get('scheme', 'http')}://{host}"
            if origin is not None and origin.decode("latin-1") != own:
                await refuse(
                    send,
                    403,
                    f"a request from the web page at {origin.decode('latin-1')!r} is refused: "
                    f"only pages this server serves (--static, at {own}/ui/) may call it "
                    "from a browser",
                )
                return
        await self.app(scope, receive, send)


def _hostname(host: str) -> str:
    """``host`` without its port or brackets (``[::1]:2024`` is ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host
