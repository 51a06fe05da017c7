"""Pickle a value only if the restricted loader will take it back.

A value that pickles fine but names a global the loader refuses (a lambda, a
class defined in a function, a class of a module nobody allowed) used to be
stored and then fail on resume, leaving the thread stuck. Here the pickler
itself reports every global it is about to name, and each is checked against
the same allowlist the loader uses, so such a value is refused while the
task that wrote it can still be named.

Cost: the C pickler calls ``reducer_override`` only for objects that are not
builtin containers or scalars, so plain data (dicts, lists, strings, numbers)
is pickled without a Python callback; each thread reuses one pickler.
"""

from __future__ import annotations

import builtins
import copyreg
import io
import pickle
import threading
import types
from typing import Any

from pregelkit.checkpoint.serde._allowlist import VETTED_ATTRIBUTES, Allowlist
from pregelkit.checkpoint.serde.base import SerdeError

PROTOCOL = 5
_GLOBAL_NAMING = (types.FunctionType, types.BuiltinFunctionType)


class RefusedValueError(SerdeError):
    """A value was not stored because loading could not rebuild it."""


def type_name(obj: object) -> str:
    cls = type(obj)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class _CheckingPickler(pickle.Pickler):
    """Asks ``allowlist`` about every global the pickle will name."""

    allowlist: Allowlist

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) or (
            isinstance(obj, _GLOBAL_NAMING)
            and isinstance(getattr(obj, "__self__", None), (types.ModuleType, type(None)))
        ):
            self._check_global(obj, getattr(obj, "__module__", None), obj.__qualname__)
            return NotImplemented
        # An exception pickles as cls(*args) plus its state, whatever a library
        # registered for it: tblib (imported by dask's distributed) registers a
        # reducer for every exception class that names its own module's
        # function, which the loader would rightly refuse.
        reduce = None if isinstance(obj, BaseException) else copyreg.dispatch_table.get(type(obj))
        rv = reduce(obj) if reduce is not None else obj.__reduce_ex__(PROTOCOL)
        if isinstance(rv, str):
            self._check_global(obj, _whichmodule(obj, rv), rv)
        elif isinstance(rv, tuple) and rv and rv[0] is builtins.getattr:
            owner, name = rv[1]
            if not (isinstance(owner, type) and (owner, name) in VETTED_ATTRIBUTES):
                raise RefusedValueError(
                    f"a {type_name(obj)} (a method or attribute reached through "
                    f"getattr({owner!r:.60}, {name!r})) cannot be loaded back: loading only "
                    "rebuilds data, never looks up methods"
                )
        elif isinstance(obj, BaseException) and type(obj).__module__ != "builtins":
            _check_exception_rebuilds(obj)
        return rv

    def _check_global(self, obj: Any, module: str | None, name: str) -> None:
        if module is None:
            module = _whichmodule(obj, name)
        if "<locals>" in name or "<lambda>" in name:
            kind = "lambda" if "<lambda>" in name else "local class or function"
            raise RefusedValueError(
                f"{module}.{name} is a {kind}: it exists only while its function runs, so "
                "loading could not find it. Define it at the top level of an importable module"
            )
        try:
            self.allowlist.find(module, name)
        except SerdeError as exc:
            raise RefusedValueError(f"loading would refuse it: {exc}") from None


def _check_exception_rebuilds(exc: BaseException) -> None:
    """Exceptions pickle as ``cls(*args)``: one whose constructor takes other
    arguments than it stores in ``args`` cannot be rebuilt."""
    try:
        type(exc)(*exc.args)
    except Exception as err:
        raise RefusedValueError(
            f"the exception {type_name(exc)} cannot be rebuilt from its args {exc.args!r:.80} "
            f"({type(err).__name__}: {err}); give its __init__ the same arguments it passes "
            "to super().__init__, or store str(exc)"
        ) from None


class _Writer(threading.local):
    """One reusable pickler per thread: making one per value costs more than
    pickling a small value."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.pickler = _CheckingPickler(self.buffer, PROTOCOL)
        self.busy = False


_writer = _Writer()
_whichmodule: Any = getattr(pickle, "whichmodule")  # noqa: B009 (untyped in typeshed)


def checked_dumps(obj: Any, allowlist: Allowlist) -> bytes:
    """A protocol-5 pickle of ``obj`` that ``allowlist``'s loader accepts;
    ``RefusedValueError`` naming the part it would refuse, otherwise."""
    writer = _writer
    if writer.busy:  # a __reduce__ that serializes: give it a pickler of its own
        buffer = io.BytesIO()
        pickler = _CheckingPickler(buffer, PROTOCOL)
        pickler.allowlist = allowlist
        pickler.dump(obj)
        return buffer.getvalue()
    writer.busy = True
    buffer, pickler = writer.buffer, writer.pickler
    pickler.allowlist = allowlist
    try:
        pickler.dump(obj)
        return buffer.getvalue()
    finally:
        buffer.seek(0)
        buffer.truncate()
        pickler.clear_memo()  # ready for the next value, and not keeping this one alive
        writer.busy = False
