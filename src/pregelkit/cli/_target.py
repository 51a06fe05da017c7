"""Workflows named on the command line: importing ``MODULE:NAME`` (a dotted
module or a path to a ``.py`` file) and finding the ``Pregel`` it names."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pregelkit.cli._errors import CliError

if TYPE_CHECKING:
    from pregelkit.pregel import Pregel


@dataclass
class Target:
    """A workflow named on the command line: the graph and how to name it again."""

    spec: str
    """``MODULE:NAME`` with a file path made absolute, so any directory can resume."""
    graph: Pregel


def load_target(spec: str) -> Target:
    """Import ``MODULE:NAME`` and return the ``Pregel`` it names."""
    from pregelkit.pregel import Pregel

    module_part, sep, name = spec.rpartition(":")
    if not sep or not module_part or not name:
        raise CliError(
            f"{spec!r} does not name an entrypoint: write MODULE:NAME, e.g. "
            "myapp.flows:report or path/to/flows.py:report"
        )
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise CliError(f"no such file: {module_part!r} (from {spec!r})")
        module = _import_file(path)
        canonical = f"{path}:{name}"
    else:
        module = _import_module(module_part)
        canonical = spec
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(module).items() if isinstance(v, Pregel))
            hint = (
                f"workflows defined there: {', '.join(found)}"
                if found
                else "it defines no @entrypoint workflow"
            )
            raise CliError(f"{module_part} has no attribute {name!r}; {hint}")
        obj = getattr(obj, part)
    if not isinstance(obj, Pregel):
        raise CliError(
            f"{spec} is of type {type(obj).__name__}, not a workflow: decorate the function with "
            "@entrypoint() (from pregelkit.func), or name a Pregel graph"
        )
    return Target(canonical, obj)


def _import_file(path: str) -> Any:
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None:
        if os.path.abspath(getattr(existing, "__file__", "") or "") == path:
            return existing
        raise CliError(
            f"cannot import {path!r} as module {name!r}: a module of that name is already "
            "loaded; rename the file"
        )
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its neighbours
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path!r}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise CliError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def _import_module(name: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(
                f"no module named {name!r}: run pregelkit from the directory that holds it, "
                "or give the path to its file (path/to/module.py:NAME)"
            ) from None
        raise CliError(f"importing {name!r} failed: {exc}") from None
    except Exception as exc:
        raise CliError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _try_load(spec: str | None) -> Target | None:
    """The thread's workflow if it can be imported (so values of its classes
    load and its state can be planned); ``None`` otherwise."""
    if not spec:
        return None
    try:
        return load_target(spec)
    except CliError:
        return None
