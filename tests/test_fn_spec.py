"""What the engine reads of a user function when a graph is built
(``pregel/_graph/call.py``): a plain ``def`` or ``lambda`` is read from its
code object, without ``inspect``; the answers must be ``inspect``'s for
every signature (Hypothesis writes the functions)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pregelkit.pregel._graph.call import INJECTABLE, FnSpec, _params

_names = st.lists(
    st.sampled_from(["x", "y", *INJECTABLE, "a", "b"]), unique=True, max_size=7
).flatmap(
    lambda names: st.tuples(
        st.just(names),
        st.integers(0, len(names)),  # positional-only count
        st.integers(0, len(names)),  # where keyword-only starts
        st.booleans(),  # *args
        st.booleans(),  # **kwargs
        st.sampled_from(["def", "async def", "generator", "async generator"]),
    )
)


def _make(spec: tuple[list[str], int, int, bool, bool, str]) -> Any:
    names, posonly, kwonly_at, star, double_star, kind = spec
    kwonly_at = max(kwonly_at, posonly)
    parts = list(names[:posonly])
    if posonly:
        parts.append("/")
    parts += names[posonly:kwonly_at]
    if star:
        parts.append("*args")
    elif kwonly_at < len(names):
        parts.append("*")
    parts += names[kwonly_at:]
    if double_star:
        parts.append("**kwargs")
    body = {"def": "return 1", "async def": "return 1"}.get(kind, "yield 1")
    head = "async def" if kind.startswith("async") else "def"
    scope: dict[str, Any] = {}
    exec(f"{head} f({', '.join(parts)}):\n    {body}\n", scope)
    return scope["f"]


def _inspected(fn: Any) -> tuple[str, ...]:
    return tuple(
        n
        for n, p in inspect.signature(fn).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


@given(_names)
def test_a_plain_function_reads_as_inspect_reads_it(
    spec: tuple[list[str], int, int, bool, bool, str],
) -> None:
    fn = _make(spec)
    assert _params(fn) == _inspected(fn)
    read = FnSpec(fn)
    assert read.is_async == inspect.iscoroutinefunction(fn)
    assert read.is_gen == (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn))


def test_a_wrapped_or_marked_function_is_read_by_inspect() -> None:
    async def inner(x: int, config: Any) -> int:
        return x

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    read = FnSpec(wrapper)  # __wrapped__ set: the async function it wraps
    assert read.is_async and read.inject == ("config",)

    def plain(x: int, store: Any) -> int:
        return x

    plain.__signature__ = inspect.signature(lambda x: x)  # type: ignore[attr-defined]
    assert FnSpec(plain).inject == ()  # the signature it claims
    lam = lambda x, writer: x  # noqa: E731
    assert FnSpec(lam).inject == ("writer",) and not FnSpec(lam).is_async
