"""``pregelkit serve``'s "safe by default", driven by the real ``langgraph-sdk``:
each API key's own store namespaces (SQLite and PostgreSQL), the config's
auth hook (async, sync, a ``langgraph_sdk.Auth``) in place of the keys, run
inputs checked against the workflow's input schema, and attacks on each:
namespaces spelled like the hidden owner label, wildcards, unicode keys, a
hook that raises or hangs, a key revoked between two servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from test_serve import FLOWS, Server, _serve

AUTH_FLOWS = Path(__file__).with_name("serve_auth_flows.py")
UNICODE_KEY = "clé-ключ-鍵"
KEYS = ("k1", "k2", UNICODE_KEY)
OWNED = "pregelkit-owner:"


def _refused(status: int, match: str, call: Callable[[], Any]) -> None:
    """``call`` fails with ``status`` and a detail matching ``match`` (the SDK
    raises its own ``APIStatusError`` subclasses or httpx's, by endpoint)."""
    with pytest.raises(httpx.HTTPStatusError, match=match) as caught:
        call()
    assert caught.value.response.status_code == status


def _config(tmp: Path, auth: dict[str, Any] | None = None) -> Path:
    path = tmp / "pregelkit.json"
    graphs = {"echo": f"{FLOWS}:echo", "typed": f"{AUTH_FLOWS}:typed"}
    path.write_text(json.dumps({"graphs": graphs, **({"auth": auth} if auth else {})}))
    return path


def _keyed_server(tmp: Path, db: str, keys: tuple[str, ...], *more: str) -> Server:
    flags = [arg for key in keys for arg in ("--auth-key", key)]
    return Server(["--config", str(_config(tmp)), "--db", db, *flags, *more], tmp)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def keyed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve-auth")
    if request.param == "sqlite":
        db = str(tmp / "auth.sqlite")
    else:
        db = request.getfixturevalue("postgres_database")("pregelkit_serve_auth")
    server = _keyed_server(tmp, db, KEYS)
    yield server
    server.stop()


# the store: one per key


def test_each_key_has_its_own_store_with_its_namespaces_unchanged(keyed: Server) -> None:
    ann, bob = (get_sync_client(url=keyed.url, api_key=k) for k in ("k1", "k2"))
    ann.store.put_item(["users", "ann"], "prefs", {"theme": "dark"})
    ann.store.put_item(["users", "ann", "drafts"], "d1", {"text": "hi"})
    bob.store.put_item(["users", "ann"], "prefs", {"theme": "light"})  # same name, bob's own

    item = ann.store.get_item(["users", "ann"], "prefs")
    assert item["namespace"] == ["users", "ann"] and item["value"] == {"theme": "dark"}
    assert bob.store.get_item(["users", "ann"], "prefs")["value"] == {"theme": "light"}
    assert bob.store.get_item(["users", "ann", "drafts"], "d1") is None

    found = ann.store.search_items([], limit=100)["items"]
    assert sorted((tuple(i["namespace"]), i["key"]) for i in found) == [
        (("users", "ann"), "prefs"),
        (("users", "ann", "drafts"), "d1"),
    ]
    assert [i["value"] for i in bob.store.search_items(["users"])["items"]] == [{"theme": "light"}]
    assert ann.store.list_namespaces()["namespaces"] == [
        ["users", "ann"],
        ["users", "ann", "drafts"],
    ]
    assert ann.store.list_namespaces(max_depth=1)["namespaces"] == [["users"]]
    assert ann.store.list_namespaces(suffix=["drafts"])["namespaces"] == [
        ["users", "ann", "drafts"]
    ]
    assert bob.store.list_namespaces(suffix=["drafts"])["namespaces"] == []

    bob.store.delete_item(["users", "ann", "drafts"], "d1")  # not bob's: nothing happens
    assert ann.store.get_item(["users", "ann", "drafts"], "d1") is not None
    ann.store.delete_item(["users", "ann", "drafts"], "d1")
    assert ann.store.get_item(["users", "ann", "drafts"], "d1") is None


def test_no_prefix_wildcard_or_lookalike_label_reaches_another_keys_items(keyed: Server) -> None:
    ann, bob = (get_sync_client(url=keyed.url, api_key=k) for k in ("k1", "k2"))
    ann.store.put_item(["secrets"], "s", {"pin": 1234})
    # bob guesses ann's hidden label (it is a digest; guessing it right does not help either)
    labels = [OWNED, OWNED + "0" * 32, "*"]
    for label in labels:
        bob.store.put_item([label, "secrets"], "s", {"pin": 0})
        assert bob.store.get_item([label, "secrets"], "s")["value"] == {"pin": 0}
    for prefix in ([], ["*"], [OWNED], ["secrets"], [OWNED + "0" * 32]):
        values = [i["value"] for i in bob.store.search_items(prefix, limit=100)["items"]]
        assert {"pin": 1234} not in values, prefix
    spaces = bob.store.list_namespaces(prefix=["*"], limit=100)["namespaces"]
    assert ["secrets"] not in spaces and [OWNED, "secrets"] in spaces
    assert all(ns[0] in labels for ns in spaces if ns[-1] == "secrets")
    assert bob.store.list_namespaces(suffix=["secrets"], max_depth=1)["namespaces"] == [
        ["*"],
        [OWNED],
        [OWNED + "0" * 32],
    ]
    assert ann.store.search_items(["secrets"])["items"][0]["value"] == {"pin": 1234}
    assert [i["namespace"] for i in ann.store.search_items([])["items"] if i["key"] == "s"] == [
        ["secrets"]
    ]


def test_unicode_keys_and_labels(keyed: Server) -> None:
    # the SDK sends headers as ASCII; a key beyond it comes as UTF-8 bytes
    utf8 = {"x-api-key": UNICODE_KEY.encode()}
    put = {"namespace": ["naïve", "ключ"], "key": "é/🔑", "value": {"v": "ü"}}
    assert httpx.put(keyed.url + "/store/items", json=put, headers=utf8).status_code == 204
    got = httpx.get(
        keyed.url + "/store/items",
        params={"namespace": "naïve.ключ", "key": "é/🔑"},
        headers=utf8,
    )
    assert got.status_code == 200 and got.json()["value"] == {"v": "ü"}
    assert got.json()["namespace"] == ["naïve", "ключ"]
    import unicodedata

    for near in (
        unicodedata.normalize("NFD", UNICODE_KEY).encode(),  # looks the same, other bytes
        UNICODE_KEY.encode()[:-1],
        UNICODE_KEY.upper().encode(),
    ):
        assert httpx.get(keyed.url + "/info", headers={"x-api-key": near}).status_code == 401
    with pytest.raises(UnicodeEncodeError):
        get_sync_client(url=keyed.url, api_key=UNICODE_KEY).assistants.search()
    # an ASCII key's client sees none of it, under unicode labels or not
    k1 = get_sync_client(url=keyed.url, api_key="k1")
    assert k1.store.get_item(["naïve", "ключ"], "é/🔑") is None
    k1.store.put_item(["naïve", "ключ"], "é/🔑", {"v": "k1"})
    assert k1.store.get_item(["naïve", "ключ"], "é/🔑")["value"] == {"v": "k1"}


# input checked against the workflow's input schema


def test_input_breaking_the_schema_is_a_422_naming_the_field_and_nothing_runs(
    keyed: Server,
) -> None:
    client = get_sync_client(url=keyed.url, api_key="k1")
    tid = client.threads.create()["thread_id"]
    assert client.runs.wait(tid, "typed", input={"n": 3}) == {"doubled": 6, "tags": []}
    bad = [
        ({"n": "x"}, "input.n must be an integer"),
        ({}, "input is missing the required field 'n'"),
        ({"n": 1, "inner": {"tags": ["a", 2]}}, r"input.inner.tags\[1\] must be a string"),
        ({"n": 1, "inner": {}}, "input.inner is missing the required field 'tags'"),
        ([1], "input must be an object"),
    ]
    for value, message in bad:
        _refused(422, message, partial(client.runs.wait, tid, "typed", input=value))
        _refused(422, message, partial(client.runs.create, tid, "typed", input=value))
        streamed = client.runs.stream(tid, "typed", input=value)
        _refused(422, message, partial(list, streamed))
    _refused(422, "input.n", lambda: client.runs.wait(None, "typed", input={"n": 1.5}))
    fresh = "0b6f3f52-58d6-4c55-9f25-1c1d8b2e7a41"
    _refused(
        422,
        "input.n",
        lambda: client.runs.create(fresh, "typed", input={"n": None}, if_not_exists="create"),
    )
    assert len(client.runs.list(tid)) == 1  # only the good run was ever queued
    # a cron's input too: its firings would all fail
    daily = {"schedule": "0 3 * * *", "input": {"n": "x"}}
    _refused(422, r"input\.n", partial(client.crons.create, "typed", **daily))
    _refused(422, r"input\.n", partial(client.crons.create_for_thread, tid, "typed", **daily))
    assert client.crons.search() == []
    cron = client.crons.create("typed", schedule="0 3 * * *", input={"n": 1})
    client.crons.delete(cron["cron_id"])
    with pytest.raises(NotFoundError):  # nor was the thread created
        client.threads.get(fresh)
    # an unannotated workflow takes anything, as before
    assert client.runs.wait(None, "echo", input={"n": "x"}) == {"n": "x"}

    async def main() -> None:
        aclient = get_client(url=keyed.url, api_key="k1")
        with pytest.raises(httpx.HTTPStatusError, match=r"input\.n must be an integer"):
            await aclient.runs.wait(tid, "typed", input={"n": "x"})
        assert await aclient.runs.wait(tid, "typed", input={"n": 4.0}) == {
            "doubled": 8.0,
            "tags": [],
        }

    asyncio.run(main())


# the auth hook


HOOKS = {
    "async": {"path": f"{AUTH_FLOWS}:authenticate", "timeout_seconds": 1},
    "sync": {"path": f"{AUTH_FLOWS}:authenticate_sync", "timeout_seconds": 1},
}


@pytest.fixture(scope="module", params=sorted(HOOKS))
def hooked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Server]]:
    tmp = tmp_path_factory.mktemp("serve-hook")
    config = _config(tmp, HOOKS[request.param])
    (tmp / "page").mkdir()
    (tmp / "page" / "index.html").write_text("<p>hello</p>")
    args = ["--config", str(config), "--db", str(tmp / "hook.sqlite"), "--static", "page"]
    server = Server(args, tmp)
    yield request.param, server
    server.stop()


def _as(kind: str, url: str, token: str) -> Any:
    """A client whose token goes where the hook looks for it."""
    if kind == "async":
        return get_sync_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})
    return get_sync_client(url=url, api_key=token)


def test_the_hooks_identity_owns_threads_runs_and_store(hooked: tuple[str, Server]) -> None:
    kind, server = hooked
    ann, bob = _as(kind, server.url, "token-ann"), _as(kind, server.url, "token-bob")
    tid = ann.threads.create(metadata={"who": "ann"})["thread_id"]
    assert ann.runs.wait(tid, "typed", input={"n": 2}) == {"doubled": 4, "tags": []}
    with pytest.raises(NotFoundError):
        bob.threads.get(tid)
    with pytest.raises(NotFoundError):
        bob.runs.list(tid)
    assert tid not in [t["thread_id"] for t in bob.threads.search()]
    ann.store.put_item(["notes"], "n", {"by": "ann"})
    assert bob.store.get_item(["notes"], "n") is None
    assert ann.store.get_item(["notes"], "n")["value"] == {"by": "ann"}
    # the identity owns it, not the client: a new client of ann's sees it
    assert _as(kind, server.url, "token-ann").threads.get(tid)["thread_id"] == tid


def test_the_hooks_refusals_failures_and_timeouts(hooked: tuple[str, Server]) -> None:
    kind, server = hooked
    assert httpx.get(server.url + "/ok").status_code == 200  # health checks pass unasked
    assert httpx.get(server.url + "/ui/").text == "<p>hello</p>"  # so does a page's file
    header = "authorization" if kind == "async" else "x-api-key"

    def status(token: str | bytes) -> tuple[int, str]:
        value = (
            (b"Bearer " + token if isinstance(token, bytes) else f"Bearer {token}")
            if kind == "async"
            else token
        )
        answer = httpx.get(server.url + "/info", headers={header: value}, timeout=10)
        return answer.status_code, answer.json()["detail"] if answer.status_code != 200 else ""

    assert status("token-ann")[0] == 200
    assert status("token-élodie".encode())[0] == 200
    assert status("nobody") == (
        401,
        "unknown token" if kind == "async" else "the auth hook answered no identity",
    )
    assert httpx.get(server.url + "/info").status_code == 401
    if kind == "async":
        code, detail = status("raise")
        assert code == 500 and "RuntimeError" in detail and "provider" not in detail
        assert status("none")[0] == 500
    else:
        assert status("forbidden") == (403, "this token may not call the API")
    code, detail = status("slow")
    assert code == 503 and "within 1 s" in detail
    assert status("token-bob")[0] == 200  # a hung hook held nothing up


def test_a_hook_is_loaded_from_the_config_only_and_checked_at_start(tmp_path: Path) -> None:
    cases = [
        ({"path": f"{AUTH_FLOWS}:nothing_here"}, "has no 'nothing_here'"),
        ({"path": f"{AUTH_FLOWS}:USERS"}, "is not a function"),
        ({"path": f"{AUTH_FLOWS}:typed", "timeout_seconds": 0}, "timeout_seconds"),
        ({"path": f"{AUTH_FLOWS}:asks_for_the_body"}, "asks for 'body'"),
        ("auth.py:authenticate", '"auth" must be an object'),
    ]
    for auth, message in cases:
        path = tmp_path / "pregelkit.json"
        path.write_text(json.dumps({"graphs": {"echo": f"{FLOWS}:echo"}, "auth": auth}))
        proc = _serve(["--config", str(path), "--db", str(tmp_path / "x.sqlite")], tmp_path)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and message in err, (auth, err)
    config = _config(tmp_path, HOOKS["sync"])
    proc = _serve(["--config", str(config), "--auth-key", "k"], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "replaces API keys" in err


def test_a_langgraph_sdk_auth_is_served_and_its_on_rules_refused(tmp_path: Path) -> None:
    module = tmp_path / "sdk_auth.py"
    module.write_text(
        "from langgraph_sdk import Auth\n"
        "auth = Auth()\n"
        "@auth.authenticate\n"
        "async def who(headers: dict) -> str:\n"
        "    token = headers.get(b'x-api-key')\n"
        "    if token != b'sesame':\n"
        "        raise Auth.exceptions.HTTPException(status_code=401, detail='no')\n"
        "    return 'ali'\n"
        "ruled = Auth()\n"
        "ruled.authenticate(who)\n"
        "@ruled.on\n"
        "async def deny(ctx, value):\n"
        "    return False\n"
    )
    ruled = _config(tmp_path, {"path": "./sdk_auth.py:ruled"})
    proc = _serve(["--config", str(ruled), "--db", str(tmp_path / "x.sqlite")], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "@auth.on" in err
    config = _config(tmp_path, {"path": "./sdk_auth.py:auth"})
    server = Server(["--config", str(config), "--db", str(tmp_path / "x.sqlite")], tmp_path)
    try:
        client = get_sync_client(url=server.url, api_key="sesame")
        assert client.runs.wait(None, "typed", input={"n": 1}) == {"doubled": 2, "tags": []}
        _refused(401, "no", get_sync_client(url=server.url, api_key="open").threads.search)
    finally:
        server.stop()


# keys over time


def test_a_revoked_key_loses_access_and_a_server_without_keys_cannot_plant(tmp_path: Path) -> None:
    db = str(tmp_path / "revoke.sqlite")
    server = _keyed_server(tmp_path, db, ("k1", "k2"))
    try:
        k2 = get_sync_client(url=server.url, api_key="k2")
        tid = k2.threads.create()["thread_id"]
        assert k2.runs.wait(tid, "typed", input={"n": 1}) == {"doubled": 2, "tags": []}
        k2.store.put_item(["mine"], "a", {"v": 2})
    finally:
        server.stop()

    server = _keyed_server(tmp_path, db, ("k1",), "--no-workers")  # k2 revoked
    try:
        _refused(
            401,
            "wrong API key",
            lambda: get_sync_client(url=server.url, api_key="k2").runs.list(tid),
        )
        k1 = get_sync_client(url=server.url, api_key="k1")
        with pytest.raises(NotFoundError):
            k1.threads.get(tid)
        assert k1.store.search_items([])["items"] == []
    finally:
        server.stop()

    server = _keyed_server(tmp_path, db, (), "--no-workers")  # no keys: the store as it is
    try:
        local = get_sync_client(url=server.url, api_key=None)
        [ns] = local.store.list_namespaces()["namespaces"]
        assert ns[0].startswith(OWNED) and ns[1:] == ["mine"]
        with pytest.raises(UnprocessableEntityError, match="belong to API keys"):
            local.store.put_item([ns[0], "mine"], "planted", {"v": 0})
        with pytest.raises(UnprocessableEntityError, match="belong to API keys"):
            local.store.delete_item([ns[0], "mine"], "a")
        local.store.put_item(["shared"], "x", {"v": 1})  # unchanged without keys
        assert local.store.get_item(["shared"], "x")["namespace"] == ["shared"]
        with pytest.raises(NotFoundError):  # k2's thread belongs to k2
            local.threads.get(tid)
    finally:
        server.stop()

    server = _keyed_server(tmp_path, db, ("k2",), "--no-workers")  # given back
    try:
        k2 = get_sync_client(url=server.url, api_key="k2")
        assert k2.threads.get(tid)["values"] == {"doubled": 2, "tags": []}
        assert [i["key"] for i in k2.store.search_items([])["items"]] == ["a"]
    finally:
        server.stop()
