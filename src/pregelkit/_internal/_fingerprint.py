"""What a function *is*, for the cache: where it lives and a digest of its code.

A cached result may only be reused by the code that computed it. Two tasks
with one qualified name (made by one factory, or defined in two scripts that
are both ``__main__``) and a function edited between runs must never share
results, so a cache key carries:

- ``origin``: the module and qualified name; for ``__main__`` the script's
  resolved path instead of the module name, as every script is ``__main__``.
- ``fingerprint``: a digest of the function's code object (bytecode,
  constants, names, recursively through nested functions and lambdas), of the
  values it closes over, of its default arguments, and of the module-level
  names it uses that are plain constants (numbers, strings, tuples of them)
  or functions of the same module (fingerprinted the same way).

Not covered: functions and classes imported from other modules (a library
upgrade does not invalidate the cache), and mutable module-level objects.
A closed-over or default value that is not plain data is identified by its
pickle; one that cannot be pickled (a lock, a client) by its identity in this
process, so its results are only reused within the process.

Bytecode differs between Python versions, so a new interpreter starts a fresh
cache. The fingerprint is computed once per function, on its first cached call.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, ModuleType
from typing import Any

import xxhash

from pregelkit._internal._cache import canonical_bytes

__all__ = ["fingerprint", "origin"]

_PLAIN = (str, int, float, bool, bytes, type(None))
_PROCESS = os.urandom(16)
"""Salt for values that have no stable encoding: their results stay in this process."""


def origin(fn: Any) -> str:
    """``module.qualname``, or ``/resolved/script.py:qualname`` for ``__main__``."""
    target = getattr(fn, "__func__", fn)
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None) or ""
    if module == "__main__":
        globals_ = getattr(target, "__globals__", None) or {}
        path = globals_.get("__file__") or getattr(sys.modules.get("__main__"), "__file__", None)
        if path:
            return f"{os.path.realpath(path)}:{qualname}"
    return f"{module}.{qualname}"


def fingerprint(fn: Any) -> bytes:
    """A 16-byte digest of what ``fn`` computes (see the module docstring)."""
    h = xxhash.xxh3_128()
    h.update(origin(fn).encode("utf-8", "surrogatepass"))
    _Walker(h).function(fn)
    return h.digest()


class _Walker:
    """Feeds a function's code and the values it depends on into one hash,
    visiting each function once (so recursion and mutual recursion end)."""

    def __init__(self, h: Any) -> None:
        self.h = h
        self.seen: set[int] = set()

    def put(self, tag: bytes, data: bytes) -> None:
        self.h.update(b"%s%d:" % (tag, len(data)))
        self.h.update(data)

    def function(self, fn: Any) -> None:
        target = getattr(fn, "__func__", fn)
        bound_self = getattr(fn, "__self__", None) if target is not fn else None
        code = getattr(target, "__code__", None)
        if not isinstance(code, CodeType):
            # a callable object: its class's __call__ and the object's own state
            call = getattr(type(fn), "__call__", None)  # noqa: B004
            self.put(b"C", type(fn).__qualname__.encode())
            if call is not None and isinstance(getattr(call, "__code__", None), CodeType):
                self.function(call)
            self.value(fn)
            return
        if id(code) in self.seen:
            self.put(b"R", code.co_qualname.encode())
            return
        self.seen.add(id(code))
        self.code(code)
        self.value(getattr(target, "__defaults__", None))
        self.value(getattr(target, "__kwdefaults__", None))
        for cell in getattr(target, "__closure__", None) or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                self.put(b"E", b"")
                continue
            self.value(contents)
        if bound_self is not None:
            self.value(bound_self)
        self.globals_of(target, code)

    def code(self, code: CodeType) -> None:
        self.put(b"K", code.co_code)
        shape = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)
        self.put(b"A", repr(shape).encode())
        self.put(b"V", ",".join(code.co_varnames).encode())
        self.put(b"M", ",".join(code.co_names).encode())
        self.put(b"F", ",".join(code.co_freevars).encode())
        for const in code.co_consts:
            if isinstance(const, CodeType):
                self.code(const)
            else:
                self.value(const)

    def globals_of(self, fn: Any, code: CodeType) -> None:
        """The module-level constants and same-module functions ``code`` names."""
        module_globals = getattr(fn, "__globals__", None)
        if not module_globals:
            return
        module = getattr(fn, "__module__", None)
        for name in sorted(_names(code)):
            if name not in module_globals:
                continue
            value = module_globals[name]
            if _is_plain(value):
                self.put(b"G", name.encode())
                self.value(value)
            elif getattr(value, "__module__", None) == module and isinstance(
                getattr(getattr(value, "__func__", value), "__code__", None), CodeType
            ):
                self.put(b"G", name.encode())
                self.function(value)

    def value(self, value: Any) -> None:
        if isinstance(getattr(getattr(value, "__func__", value), "__code__", None), CodeType):
            self.function(value)
        elif isinstance(value, type):
            self.put(b"T", f"{value.__module__}.{value.__qualname__}".encode())
        elif isinstance(value, ModuleType):
            self.put(b"O", value.__name__.encode())
        else:
            try:
                self.put(b"v", canonical_bytes(value))
            except Exception:
                self.put(b"X", _PROCESS + b"%d" % id(value))


def _names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def _is_plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if type(value) in (tuple, frozenset):
        return all(_is_plain(v) for v in value)
    return False
