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
that was allowed. Before a payload is run, ``_bounds.scan`` checks that it
builds no more than its bytes hold.

Saving is the mirror image: a value is pickled only if that loader will take
it back (``_save_check``), so a lambda or a class of a module nobody allowed
fails the task that wrote it, not the resume. By-value pickles (cloudpickle:
lambdas, local classes) are written and read only with
``pickle_fallback=True``, which trusts the store completely.
"""

from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Iterable
from typing import Any, Literal

import cloudpickle

from pregelkit.checkpoint.serde._allowlist import Allowlist
from pregelkit.checkpoint.serde._bounds import Limits, scan
from pregelkit.checkpoint.serde._registry import allow_modules, allow_types
from pregelkit.checkpoint.serde._save_check import (
    PROTOCOL,
    RefusedValueError,
    checked_dumps,
    type_name,
)
from pregelkit.checkpoint.serde.base import SerdeError, UnsafeTypeError

__all__ = ["JsonPlusSerializer", "allow_modules", "allow_types"]

# Tags. Scalars have their own so the hot path skips pickle entirely.
TAG_NULL = "null"
TAG_STR = "str"
TAG_INT = "int"
TAG_BYTES = "bytes"
TAG_BYTEARRAY = "bytearray"
TAG_PICKLE = "pickle"
TAG_CLOUDPICKLE = "cloudpickle"
TAG_EXC = "exc"

DEFAULT_MAX_ITEMS = 500_000
"""Items a load may build beyond its own bytes (from a range, a size, or an
argument reused through the memo). What this serializer writes uses none."""

DEFAULT_MAX_DEPTH = 20_000
"""Nesting a load may build: well above what pickle itself can write (it
recurses once per level, within the interpreter's recursion limit)."""

_DEFAULT: Any = object()


class _RestrictedUnpickler(pickle.Unpickler):
    allowlist: Allowlist

    def find_class(self, module: str, name: str) -> Any:
        return self.allowlist.find(module, name)


def _class_names(option: str, entries: Iterable[Any]) -> frozenset[tuple[str, str]]:
    """LangGraph's allowlist entries: ``("pkg", "module", "Class")`` paths, or
    (for msgpack) classes themselves."""
    names = set()
    for entry in entries:
        if isinstance(entry, type):
            names.add((entry.__module__, entry.__qualname__))
        elif (
            isinstance(entry, tuple)
            and len(entry) >= 2
            and all(isinstance(part, str) and part for part in entry)
        ):
            names.add((".".join(entry[:-1]), entry[-1]))
        else:
            raise TypeError(
                f"{option} takes (module, ..., class name) tuples such as "
                f"('myapp.models', 'Order'), classes, or True; got {entry!r}"
            )
    return frozenset(names)


class JsonPlusSerializer:
    """Serializes checkpoints, task writes and cached values to ``(tag, bytes)``.

    Tags: ``null``, ``str`` (UTF-8), ``int`` (decimal), ``bytes``,
    ``bytearray``, ``exc`` (an exception, stored as its repr and loaded as that
    string), ``pickle`` (protocol 5, loaded by the restricted unpickler) and
    ``cloudpickle`` (by-value pickle, only with ``pickle_fallback``).

    :param pickle_fallback: trust the store completely: values plain pickle
        refuses (lambdas, local classes) are stored by value with cloudpickle,
        and loading runs any pickle without allowlist or limits. The same
        switch as ``unsafe_allow_any``; either turns it on. Off by default,
        on both sides: a value that needs it is refused when saved.
    :param allowed_json_modules: LangGraph's allowlist: ``(module parts...,
        class name)`` tuples admit those classes; ``True`` admits a class of
        any module (never a function).
    :param allowed_msgpack_modules: the same, also taking classes.
    :param allowed_modules: module names whose classes (and submodules'
        classes) this serializer loads, beside the process-wide registry.
    :param max_items: what one load may build beyond its own bytes.
    :param max_depth: how deep a loaded value may nest.
    """

    def __init__(
        self,
        *,
        pickle_fallback: bool = False,
        allowed_json_modules: Iterable[tuple[str, ...]] | Literal[True] | None = None,
        allowed_msgpack_modules: Iterable[tuple[str, ...] | type] | Literal[True] | None = _DEFAULT,
        allowed_modules: Iterable[str] = (),
        unsafe_allow_any: bool = False,
        max_items: int = DEFAULT_MAX_ITEMS,
        max_depth: int = DEFAULT_MAX_DEPTH,
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
        for option, value in (("max_items", max_items), ("max_depth", max_depth)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{option} must be a positive int, got {value!r}")
        any_class = False
        classes: frozenset[tuple[str, str]] = frozenset()
        for option, entries in (
            ("allowed_json_modules", allowed_json_modules),
            ("allowed_msgpack_modules", allowed_msgpack_modules),
        ):
            if entries is True:
                any_class = True
            elif entries is not None and entries is not _DEFAULT:
                classes |= _class_names(option, entries)
        self.allowed_modules = modules
        self.pickle_fallback = self.unsafe_allow_any = bool(pickle_fallback or unsafe_allow_any)
        self.max_items = max_items
        self.max_depth = max_depth
        self._allowlist = Allowlist(modules, classes, any_class)
        self._limits = Limits(max_items, max_depth)

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> JsonPlusSerializer:
        """A copy that also loads the classes ``extra_allowlist`` names
        (``(module parts..., class name)`` tuples, or classes), as LangGraph's
        does; this serializer itself when they add nothing it does not
        already load."""
        extra = _class_names("with_msgpack_allowlist()", extra_allowlist)
        allowlist = self._allowlist
        if self.pickle_fallback or allowlist.any_class or extra <= allowlist.classes:
            return self
        clone = copy.copy(self)
        clone._allowlist = Allowlist(allowlist.modules, allowlist.classes | extra)
        return clone

    def __repr__(self) -> str:
        return (
            f"JsonPlusSerializer(allowed_modules={sorted(self.allowed_modules)!r}, "
            f"pickle_fallback={self.pickle_fallback!r})"
        )

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """``(tag, bytes)`` for ``obj``; raises ``SerdeError`` naming the type of a
        value that could not be loaded back (locks, generators, open files,
        lambdas, classes of modules loading does not allow)."""
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
        if self.pickle_fallback:
            return self._dumps_trusting(obj)
        try:
            return TAG_PICKLE, checked_dumps(obj, self._allowlist)
        except RefusedValueError as exc:
            raise SerdeError(
                f"cannot store a value of type {type_name(obj)}: {exc}. Checkpointed values "
                "must be data that loading can rebuild; to store anything and trust the store "
                "completely, use JsonPlusSerializer(pickle_fallback=True)."
            ) from None
        except RecursionError as exc:
            raise SerdeError(
                f"cannot store a value of type {type_name(obj)}: it nests too deeply ({exc})"
            ) from None
        except Exception as exc:
            raise _unstorable(obj, exc) from exc

    def _dumps_trusting(self, obj: Any) -> tuple[str, bytes]:
        try:
            return TAG_PICKLE, pickle.dumps(obj, PROTOCOL)
        except Exception:
            # Lambdas, local classes, closures: pickle can only name importable
            # objects, cloudpickle stores them by value.
            pass
        try:
            return TAG_CLOUDPICKLE, cloudpickle.dumps(obj, PROTOCOL)
        except Exception as exc:
            raise _unstorable(obj, exc) from exc

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The value stored by ``dumps_typed``; raises ``UnsafeTypeError`` for types
        loading may not rebuild, ``LoadLimitError`` for payloads that would build
        more than the limits allow, and ``SerdeError`` for unknown tags or
        corrupt bytes."""
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
                if self.pickle_fallback:
                    return pickle.loads(payload)
                scan(payload, self._allowlist, self._limits)
                unpickler = _RestrictedUnpickler(io.BytesIO(payload))
                unpickler.allowlist = self._allowlist
                return unpickler.load()
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
                if not self.pickle_fallback:
                    raise UnsafeTypeError(
                        "refusing to load a 'cloudpickle' value: it was stored by value "
                        "(a lambda, a local class or a closure) and loading it runs code from "
                        "the stored data. If the store is trusted, load it with "
                        "JsonPlusSerializer(pickle_fallback=True) (also spelled "
                        "unsafe_allow_any=True); better, store plain data or module-level classes."
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


def _unstorable(obj: Any, exc: Exception) -> SerdeError:
    return SerdeError(
        f"cannot serialize a value of type {type_name(obj)}: {exc}. Checkpointed values must "
        "be data (locks, generators, open files and connections cannot be stored); keep such "
        "objects outside the state, e.g. in a module-level variable or the run's context."
    )


def _exception_repr(exc: BaseException) -> str:
    try:
        return repr(exc)
    except Exception:  # a broken __repr__ must not lose the record that the task failed
        return f"{type(exc).__name__}(<repr failed>)"
