"""Dataclasses that cost nothing to define.

``@dataclass`` compiles each generated method with ``exec`` when the class is
defined (about a millisecond a class on a slow machine) and ``import
dataclasses`` pulls in ``inspect``, ``ast``, ``dis`` and ``tokenize``: for the
public types LangGraph defines as dataclasses, that was half of ``import
pregelkit.func``. ``lazy_dataclass`` gives a class with a hand-written
``__init__`` what ``@dataclass`` would add (``__repr__``, ``__eq__``,
``__hash__``, frozen guards, slot pickling, ``__match_args__``), without
either cost. ``__dataclass_fields__`` and ``__dataclass_params__`` are built
by the real ``dataclasses`` the first time something asks for them, so
``dataclasses.fields/asdict/astuple/replace/is_dataclass`` see the same
fields as before.

The class declares its fields as annotations (``from __future__ import
annotations``, so they stay strings) and, for ``slots=True``, its own
``__slots__``; the defaults are its ``__init__``'s. It must not be subclassed
with new fields: only the class itself is a dataclass.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

__all__ = ["lazy_dataclass", "replace"]

# Each lazy dataclass's declaration (its fields, for ``replace``).
_DECLARATIONS: dict[type, _Declaration] = {}


def lazy_dataclass(
    *,
    eq: bool = True,
    frozen: bool = False,
    init: bool = True,
    repr: bool = True,
    slots: bool = False,
    kw_only: tuple[str, ...] = (),
    hidden: tuple[str, ...] = (),
) -> Callable[[T], T]:
    """The class, as ``@dataclass(eq=..., frozen=..., init=..., repr=..., slots=...)``
    would make it, given the ``__init__`` that decorator would generate.

    ``kw_only`` and ``hidden`` (``field(repr=False)``) name per-field options.
    """
    params = {"init": init, "repr": repr, "eq": eq, "frozen": frozen, "slots": slots}

    def wrap(cls: T) -> T:
        names = tuple(
            name
            for name, kind in cls.__annotations__.items()
            if not str(kind).startswith("ClassVar")
        )
        if "__init__" not in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} needs the __init__ @dataclass would generate")
        if slots and sorted(cls.__dict__.get("__slots__", ())) != sorted(names):
            raise TypeError(f"{cls.__qualname__}.__slots__ must list its fields")
        # what the class body defines wins, in the twin too (as with @dataclass)
        own = {m: cls.__dict__[m] for m in ("__repr__", "__eq__") if m in cls.__dict__}
        if init:  # the generated __init__'s return annotation is None, not "None"
            cls.__dict__["__init__"].__annotations__["return"] = None
        _set(cls, "__match_args__", tuple(n for n in names if n not in kw_only))
        if repr:
            shown = tuple(n for n in names if n not in hidden)
            _set(cls, "__repr__", _repr(shown))
        if eq:
            _set(cls, "__eq__", _eq(names))
            explicit_hash = cls.__dict__.get("__hash__") is not None
            if frozen and not explicit_hash:
                _put(cls, "__hash__", _hash(names))
            elif not explicit_hash:
                cls.__hash__ = None  # type: ignore[assignment]
        if frozen:
            setter, deleter = _frozen(cls, names)
            _put(cls, "__setattr__", setter)
            _put(cls, "__delattr__", deleter)
            if slots:
                _set(cls, "__getstate__", _getstate(names))
                _set(cls, "__setstate__", _setstate(names))
        declaration = _DECLARATIONS[cls] = _Declaration(cls, names, params, kw_only, hidden, own)
        cls.__dataclass_fields__ = _Lazy(declaration, "__dataclass_fields__")  # type: ignore[attr-defined]
        cls.__dataclass_params__ = _Lazy(declaration, "__dataclass_params__")  # type: ignore[attr-defined]
        return cls

    return wrap


def replace(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace(obj, **changes)`` for a lazy dataclass, without
    importing ``dataclasses`` (an unknown name is the same ``TypeError``)."""
    cls = obj.__class__
    names = next(_DECLARATIONS[base].names for base in cls.__mro__ if base in _DECLARATIONS)
    return cls(**{**{name: getattr(obj, name) for name in names}, **changes})


def _set(cls: type, name: str, value: Any) -> None:
    """Like ``@dataclass``: what the class body defines wins."""
    if name not in cls.__dict__:
        _put(cls, name, value)


def _put(cls: type, name: str, value: Any) -> None:
    if callable(value):
        value.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, value)


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return attrgetter(*names)


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({body})"

    return __repr__


def _eq(names: tuple[str, ...]) -> Callable[[Any, object], Any]:
    values = _values(names)

    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _frozen(cls: type[Any], names: tuple[str, ...]) -> tuple[Any, Any]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _getstate(names: tuple[str, ...]) -> Callable[[Any], list[Any]]:
    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in names]

    return __getstate__


def _setstate(names: tuple[str, ...]) -> Callable[[Any, list[Any]], None]:
    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(names, state, strict=False):
            object.__setattr__(self, name, value)

    return __setstate__


class _Declaration:
    """What ``@dataclass`` needs to build the real field objects, kept until
    someone reads ``__dataclass_fields__`` or ``__dataclass_params__``."""

    def __init__(
        self,
        cls: type,
        names: tuple[str, ...],
        params: dict[str, bool],
        kw_only: tuple[str, ...],
        hidden: tuple[str, ...],
        own: dict[str, Any],
    ) -> None:
        self.cls = cls
        self.names = names
        self.params = params
        self.kw_only = kw_only
        self.hidden = hidden
        self.own = own
        """Methods the class body defines that ``@dataclass`` would otherwise add."""

    def install(self) -> None:
        """Replace both stand-ins with what ``@dataclass`` makes of the same
        declaration (its twin's; the twin class itself is dropped)."""
        twin = self.twin()
        type.__setattr__(self.cls, "__dataclass_fields__", twin.__dataclass_fields__)
        type.__setattr__(self.cls, "__dataclass_params__", twin.__dataclass_params__)

    def twin(self) -> Any:
        """A new class with the same fields, as ``@dataclass`` makes it."""
        import dataclasses

        cls = self.cls
        defaults = _init_defaults(cls.__dict__["__init__"])
        annotations = dict(cls.__annotations__)
        ns: dict[str, Any] = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__annotations__": annotations,
            **self.own,
        }
        for name in annotations:
            if name not in self.names:
                ns[name] = cls.__dict__[name]  # a ClassVar: a pseudo-field, as before
                continue
            options: dict[str, Any] = {}
            if name in self.kw_only:
                options["kw_only"] = True
            if name in self.hidden:
                options["repr"] = False
            if name in defaults:
                options["default"] = defaults[name]
            if options:
                ns[name] = dataclasses.field(**options)
        return dataclasses.dataclass(type(cls.__name__, (), ns), **self.params)


class _Lazy:
    """A class attribute computed by ``declaration.install()`` on first read."""

    def __init__(self, declaration: _Declaration, name: str) -> None:
        self.declaration = declaration
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        self.declaration.install()
        return getattr(self.declaration.cls, self.name)


def _init_defaults(init: Any) -> dict[str, Any]:
    """The parameter defaults of ``init``, by name, read without ``inspect``."""
    code = init.__code__
    positional = code.co_varnames[: code.co_argcount]
    defaults = dict(zip(positional[::-1], (init.__defaults__ or ())[::-1], strict=False))
    defaults.update(init.__kwdefaults__ or {})
    return defaults
