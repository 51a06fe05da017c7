"""``/store``: items of the store in the server's database, the one the
workflows' ``store`` argument sees too.

Namespaces are arrays of non-empty labels without ``.`` (the SDK joins
them with dots in a query string); a missing item reads as ``null``, as on
LangGraph's server.

With API keys (or an auth hook) each owner has a store of its own: what a
client names ``("users", "ann")`` is kept under ``("pregelkit-owner:<owner
digest>", "users", "ann")``, and that first label is added on the way in and
taken off on the way out, so the client sees its namespaces unchanged. Every
read and search is under the owner's label, so no prefix, wildcard or
namespace spelled like the label reaches another owner's items. Without keys
the store is served as it is (the database's whole store, owners' labels
included); only writing under an owner's label is refused there.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.server._api import api_of, call
from pregelkit.server._auth import owner_of
from pregelkit.server._body import Body
from pregelkit.server._errors import ApiError
from pregelkit.server._json import Json

MAX_BYTES = 1024
"""The most UTF-8 bytes of a namespace (its labels joined by dots) and of a
key: PostgreSQL indexes the two together, and refuses a write (a 500 here)
whose pair passes about 2,700 bytes, where SQLite takes any length."""
MAX_FILTER_FIELDS = 100
"""The most fields a search filter compares: SQLite refuses a query whose
conditions pass its expression tree's depth (1,000)."""


def _namespace(labels: list[str] | None, what: str, *, empty: bool = False) -> tuple[str, ...]:
    labels = labels or []
    if not labels and not empty:
        raise ApiError(422, f"{what} must name at least one label")
    for label in labels:
        if not label or "." in label:
            raise ApiError(422, f"{what} label {label!r} must be non-empty and have no '.'")
    _short(".".join(labels), what)
    return tuple(labels)


def _short(text: str, what: str) -> str:
    if len(text.encode()) > MAX_BYTES:
        raise ApiError(422, f"{what} is longer than {MAX_BYTES} bytes (UTF-8): shorten it")
    return text


OWNED = "pregelkit-owner:"
"""The first label of an owner's namespaces, followed by its digest."""


def _scope(request: Request) -> tuple[str, ...]:
    """The labels the request's owner's namespaces start with (none without keys)."""
    owner = owner_of(request)
    return () if owner is None else (OWNED + owner,)


def _writable(request: Request, namespace: tuple[str, ...]) -> tuple[str, ...]:
    """``namespace`` as stored, for a put or a delete: without keys, an
    owner's label is refused (a keyless client must not plant items in a
    key's store)."""
    scope = _scope(request)
    if not scope and namespace[0].startswith(OWNED):
        raise ApiError(
            422, f"namespaces starting with {OWNED!r} belong to API keys: name another label"
        )
    return scope + namespace


def _item(item: Any, hidden: int) -> dict[str, Any]:
    """The item as the SDK reads it, without the ``hidden`` owner's label."""
    out: dict[str, Any] = {
        "namespace": list(item.namespace)[hidden:],
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if getattr(item, "score", None) is not None:
        out["score"] = item.score
    return out


def _key(body: Body) -> str:
    key = body.text("key")
    if not key:
        raise ApiError(422, "field 'key' is required")
    return _short(str(key), "key")


def _filter(body: Body) -> dict[str, Any] | None:
    found: dict[str, Any] | None = body.obj("filter")
    if found is not None and len(found) > MAX_FILTER_FIELDS:
        raise ApiError(422, f"filter compares {len(found)} fields: at most {MAX_FILTER_FIELDS}")
    return found


STORE_REFUSALS = (ValueError, TypeError, OverflowError, NotImplementedError)
"""What the store raises for arguments it refuses (a bad filter, a ttl past
any date, a NUL character in a key or a label): the client's to fix."""


def _store_error(exc: Exception) -> ApiError:
    """The store's own argument checks as a 422."""
    return ApiError(422, str(exc))


async def put_item(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    namespace = _writable(request, _namespace(body.labels("namespace"), "namespace"))
    key = _key(body)
    value = body.obj("value")
    if value is None:
        raise ApiError(422, "field 'value' must be an object")
    index = body.any("index")
    if index is not None and index is not False and not isinstance(index, list):
        raise ApiError(422, "field 'index' must be false or an array of field paths")
    ttl = body.any("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))):
        raise ApiError(422, "field 'ttl' must be a number of minutes")
    try:
        await call(api.store.put, namespace, key, value, index=index, ttl=ttl)
    except STORE_REFUSALS as exc:
        raise _store_error(exc) from None
    return Response(status_code=204)


async def get_item(request: Request) -> Response:
    api = api_of(request)
    raw = request.query_params.get("namespace", "")
    scope = _scope(request)
    namespace = scope + _namespace(raw.split(".") if raw else [], "namespace")
    key = request.query_params.get("key")
    if not key:
        raise ApiError(422, "query parameter 'key' is required")
    refresh = request.query_params.get("refresh_ttl")
    refresh_ttl = None if refresh is None else refresh == "true"
    try:
        item = await call(api.store.get, namespace, key, refresh_ttl=refresh_ttl)
    except STORE_REFUSALS as exc:
        raise _store_error(exc) from None
    return Json(None if item is None else _item(item, len(scope)))


async def delete_item(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    namespace = _writable(request, _namespace(body.labels("namespace"), "namespace"))
    try:
        await call(api.store.delete, namespace, _key(body))
    except STORE_REFUSALS as exc:
        raise _store_error(exc) from None
    return Response(status_code=204)


async def search_items(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    scope = _scope(request)
    prefix = scope + _namespace(body.labels("namespace_prefix"), "namespace_prefix", empty=True)
    try:
        items = await call(
            api.store.search,
            prefix,
            filter=_filter(body),
            limit=body.integer("limit", 10, high=1000),
            offset=body.integer("offset", 0, high=1_000_000),
            query=body.text("query"),
            refresh_ttl=body.flag("refresh_ttl"),
        )
    except STORE_REFUSALS as exc:
        raise _store_error(exc) from None
    return Json({"items": [_item(i, len(scope)) for i in items]})


async def list_namespaces(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    scope = _scope(request)
    prefix = scope + _namespace(body.labels("prefix"), "prefix", empty=True)
    suffix = body.labels("suffix")
    depth = body.integer("max_depth", None, low=1, high=1000)
    try:
        found = await call(
            api.store.list_namespaces,
            prefix=prefix or None,
            suffix=_namespace(suffix, "suffix") if suffix else None,
            max_depth=None if depth is None else depth + len(scope),
            limit=body.integer("limit", 100, high=1000),
            offset=body.integer("offset", 0, high=1_000_000),
        )
    except STORE_REFUSALS as exc:
        raise _store_error(exc) from None
    return Json({"namespaces": [list(ns)[len(scope) :] for ns in found]})


routes = [
    Route("/store/items", put_item, methods=["PUT"]),
    Route("/store/items", get_item, methods=["GET"]),
    Route("/store/items", delete_item, methods=["DELETE"]),
    Route("/store/items/search", search_items, methods=["POST"]),
    Route("/store/namespaces", list_namespaces, methods=["POST"]),
]
