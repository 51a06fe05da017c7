"""pytest plugin for the pregelkit side of the compatibility run: a name
pregelkit does not have fails the tests that use it, not the whole module.

LangGraph's test modules import dozens of names at the top; without this, one
missing name (or one module of langchain-core, which pregelkit deliberately
does without) would fail every test in the module, including the many that
never touch it. With it, importing a missing ``pregelkit`` module or name, or
a module of a package that is not installed (langchain-core, pydantic, the
LangGraph SDK), gives a placeholder; using the placeholder (calling it,
instantiating a subclass, reading an attribute of an instance) raises
:class:`MissingName` naming what was missing, and the report files the test
under that name.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

# Packages whose absence is expected on the pregelkit side.
_ABSENT_PACKAGES = ("langchain_core", "langchain", "pydantic", "langgraph_sdk", "langsmith")


class MissingName(ImportError):
    """What pregelkit (or this venv) does not have."""


class _MissingMeta(type):
    _missing: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if "_missing" not in cls.__dict__:
            # A test's own subclass (a fake embedder, say) is a plain class: it
            # fails only if it relies on what the missing base would have given.
            return super().__call__(*args, **kwargs)
        raise MissingName(f"missing: {cls._missing}")

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls._missing}.{name}")

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        # Without this, `x in Missing` iterates through __getitem__ forever.
        raise MissingName(f"missing: {cls._missing}")

    def __contains__(cls, item: Any) -> bool:
        raise MissingName(f"missing: {cls._missing}")

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls


def _placeholder(qualname: str) -> Any:
    root = qualname.split(".")[0]
    meta = _MissingMeta(qualname.rsplit(".", 1)[-1], (), {"_missing": qualname})
    meta.__module__ = root
    return meta


def _real_spec(fullname: str) -> importlib.machinery.ModuleSpec | None:
    parent = sys.modules.get(fullname.rpartition(".")[0])
    path = getattr(parent, "__path__", None)
    for finder in sys.meta_path:
        if isinstance(finder, _Finder):
            continue
        spec = finder.find_spec(fullname, path)
        if spec is not None:
            return spec
    return None


def _module_getattr(module: types.ModuleType, original: Any) -> Any:
    def __getattr__(name: str) -> Any:
        if original is not None:
            try:
                return original(name)
            except AttributeError:
                pass
        if name.startswith("__"):
            raise AttributeError(name)
        submodule = f"{module.__name__}.{name}"
        if hasattr(module, "__path__") and _real_spec(submodule) is not None:
            return importlib.import_module(submodule)
        return _placeholder(submodule)

    return __getattr__


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr(module, None)  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then gives the module a ``__getattr__`` that
    answers unknown public names with placeholders."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.real.exec_module(module)
        original = module.__dict__.get("__getattr__")
        module.__getattr__ = _module_getattr(module, original)  # type: ignore[method-assign]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        root = fullname.split(".")[0]
        if root not in ("pregelkit", *_ABSENT_PACKAGES):
            return None
        spec = _real_spec(fullname)
        if spec is not None:
            if root == "pregelkit" and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
            return spec
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


# Installed on import: ``-p`` plugins load before the tests' conftest files.
sys.meta_path.insert(0, _Finder())
