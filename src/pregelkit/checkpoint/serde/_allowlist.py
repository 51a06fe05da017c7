"""Which globals a stored pickle may name: one decision for loading and saving.

The loader asks it for every class a payload names; the saver asks it for
every class, function and singleton a value's pickle would name, so a value
that loading would refuse is refused when it is written, while the task that
made it can still be told, instead of when the thread is resumed.
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import fractions
import importlib
import ipaddress
import pathlib
import sys
import types
import urllib.parse
import uuid
import zoneinfo
from typing import Any

from pregelkit.checkpoint.serde._registry import _registry
from pregelkit.checkpoint.serde.base import SerdeError, UnsafeTypeError
from pregelkit.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy

_UNSAFE_HINT = (
    "If this data is trusted, load it with JsonPlusSerializer(pickle_fallback=True) "
    "(also spelled unsafe_allow_any=True)."
)


def _safe_types() -> dict[tuple[str, str], Any]:
    """Standard types whose constructors only build values: no I/O, no imports
    named by the data, no callables taken from it."""
    kinds: list[type] = [
        object,
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        bytearray,
        list,
        tuple,
        dict,
        set,
        frozenset,
        range,
        slice,
        datetime.date,
        datetime.time,
        datetime.datetime,
        datetime.timedelta,
        datetime.timezone,
        zoneinfo.ZoneInfo,
        uuid.UUID,
        uuid.SafeUUID,
        decimal.Decimal,
        fractions.Fraction,
        collections.deque,
        collections.OrderedDict,
        collections.defaultdict,
        collections.Counter,
        pathlib.PurePath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.Path,
        pathlib.PosixPath,
        pathlib.WindowsPath,
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
        ipaddress.IPv4Interface,
        ipaddress.IPv6Interface,
        types.SimpleNamespace,
        urllib.parse.ParseResult,
        urllib.parse.SplitResult,
        urllib.parse.DefragResult,
        urllib.parse.ParseResultBytes,
        urllib.parse.SplitResultBytes,
        urllib.parse.DefragResultBytes,
        Send,
        TimeoutPolicy,
        Interrupt,
        Command,
        Overwrite,
    ]
    # Builtin exceptions nested in a value (a list of errors, say) pickle by
    # their class; building one only stores its args.
    kinds.extend(
        obj
        for obj in vars(builtins).values()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    )
    found: dict[tuple[str, str], Any] = {(t.__module__, t.__qualname__): t for t in kinds}
    # Singletons pickled by name.
    found[("builtins", "Ellipsis")] = Ellipsis
    found[("builtins", "NotImplemented")] = NotImplemented
    return found


# getattr(owner, name) pairs that pickles of safe types need: ZoneInfo pickles
# as ``getattr(ZoneInfo, "_unpickle")(key, from_cache)``.
VETTED_ATTRIBUTES: frozenset[tuple[type, str]] = frozenset({(zoneinfo.ZoneInfo, "_unpickle")})


def vetted_getattr(owner: object, name: str) -> Any:
    """Stands in for ``builtins.getattr`` while loading, so a payload cannot
    reach a function through an attribute of something it was allowed."""
    if isinstance(owner, type) and (owner, name) in VETTED_ATTRIBUTES:
        return getattr(owner, name)
    raise UnsafeTypeError(
        f"refusing to load getattr({_owner_name(owner)}, {name!r}): loading only looks up "
        f"the attributes that standard pickles need. {_UNSAFE_HINT}"
    )


def _owner_name(owner: object) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}"
    return f"a {type(owner).__qualname__}"


SAFE: dict[tuple[str, str], Any] = {**_safe_types(), ("builtins", "getattr"): vetted_getattr}

# Safe standard types whose modules are costly to import (enums of dozens of
# members): resolved, and their module imported, only when a payload names them.
_SAFE_ON_DEMAND = frozenset({("http", "HTTPStatus"), ("http", "HTTPMethod")})


class Allowlist:
    """What one serializer may load: the fixed safe types, the process-wide
    registry, and this serializer's own modules and classes.

    ``any_class`` (LangGraph's ``allowed_*_modules=True``) admits a class
    from any module, importing it by name; functions stay refused.
    """

    __slots__ = ("any_class", "classes", "modules")

    def __init__(
        self,
        modules: frozenset[str] = frozenset(),
        classes: frozenset[tuple[str, str]] = frozenset(),
        any_class: bool = False,
    ) -> None:
        self.modules = modules
        self.classes = classes
        self.any_class = any_class

    def find(self, module: str, name: str) -> Any:
        """The object a pickle's ``module.name`` global stands for, or
        ``UnsafeTypeError``."""
        found = SAFE.get((module, name)) or _registry.types.get((module, name))
        if found is not None:
            return found
        if (module, name) in _SAFE_ON_DEMAND:
            found = SAFE[(module, name)] = getattr(importlib.import_module(module), name)
            return found
        if self.any_class or (module, name) in self.classes or self._module_allowed(module):
            return _resolve_class(module, name)
        raise UnsafeTypeError(
            f"refusing to load {module}.{name}: it is not an allowed type, and loading never "
            "imports or calls what the stored data names unless told to. If this data is "
            f"trusted and {name} is a class, allow it with "
            f"pregelkit.checkpoint.serde.allow_types({name}) or allow_modules({module!r}) "
            f"(or JsonPlusSerializer(allowed_modules=[{module!r}])); to load arbitrary pickles, "
            "which runs code from the data, use JsonPlusSerializer(pickle_fallback=True)."
        )

    def _module_allowed(self, module: str) -> bool:
        registered = _registry.modules
        candidate = module
        while True:
            if candidate in registered or candidate in self.modules:
                return True
            candidate, dot, _ = candidate.rpartition(".")
            if not dot:
                return False


def _resolve_class(module: str, qualname: str) -> type:
    """The class ``module.qualname`` of an allowed module, refusing anything
    that is not a class defined there (an alias, a function, a dunder walk)."""
    parts = qualname.split(".")
    if any(not part or part.startswith("__") or part == "<locals>" for part in parts):
        raise UnsafeTypeError(
            f"refusing to load {module}.{qualname}: only classes defined at a module's top "
            "level (or nested in such a class) are loaded"
        )
    try:
        obj: Any = sys.modules.get(module) or importlib.import_module(module)
        for part in parts:
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SerdeError(
            f"cannot load {module}.{qualname}: {exc}. The class was probably renamed or moved "
            "since the value was stored; restore it there or delete the stored value."
        ) from exc
    if not isinstance(obj, type) or obj.__module__ != module or obj.__qualname__ != qualname:
        raise UnsafeTypeError(
            f"refusing to load {module}.{qualname}: it is not a class defined in {module!r}, "
            f"and loading only calls constructors of allowed classes. {_UNSAFE_HINT}"
        )
    return obj
