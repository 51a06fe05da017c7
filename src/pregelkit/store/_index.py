"""Semantic search, decided once for every store: which texts of a batch to
embed, asking the embedder for all of them in one call (sync or async), and
scoring stored vectors against a query.

Vectors are stored normalized (unit length), as float32, so a store scores an
item with a dot product: its cosine similarity to the normalized query. An
item's score is the best of its vectors (one per embedded text).
"""

from __future__ import annotations

import array
import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pregelkit.store.base import Op, PutOp, SearchOp
from pregelkit.store.base.embed import (
    Embeddings,
    check_vectors,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

__all__ = ["Embedded", "Index", "dot", "pack", "unpack"]

_SUPPORTED_DISTANCES = ("cosine",)


class Index:
    """A store's ``index=`` configuration, checked when the store is built."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise TypeError(f"index must be a dict, got {type(config).__name__}")
        dims = config.get("dims")
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise ValueError(f"index dims must be a positive int, got {dims!r}")
        if "embed" not in config:
            raise ValueError("index needs 'embed': a function from texts to vectors")
        distance = config.get("distance_type", "cosine")
        if distance not in _SUPPORTED_DISTANCES:
            raise ValueError(
                f"index distance_type={distance!r} is not supported: pregelkit's exact search "
                "scores by cosine similarity (distance_type='cosine')"
            )
        fields = config.get("fields") or config.get("text_fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
            raise TypeError(f"index fields must be a list of field paths, got {fields!r}")
        for path in fields:
            tokenize_path(path)
        self.dims = dims
        self.fields: list[str] = list(fields)
        embed = config["embed"]
        self.embeddings: Embeddings = ensure_embeddings(embed)
        # What users compare against: the object they gave, if it is one.
        self.user_embeddings: Any = embed if hasattr(embed, "embed_documents") else self.embeddings


@dataclass
class Embedded:
    """The vectors of one batch: per op position, the (field, vector) pairs of
    a put, or the query vector of a search."""

    documents: dict[int, list[tuple[str, list[float]]]] = field(default_factory=dict)
    queries: dict[int, list[float]] = field(default_factory=dict)


@dataclass
class _Request:
    texts: list[str] = field(default_factory=list)
    owners: list[tuple[int, str]] = field(default_factory=list)
    queries: list[tuple[int, str]] = field(default_factory=list)
    puts: list[int] = field(default_factory=list)


def _request(index: Index | None, ops: Sequence[Op]) -> _Request:
    request = _Request()
    if index is None:
        return request
    for position, op in enumerate(ops):
        if isinstance(op, PutOp) and op.value is not None:
            request.puts.append(position)
            if op.index is False:
                continue
            for path in op.index if op.index is not None else index.fields:
                for n, text in enumerate(get_text_at_path(op.value, path)):
                    request.texts.append(text)
                    request.owners.append((position, f"{path}.{n}"))
        elif isinstance(op, SearchOp) and op.query:
            request.queries.append((position, op.query))
    return request


def _collect(
    index: Index,
    request: _Request,
    doc_vectors: object,
    query_vectors: list[object],
) -> Embedded:
    embedded = Embedded()
    for position in request.puts:
        embedded.documents[position] = []
    checked = check_vectors(doc_vectors, len(request.texts), index.dims)
    for (position, field_name), vector in zip(request.owners, checked):
        embedded.documents[position].append((field_name, normalize(vector)))
    for (position, _), answer in zip(request.queries, query_vectors):
        embedded.queries[position] = normalize(check_vectors([answer], 1, index.dims)[0])
    return embedded


def embed(index: Index | None, ops: Sequence[Op]) -> Embedded | None:
    """The vectors ``ops`` need, from the sync embedder (``None``: no index)."""
    if index is None:
        return None
    request = _request(index, ops)
    docs = index.embeddings.embed_documents(request.texts) if request.texts else []
    queries: list[object] = [index.embeddings.embed_query(text) for _, text in request.queries]
    return _collect(index, request, docs, queries)


async def aembed(index: Index | None, ops: Sequence[Op]) -> Embedded | None:
    """:func:`embed` with the async embedder."""
    if index is None:
        return None
    request = _request(index, ops)
    docs = await index.embeddings.aembed_documents(request.texts) if request.texts else []
    queries: list[object] = [
        await index.embeddings.aembed_query(text) for _, text in request.queries
    ]
    return _collect(index, request, docs, queries)


def normalize(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


def pack(vector: list[float]) -> bytes:
    """Little-endian float32, the layout both SQL stores keep."""
    packed = array.array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def unpack(blob: bytes) -> array.array[float]:
    vector = array.array("f", blob)
    if sys.byteorder != "little":
        vector.byteswap()
    return vector


_mul = operator.mul


def _python_dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(_mul, a, b)))


# math.sumprod (Python 3.12+) runs the loop in C.
dot: Callable[[Sequence[float], Sequence[float]], float] = getattr(math, "sumprod", _python_dot)
