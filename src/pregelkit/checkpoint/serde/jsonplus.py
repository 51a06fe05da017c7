"""The default serializer: fast typed bytes for every task write, safe to load.

Every value a task writes goes through here, so the common scalars get their
own tags (no framing, no pickle) and everything else is a protocol-5 pickle:
builtin containers and primitives pickle without naming any global, so the
restricted loader pays for its checks only when a payload names a class.

Loading never runs code the user did not opt into. A pickle names the
callables it wants rebuilt through ``find_class``; ours answers only with
classes from a fixed list of harmless standard types, types and modules the
user registered (``allow_types`` / ``allow_modules``), and never with a
function, so the only thing a payload can call is the constructor of a class
that was allowed. By-value pickles (cloudpickle: lambdas, local classes) carry
code, so they load only with ``unsafe_allow_any=True``.
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import fractions
import importlib
import io
import ipaddress
import pathlib
import pickle
import pickletools
import sys
import uuid
import zoneinfo
from collections.abc import Iterable
from typing import Any

import cloudpickle

from pregelkit.checkpoint.serde._registry import _registry, allow_modules, allow_types
from pregelkit.checkpoint.serde.base import SerdeError, UnsafeTypeError
from pregelkit.types import Command, Interrupt, Overwrite, Send

__all__ = ["JsonPlusSerializer", "allow_modules", "allow_types"]

_PROTOCOL = 5

# Tags. Scalars have their own so the hot path skips pickle entirely.
TAG_NULL = "null"
TAG_STR = "str"
TAG_INT = "int"
TAG_BYTES = "bytes"
TAG_BYTEARRAY = "bytearray"
TAG_PICKLE = "pickle"
TAG_CLOUDPICKLE = "cloudpickle"
TAG_EXC = "exc"


def _safe_types() -> dict[tuple[str, str], type]:
    """Standard types whose constructors only build values: no I/O, no imports
    named by the data, no callables taken from it."""
    types: list[type] = [
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
        Send,
        Interrupt,
        Command,
        Overwrite,
    ]
    # Builtin exceptions nested in a value (a list of errors, say) pickle by
    # their class; building one only stores its args.
    types.extend(
        obj
        for obj in vars(builtins).values()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    )
    return {(t.__module__, t.__qualname__): t for t in types}


# getattr(owner, name) pairs that pickles of safe types need: ZoneInfo pickles
# as ``getattr(ZoneInfo, "_unpickle")(key, from_cache)``.
_VETTED_ATTRIBUTES: frozenset[tuple[type, str]] = frozenset({(zoneinfo.ZoneInfo, "_unpickle")})


def _vetted_getattr(owner: object, name: str) -> Any:
    """Stands in for ``builtins.getattr`` while loading, so a payload cannot
    reach a function through an attribute of something it was allowed."""
    if isinstance(owner, type) and (owner, name) in _VETTED_ATTRIBUTES:
        return getattr(owner, name)
    owner_name = (
        f"{owner.__module__}.{owner.__qualname__}" if isinstance(owner, type) else repr(owner)
    )
    raise UnsafeTypeError(
        f"refusing to load getattr({owner_name}, {name!r}): loading only looks up the "
        "attributes that standard pickles need. If this data is trusted, load it with "
        "JsonPlusSerializer(unsafe_allow_any=True)."
    )


_SAFE: dict[tuple[str, str], Any] = {**_safe_types(), ("builtins", "getattr"): _vetted_getattr}


def _module_allowed(module: str, extra: frozenset[str]) -> bool:
    registered = _registry.modules
    candidate = module
    while True:
        if candidate in registered or candidate in extra:
            return True
        candidate, dot, _ = candidate.rpartition(".")
        if not dot:
            return False


def _resolve_registered(module: str, qualname: str) -> type:
    """The class ``module.qualname`` of a registered module, refusing anything
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
            "and loading only calls constructors of allowed classes. If this data is trusted, "
            "load it with JsonPlusSerializer(unsafe_allow_any=True)."
        )
    return obj


_MEMO_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def _check_sizes(payload: bytes) -> None:
    """Refuse a pickle whose opcodes claim more than its bytes can hold.

    The C unpickler trusts a memo index or a bytearray length and allocates
    for it before reading: a tampered row claiming index 2**31 makes a loader
    allocate tens of GB. A valid pickle never memoizes more objects, nor
    declares a longer string, than it has bytes, so that is the bound.
    """
    limit = len(payload)
    try:
        for op, arg, _ in pickletools.genops(payload):
            # genops itself refuses a declared length the bytes do not hold
            if op.name in _MEMO_OPS and isinstance(arg, int) and arg > limit:
                raise SerdeError(
                    f"corrupt or truncated pickle: memo index {arg} in a {limit}-byte payload"
                )
    except SerdeError:
        raise
    except Exception as exc:
        raise SerdeError(f"corrupt or truncated pickle: {exc}") from exc


class _RestrictedUnpickler(pickle.Unpickler):
    extra_modules: frozenset[str] = frozenset()

    def find_class(self, module: str, name: str) -> Any:
        found = _SAFE.get((module, name)) or _registry.types.get((module, name))
        if found is not None:
            return found
        if _module_allowed(module, self.extra_modules):
            return _resolve_registered(module, name)
        raise UnsafeTypeError(
            f"refusing to load {module}.{name}: it is not an allowed type, and loading never "
            "imports or calls what the stored data names unless told to. If this data is "
            f"trusted and {name} is a class, allow it with "
            f"pregelkit.checkpoint.serde.allow_types({name}) or allow_modules({module!r}) "
            f"(or JsonPlusSerializer(allowed_modules=[{module!r}])); to load arbitrary pickles, "
            "which runs code from the data, use JsonPlusSerializer(unsafe_allow_any=True)."
        )


def _type_name(obj: object) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


class JsonPlusSerializer:
    """Serializes checkpoints, task writes and cached values to ``(tag, bytes)``.

    Tags: ``null``, ``str`` (UTF-8), ``int`` (decimal), ``bytes``,
    ``bytearray``, ``exc`` (an exception, stored as its repr and loaded as that
    string), ``pickle`` (protocol 5, loaded by the restricted unpickler) and
    ``cloudpickle`` (by-value pickle, loaded only with ``unsafe_allow_any``).
    """

    def __init__(
        self, *, allowed_modules: Iterable[str] = (), unsafe_allow_any: bool = False
    ) -> None:
        # A lone string is one module name, not an iterable of one-letter modules.
        modules = frozenset(
            (allowed_modules,) if isinstance(allowed_modules, str) else allowed_modules
        )
        for name in modules:
            if not isinstance(name, str) or not name:
                raise TypeError(
                    f"allowed_modules takes module names such as 'myapp.models', got {name!r}"
                )
        self.allowed_modules = modules
        self.unsafe_allow_any = unsafe_allow_any
        # A subclass per configuration keeps the per-load cost at one constructor call.
        self._unpickler: type[_RestrictedUnpickler] = (
            type("_InstanceUnpickler", (_RestrictedUnpickler,), {"extra_modules": modules})
            if modules
            else _RestrictedUnpickler
        )

    def __repr__(self) -> str:
        return (
            f"JsonPlusSerializer(allowed_modules={sorted(self.allowed_modules)!r}, "
            f"unsafe_allow_any={self.unsafe_allow_any!r})"
        )

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """``(tag, bytes)`` for ``obj``; raises ``SerdeError`` naming the type of a
        value that cannot be stored at all (locks, generators, open files)."""
        if obj is None:
            return TAG_NULL, b""
        cls = type(obj)
        if cls is str:
            return TAG_STR, obj.encode("utf-8", "surrogatepass")
        if cls is int:
            try:
                return TAG_INT, str(obj).encode()
            except ValueError:  # beyond sys.get_int_max_str_digits(): pickle keeps it binary
                pass
        elif cls is bytes:
            return TAG_BYTES, obj
        elif cls is bytearray:
            return TAG_BYTEARRAY, bytes(obj)
        elif isinstance(obj, BaseException):
            return TAG_EXC, _exception_repr(obj).encode("utf-8", "surrogatepass")
        try:
            return TAG_PICKLE, pickle.dumps(obj, _PROTOCOL)
        except Exception:
            # Lambdas, local classes, closures: pickle can only name importable
            # objects, cloudpickle stores them by value.
            pass
        try:
            return TAG_CLOUDPICKLE, cloudpickle.dumps(obj, _PROTOCOL)
        except Exception as exc:
            raise SerdeError(
                f"cannot serialize a value of type {_type_name(obj)}: {exc}. Checkpointed "
                "values must be data (locks, generators, open files and connections cannot be "
                "stored); keep such objects outside the state, e.g. in a module-level variable "
                "or the run's context."
            ) from exc

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The value stored by ``dumps_typed``; raises ``UnsafeTypeError`` for types
        loading may not rebuild and ``SerdeError`` for unknown tags or corrupt bytes."""
        try:
            tag, payload = data
        except (TypeError, ValueError) as exc:
            raise SerdeError(
                f"loads_typed() takes the (tag, bytes) pair dumps_typed() made, got {data!r:.80}"
            ) from exc
        if type(payload) is not bytes:
            if not isinstance(payload, (bytearray, memoryview)):
                raise SerdeError(
                    f"loads_typed() needs bytes for tag {tag!r}, got {type(payload).__name__}"
                )
            payload = bytes(payload)
        try:
            if tag == TAG_STR:
                return payload.decode("utf-8", "surrogatepass")
            if tag == TAG_PICKLE:
                if self.unsafe_allow_any:
                    return pickle.loads(payload)
                _check_sizes(payload)
                return self._unpickler(io.BytesIO(payload)).load()
            if tag == TAG_NULL:
                return None
            if tag == TAG_INT:
                return int(payload)
            if tag == TAG_BYTES:
                return payload
            if tag == TAG_BYTEARRAY:
                return bytearray(payload)
            if tag == TAG_EXC:
                return payload.decode("utf-8", "surrogatepass")
            if tag == TAG_CLOUDPICKLE:
                if not self.unsafe_allow_any:
                    raise UnsafeTypeError(
                        "refusing to load a 'cloudpickle' value: it was stored by value "
                        "(a lambda, a local class or a closure) and loading it runs code from "
                        "the stored data. If the store is trusted, load it with "
                        "JsonPlusSerializer(unsafe_allow_any=True); better, store plain data or "
                        "module-level classes."
                    )
                return cloudpickle.loads(payload)
        except SerdeError:
            raise
        except Exception as exc:
            raise SerdeError(
                f"stored {tag!r} value is corrupt or truncated ({type(exc).__name__}: {exc}); "
                "it was not written by this serializer or was damaged since"
            ) from exc
        raise SerdeError(
            f"unknown serialization tag {tag!r}: the value was written by another serializer; "
            f"known tags are {', '.join(_KNOWN_TAGS)}. Load it with the serializer that wrote it."
        )

    def dumps(self, obj: Any) -> bytes:
        """One self-describing bytes value (``tag NUL payload``), for stores that
        keep a single column."""
        tag, payload = self.dumps_typed(obj)
        return tag.encode() + b"\x00" + payload

    def loads(self, data: bytes) -> Any:
        """The value stored by ``dumps``."""
        tag, sep, payload = bytes(data).partition(b"\x00")
        if not sep:
            raise SerdeError(
                "loads() takes the bytes dumps() made (tag, NUL, payload); no tag separator "
                f"in {bytes(data)[:40]!r}"
            )
        return self.loads_typed((tag.decode("ascii", "replace"), payload))


_KNOWN_TAGS = (
    TAG_NULL,
    TAG_STR,
    TAG_INT,
    TAG_BYTES,
    TAG_BYTEARRAY,
    TAG_EXC,
    TAG_PICKLE,
    TAG_CLOUDPICKLE,
)


def _exception_repr(exc: BaseException) -> str:
    try:
        return repr(exc)
    except Exception:  # a broken __repr__ must not lose the record that the task failed
        return f"{type(exc).__name__}(<repr failed>)"
