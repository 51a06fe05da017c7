"""Namespaces as the SQL stores keep them, and ``list_namespaces`` for all.

A namespace is stored as one text, its labels joined by ``"."`` (labels
cannot contain one). The namespaces under a prefix ``p`` are ``p`` itself and
the texts in ``[p + ".", p + "/")`` (``"/"`` follows ``"."``): a range an
index answers, with no pattern syntax for a label to smuggle in.
"""

from __future__ import annotations

from collections.abc import Iterable

from pregelkit.store.base import ListNamespacesOp, MatchCondition

__all__ = ["decode", "encode", "list_namespaces", "literal_prefix", "prefix_bounds"]


def encode(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def decode(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def prefix_bounds(prefix: tuple[str, ...]) -> tuple[str, str, str]:
    """The text of ``prefix`` and the bounds of the texts strictly under it."""
    text = encode(prefix)
    return text, text + ".", text + "/"


def literal_prefix(op: ListNamespacesOp) -> tuple[str, ...]:
    """The labels every listed namespace starts with (a prefix pattern up to
    its first wildcard), for the SQL stores to narrow their scan."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = condition.path
    if len(path) > len(namespace):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(pattern in ("*", label) for pattern, label in zip(path, labels))


def list_namespaces(
    namespaces: Iterable[tuple[str, ...]], op: ListNamespacesOp
) -> list[tuple[str, ...]]:
    """The answer to ``op`` over the namespaces that hold items: matching,
    truncated to ``max_depth``, de-duplicated, sorted, paged."""
    conditions = op.match_conditions or ()
    found = {
        namespace[: op.max_depth] if op.max_depth is not None else namespace
        for namespace in namespaces
        if all(_matches(namespace, condition) for condition in conditions)
    }
    return sorted(found)[op.offset : op.offset + op.limit]
