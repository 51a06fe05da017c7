"""What semantic search needs from the user: an embedding function, and the
texts of a document to embed.

pregelkit ships no embedding model. ``index={"embed": ...}`` takes whatever the
user has: an object with ``embed_documents``/``embed_query`` (a LangChain
``Embeddings``, say), a function from a list of texts to a list of vectors, or
an ``async`` such function. :func:`ensure_embeddings` gives all three one
shape, sync and async.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from pregelkit._internal._threads import to_thread

__all__ = [
    "EmbeddingsFunc",
    "AEmbeddingsFunc",
    "Embeddings",
    "ensure_embeddings",
    "get_text_at_path",
    "tokenize_path",
]

EmbeddingsFunc = Callable[[Sequence[str]], list[list[float]]]
AEmbeddingsFunc = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


class Embeddings(Protocol):
    """The four calls a store makes on an embedder."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]: ...

    async def aembed_query(self, text: str) -> list[float]: ...


class _FunctionEmbeddings:
    """A plain (sync or async) function as an embedder."""

    def __init__(self, func: Callable[..., Any]) -> None:
        import inspect  # here, not at import: only stores with an index need it

        self.func = func
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - an async __call__ counts too
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.is_async:
            raise TypeError(
                "the index's embed function is async, so the sync store methods cannot call it: "
                "use the async methods (aput, asearch, abatch) or pass a sync function"
            )
        return cast("list[list[float]]", self.func(texts))

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.is_async:
            return cast("list[list[float]]", await self.func(texts))
        return cast("list[list[float]]", await to_thread(self.func, texts))

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]


class _ObjectEmbeddings:
    """An object with ``embed_documents``/``embed_query``; the async calls
    use its own ``aembed_*`` if it has them, else a worker thread."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return cast("list[list[float]]", self.obj.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return cast("list[float]", self.obj.embed_query(text))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if hasattr(self.obj, "aembed_documents"):
            return cast("list[list[float]]", await self.obj.aembed_documents(texts))
        return cast("list[list[float]]", await to_thread(self.obj.embed_documents, texts))

    async def aembed_query(self, text: str) -> list[float]:
        if hasattr(self.obj, "aembed_query"):
            return cast("list[float]", await self.obj.aembed_query(text))
        return cast("list[float]", await to_thread(self.obj.embed_query, text))


def ensure_embeddings(embed: object) -> Embeddings:
    """``embed`` as an :class:`Embeddings`; refuses what is not one, naming it."""
    if hasattr(embed, "embed_documents") and hasattr(embed, "embed_query"):
        return _ObjectEmbeddings(embed)
    if isinstance(embed, str):
        raise ValueError(
            f"index embed={embed!r} names a model provider, which needs LangChain; pregelkit "
            "has no model dependency: pass a function from a list of texts to a list of "
            "vectors (sync or async), or an object with embed_documents/embed_query"
        )
    if callable(embed):
        return _FunctionEmbeddings(embed)
    raise TypeError(
        f"index embed must be a function from a list of texts to a list of vectors, or an "
        f"object with embed_documents/embed_query, got {type(embed).__name__}"
    )


def check_vectors(vectors: object, count: int, dims: int) -> list[list[float]]:
    """The embedder's answer, checked: ``count`` vectors of ``dims`` finite
    numbers each. A wrong answer would be stored and searched silently."""
    if not isinstance(vectors, Sequence) or len(vectors) != count:
        got = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
        raise ValueError(f"the index's embed function returned {got} vectors for {count} texts")
    checked: list[list[float]] = []
    for vector in vectors:
        numbers = [float(x) for x in vector]
        if len(numbers) != dims:
            raise ValueError(
                f"the index's embed function returned a vector of {len(numbers)} numbers, "
                f"but the index has dims={dims}"
            )
        if not all(math.isfinite(x) for x in numbers):
            raise ValueError("the index's embed function returned a vector with NaN or inf")
        checked.append(numbers)
    return checked


def tokenize_path(path: str) -> list[str]:
    """Split a field path such as ``"a.b[0].c"`` or ``"a.{b,c}"`` into its
    steps: names, ``[n]`` / ``[*]`` indexes, ``{x,y}`` alternatives, ``*``."""
    if not path:
        return []
    tokens: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(path):
        char = path[i]
        if char in "[{":
            closing = "]" if char == "[" else "}"
            end = path.find(closing, i)
            if end < 0:
                raise ValueError(f"field path {path!r} has an unclosed {char!r}")
            if current:
                tokens.append("".join(current))
                current = []
            tokens.append(path[i : end + 1])
            i = end + 1
        elif char == ".":
            if current:
                tokens.append("".join(current))
                current = []
            i += 1
        else:
            current.append(char)
            i += 1
    if current:
        tokens.append("".join(current))
    return tokens


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def get_text_at_path(obj: Any, path: str | list[str]) -> list[str]:
    """The texts at ``path`` in ``obj`` (``"$"`` or ``""``: the whole document),
    each non-string value as JSON. ``[]`` where the path leads nowhere, to a
    ``None`` (there is no text to embed), or is malformed: ``put`` has already
    refused a malformed path of its own, so this only reads."""
    if obj is None:
        return []
    if path in ("$", "", ["$"]):
        return [_as_text(dict(obj) if isinstance(obj, Mapping) else obj)]
    try:
        tokens = tokenize_path(path) if isinstance(path, str) else path
    except ValueError:
        return []
    return [_as_text(node) for node in _walk(obj, tokens) if node is not None]


def _walk(obj: Any, tokens: list[str]) -> list[Any]:
    found: list[Any] = [obj]
    for token in tokens:
        found = [child for node in found for child in _step(node, token)]
    return found


def _step(node: Any, token: str) -> list[Any]:
    if token.startswith("[") and token.endswith("]"):
        if not isinstance(node, list):
            return []
        index = token[1:-1]
        if index == "*":
            return list(node)
        try:
            return [node[int(index)]]
        except (ValueError, IndexError):
            return []
    if not isinstance(node, Mapping):
        return []
    if token == "*":
        return list(node.values())
    if token.startswith("{") and token.endswith("}"):
        # Each alternative is a path of its own: "{name,info.age}".
        alternatives = [name.strip() for name in token[1:-1].split(",")]
        return [found for alt in alternatives for found in _walk(node, tokenize_path(alt))]
    return [node[token]] if token in node else []
