"""Which workflows a server serves: one ``MODULE:NAME`` from the command line,
or the ``graphs`` of a config file (``pregelkit.json``, or LangGraph's
``langgraph.json`` read as is: besides ``graphs``, only its ``auth`` section
is read, by ``_hook``; the others are ignored).

Only what the config names is ever imported: no request can make the server
load code. Paths in a config file are relative to the file, as in LangGraph.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pregelkit.cli._errors import CliError
from pregelkit.cli._target import load_target

if TYPE_CHECKING:
    from pregelkit.pregel import Pregel

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""LangGraph's server derives each graph's default assistant id as
``uuid5(NAMESPACE_GRAPH, graph_id)``: the same ids here, so a client that
stored one keeps working."""


@dataclass(frozen=True)
class Served:
    """One configured workflow: its graph id (the config's key) and graph."""

    graph_id: str
    spec: str
    graph: Pregel

    @property
    def assistant_id(self) -> str:
        return str(uuid.uuid5(NAMESPACE_GRAPH, self.graph_id))


def load_served(target: str | None, config: str | None) -> list[Served]:
    """The workflows named by ``target`` (``MODULE_OR_FILE:NAME``, served
    under ``NAME``) or by the config file; errors say what to fix."""
    if (target is None) == (config is None):
        raise CliError(
            "name what to serve: pregelkit serve MODULE_OR_FILE:NAME, or --config "
            'pregelkit.json (a JSON file with {"graphs": {"name": "path/to/file.py:attr"}})'
        )
    if target is not None:
        return [_served(target.rpartition(":")[2], target)]
    assert config is not None
    graphs = _graphs_of(config)
    base = os.path.dirname(os.path.abspath(config))
    return [_served(name, relative(spec, base)) for name, spec in graphs.items()]


def read_config(path: str) -> dict[str, Any]:
    """The config file's JSON object (an empty one if it holds another value)."""
    try:
        with open(path, encoding="utf-8") as f:
            data: Any = json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read the config {path!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"the config {path!r} is not valid JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _graphs_of(path: str) -> dict[str, str]:
    graphs = read_config(path).get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise CliError(
            f"the config {path!r} names no graphs: it needs "
            '{"graphs": {"name": "path/to/file.py:attr"}}'
        )
    for name, spec in graphs.items():
        if not isinstance(spec, str) or not name:
            raise CliError(
                f"graph {name!r} in {path!r} must be a string MODULE_OR_FILE:NAME, got "
                f"{spec!r} (a graph given as an object with a 'path' is not served yet)"
            )
    return graphs


def relative(spec: str, base: str) -> str:
    """A file path of ``spec`` made absolute from the config's directory
    (``./agent.py:graph``); a dotted module is left as it is."""
    module, _, attr = spec.rpartition(":")
    if module.endswith(".py") or "/" in module or os.sep in module:
        return f"{os.path.normpath(os.path.join(base, module))}:{attr}"
    return spec


def _served(graph_id: str, spec: str) -> Served:
    graph = load_target(spec).graph
    # a queued run names its workflow and the worker finds it by that name:
    # the graph id, unique in the config, is the name
    return Served(graph_id, spec, graph.copy(name=graph_id))
