"""``/assistants``: one assistant per configured graph, read-only.

Its id is the one LangGraph's server gives a graph's default assistant
(``uuid5`` of the graph id); the graph id is accepted wherever an assistant
id is, as there. Creating, updating or versioning assistants is not served:
a workflow's configuration is its code and the config file.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pregelkit.server._api import Api, api_of
from pregelkit.server._body import Body
from pregelkit.server._config import Served
from pregelkit.server._json import Json, has_metadata, iso


def describe(api: Api, s: Served) -> dict[str, Any]:
    created = iso(api.started_at)
    return {
        "assistant_id": s.assistant_id,
        "graph_id": s.graph_id,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "name": s.graph_id,
        "description": None,
        "created_at": created,
        "updated_at": created,
    }


def _matching(api: Api, body: Body) -> list[dict[str, Any]]:
    """The assistants a search or count body selects."""
    graph_id = body.text("graph_id")
    name = body.text("name")
    metadata = body.obj("metadata", {})
    found = []
    for s in api.served:
        described = describe(api, s)
        if (
            graph_id in (None, s.graph_id)
            and name in (None, s.graph_id)
            and has_metadata(described["metadata"], metadata)
        ):
            found.append(described)
    return found


async def search(request: Request) -> Response:
    api = api_of(request)
    body = await api.body(request)
    limit = body.integer("limit", 10)
    offset = body.integer("offset", 0, high=1_000_000)
    found = _matching(api, body)
    headers = {}
    if offset + limit < len(found):
        headers["X-Pagination-Next"] = str(offset + limit)
    return Json(found[offset : offset + limit], headers=headers)


async def count(request: Request) -> Response:
    api = api_of(request)
    return Json(len(_matching(api, await api.body(request))))


async def get(request: Request) -> Response:
    api = api_of(request)
    return Json(describe(api, api.assistant(request.path_params["assistant_id"])))


async def get_graph(request: Request) -> Response:
    """The graph as LangGraph's server draws it: nodes and edges."""
    api = api_of(request)
    served = api.assistant(request.path_params["assistant_id"])
    drawn = api.graphs[served.graph_id].get_graph()
    nodes = [
        {"id": n.id, "type": "schema" if n.id in ("__start__", "__end__") else "runnable",
         "data": n.name}
        for n in drawn.nodes.values()
    ]  # fmt: skip
    edges = [
        {"source": e.source, "target": e.target, **({"conditional": True} if e.conditional else {})}
        for e in drawn.edges
    ]
    return Json({"nodes": nodes, "edges": edges})


async def get_schemas(request: Request) -> Response:
    api = api_of(request)
    served = api.assistant(request.path_params["assistant_id"])
    graph = api.graphs[served.graph_id]
    context = graph.get_context_jsonschema()
    return Json(
        {
            "graph_id": served.graph_id,
            "input_schema": graph.get_input_jsonschema(),
            "output_schema": graph.get_output_jsonschema(),
            "state_schema": graph.get_output_jsonschema(),
            "config_schema": None,
            "context_schema": context,
        }
    )


routes = [
    Route("/assistants/search", search, methods=["POST"]),
    Route("/assistants/count", count, methods=["POST"]),
    Route("/assistants/{assistant_id}", get, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", get_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", get_schemas, methods=["GET"]),
]
