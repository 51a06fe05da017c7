"""Checks of what a user hands a graph, run before anything runs.

A misuse (a path string as a checkpointer, a typo'd keyword, ``config=None``
where a dict is expected) must fail at once, naming the parameter and saying
what to do, rather than as an ``AttributeError`` from deep inside a run, or
not at all. These run once per ``invoke``/``stream`` (never per task), and
cost a few dict lookups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any, get_args

from pregelkit._internal._constants import CONF, CONFIG_KEY_CHECKPOINT_NS
from pregelkit._internal._policy_checks import describe
from pregelkit.types import CachePolicy, RetryPolicy, StreamMode

__all__ = [
    "INVOKE_KEYWORDS",
    "STREAM_KEYWORDS",
    "check_cache",
    "check_components",
    "check_copy_fields",
    "check_cache_policy",
    "check_checkpointer",
    "check_config",
    "check_durability",
    "check_interrupt_nodes",
    "check_keywords",
    "check_retry_policy",
    "check_store",
    "check_stream_mode",
    "did_you_mean",
]

STREAM_MODES = frozenset(get_args(StreamMode))
DURABILITIES = ("sync", "async", "exit")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, or ``""``."""
    import difflib  # only when there is a mistake to explain

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


INVOKE_KEYWORDS = (
    "stream_mode",
    "output_keys",
    "interrupt_before",
    "interrupt_after",
    "durability",
    "context",
    "control",
    "debug",
    "print_mode",
    "version",
)
STREAM_KEYWORDS = (*INVOKE_KEYWORDS, "subgraphs")


def check_keywords(
    method: str, kwargs: Mapping[str, Any], known: Iterable[str], extra: Iterable[str] = ()
) -> None:
    """Refuse keyword arguments ``method`` does not take (other than ``extra``,
    which it reads from ``**kwargs``), suggesting the closest one it does: a
    typo'd ``durabilty=`` must not be silently ignored."""
    for key in kwargs:
        if key not in extra:
            raise TypeError(
                f"{method}() got an unexpected keyword argument {key!r}{did_you_mean(key, known)}"
            )


def check_copy_fields(current: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
    """``Pregel.copy`` replaces attributes the graph has; a misspelt one would
    otherwise be added silently and change nothing."""
    for key, value in changes.items():
        if key not in current and not key.startswith("_"):
            public = [k for k in current if not k.startswith("_")]
            raise TypeError(f"copy() got an unknown attribute {key!r}{did_you_mean(key, public)}")
        if key == "checkpointer":
            check_checkpointer(value)
        elif key == "store":
            check_store(value)
        elif key == "cache":
            check_cache(value)


def _context_manager_hint(param: str, value: Any) -> str | None:
    """What to say when ``value`` is the context manager that makes a component,
    not the component (``SqliteSaver.from_conn_string(path)`` without ``with``)."""
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        keyword = "async with"
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        keyword = "with"
    else:
        return None
    return (
        f"{param}= got a context manager ({type(value).__name__}), not what it makes; "
        f"open it first: `{keyword} ....from_conn_string(...) as {param}:` and pass "
        f"`{param}={param}`"
    )


def _check_component(
    param: str, value: Any, base: type, examples: str, allow_bool: bool = False
) -> None:
    if value is None or isinstance(value, base) or (allow_bool and isinstance(value, bool)):
        return
    if isinstance(value, type):
        raise TypeError(
            f"{param}= got the class {value.__name__} itself; pass an instance, e.g. {examples}"
        )
    hint = _context_manager_hint(param, value)
    if hint is not None:
        raise TypeError(hint)
    raise TypeError(f"{param}= must be a {base.__name__} (e.g. {examples}), got {describe(value)}")


def check_checkpointer(value: Any) -> None:
    """A saver, None, or True/False (a subgraph uses / never uses its parent's).
    (Each check imports its base class only for a value to check: a graph
    built without a store never loads the store's modules.)"""
    if value is None or isinstance(value, bool):
        return
    from pregelkit.checkpoint.base import BaseCheckpointSaver

    _check_component(
        "checkpointer",
        value,
        BaseCheckpointSaver,
        "InMemorySaver(), or a SqliteSaver opened with `with`",
        allow_bool=True,
    )


def check_store(value: Any) -> None:
    if value is None:
        return
    from pregelkit.store.base import BaseStore

    _check_component("store", value, BaseStore, "InMemoryStore()")


def check_cache(value: Any) -> None:
    if value is None:
        return
    from pregelkit.cache.base import BaseCache

    _check_component("cache", value, BaseCache, 'InMemoryCache() or SqliteCache(path="...")')


def check_retry_policy(value: Any, where: str = "retry_policy=") -> None:
    """A RetryPolicy, a sequence of them, or None."""
    if value is None or isinstance(value, RetryPolicy):
        return
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for item in value:
            if not isinstance(item, RetryPolicy):
                raise TypeError(
                    f"{where} must hold RetryPolicy objects only, got {describe(item)} in it"
                )
        return
    raise TypeError(
        f"{where} must be a RetryPolicy (e.g. RetryPolicy(max_attempts=3)) or a list of "
        f"them, got {describe(value)}"
    )


def check_cache_policy(value: Any, where: str = "cache_policy=") -> None:
    if value is None or isinstance(value, CachePolicy):
        return
    raise TypeError(
        f"{where} must be a CachePolicy (e.g. CachePolicy(ttl=3600)), got {describe(value)}"
    )


def check_components(
    checkpointer: Any, store: Any, cache: Any, retry_policy: Any, cache_policy: Any
) -> None:
    """What a graph is built with."""
    check_checkpointer(checkpointer)
    check_store(store)
    check_cache(cache)
    check_retry_policy(retry_policy)
    check_cache_policy(cache_policy)


def check_config(config: Any) -> None:
    """The config of one run: a mapping whose known keys have usable values."""
    if config is None:
        return
    if type(config) is not dict and not isinstance(config, Mapping):
        raise TypeError(
            "config must be a dict, e.g. {'configurable': {'thread_id': '1'}}, "
            f"got {describe(config)}"
        )
    conf = config.get(CONF, {})
    if type(conf) is not dict and not isinstance(conf, Mapping):
        raise TypeError(
            f"config['configurable'] must be a dict, e.g. {{'thread_id': '1'}}, "
            f"got {describe(conf)}"
        )
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
    if type(ns) is not str:
        raise TypeError(
            "config['configurable']['checkpoint_ns'] must be a str ('' for the root graph, "
            f"or leave it out), got {describe(ns)}"
        )
    meta = config.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"config['metadata'] must be a dict, got {describe(meta)}")
    if "recursion_limit" in config:
        limit = config["recursion_limit"]
        if type(limit) is not int and not _is_integral(limit):
            raise TypeError(
                f"config['recursion_limit'] must be an int, got {describe(limit)}; leave it "
                "out for the default (25)"
            )
        if limit < 1:
            raise ValueError(
                f"config['recursion_limit'] must be 1 or more (the number of supersteps a "
                f"run may take), got {limit}"
            )


def check_interrupt_nodes(label: str, value: Any, nodes: Iterable[str]) -> Sequence[str] | str:
    """``interrupt_before``/``interrupt_after``: ``"*"``, a node name or a
    list of them, each a node of the graph. A lone name is that node (not a
    string whose substrings name nodes); returns the names as a tuple."""
    if value == "*":
        return "*"
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, (Sequence, Set)) or isinstance(names, bytes):
        raise TypeError(
            f"{label}= must be '*', a node name or a list of them, got {describe(value)}"
        )
    known = set(nodes)
    for name in names:
        if not isinstance(name, str) or name not in known:
            shown = name if isinstance(name, str) else describe(name)
            raise ValueError(f"{label} names unknown node {shown!r}; nodes: {sorted(known)}")
    return tuple(names)


def check_stream_mode(mode: Any) -> None:
    """One stream mode or a sequence of them."""
    if mode is None or (type(mode) is str and mode in STREAM_MODES):
        return
    modes = [mode] if isinstance(mode, str) else mode
    if not isinstance(modes, (Sequence, Set)) or isinstance(modes, bytes):
        raise TypeError(f"stream_mode= must be a mode name or a list of them, got {describe(mode)}")
    for m in modes:
        if m not in STREAM_MODES:
            shown = m if isinstance(m, str) else describe(m)
            hint = did_you_mean(m, STREAM_MODES) if isinstance(m, str) else ""
            raise ValueError(
                f"unknown stream_mode {shown!r}{hint}; choose from {sorted(STREAM_MODES)}"
            )


def check_durability(value: Any) -> None:
    if value is None or value in DURABILITIES:
        return
    hint = did_you_mean(value, DURABILITIES) if isinstance(value, str) else ""
    raise ValueError(f"durability= must be 'sync', 'async' or 'exit', got {value!r}{hint}")


def _is_integral(value: Any) -> bool:
    """An int-like number that is not a bool (``numbers`` loads only for the
    rare value that is not an exact int)."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
