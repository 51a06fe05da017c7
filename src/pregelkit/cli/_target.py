"""Workflows named on the command line: importing ``MODULE:NAME`` (a dotted
module or a path to a ``.py`` file) and finding the ``Pregel`` it names.

``run`` records where it found the workflow (``Target.record``): the
absolute file, and for a module also the directory it was resolved from.
``resume`` imports exactly that again (``load_recorded``), from whatever
directory it runs in, and never a same-named module found elsewhere; if the
recorded place no longer holds the workflow, it says what changed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pregelkit.cli._errors import CliError

if TYPE_CHECKING:
    from pregelkit.pregel import Pregel


@dataclass
class Target:
    """A workflow named on the command line: the graph and where it was found."""

    spec: str
    """``MODULE:NAME`` with a file path made absolute (shown to users)."""
    graph: Pregel
    file: str
    """The absolute path of the file that defines it."""
    module: str | None = None
    """The dotted module name, if it was named as a module."""
    root: str | None = None
    """The ``sys.path`` directory the module was resolved from."""

    def record(self) -> str:
        """What ``resume`` needs to import exactly this again, as JSON text
        (checkpoint metadata keeps only scalar values)."""
        return json.dumps(
            {
                "file": self.file,
                "attr": self.spec.rpartition(":")[2],
                "module": self.module,
                "root": self.root,
            }
        )


def _split(spec: str) -> tuple[str, str]:
    module_part, sep, name = spec.rpartition(":")
    if not sep or not module_part or not name:
        raise CliError(
            f"{spec!r} does not name an entrypoint: write MODULE:NAME, e.g. "
            "myapp.flows:report or path/to/flows.py:report",
            kind="target",
        )
    return module_part, name


def _is_path(module_part: str) -> bool:
    return module_part.endswith(".py") or os.sep in module_part or "/" in module_part


def load_target(spec: str) -> Target:
    """Import ``MODULE:NAME`` (a module resolved as ``python -m`` would, from
    the current directory) and return the ``Pregel`` it names."""
    module_part, name = _split(spec)
    if _is_path(module_part):
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise CliError(f"no such file: {module_part!r} (from {spec!r})", kind="target")
        module = _import_file(path)
        return Target(f"{path}:{name}", _find(module, module_part, name, spec), path)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does
    module = _import_module(module_part)
    file = os.path.abspath(getattr(module, "__file__", None) or module_part)
    return Target(
        spec,
        _find(module, module_part, name, spec),
        file,
        module_part,
        _root_of(file, module_part),
    )


def load_object(spec: str, what: str) -> Any:
    """Import ``MODULE:NAME`` as ``load_target`` does and return what ``NAME``
    is, whatever it is (``what`` names it in errors: "the auth hook")."""
    module_part, name = _split(spec)
    if _is_path(module_part):
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise CliError(f"no such file for {what}: {module_part!r} (from {spec!r})")
        module = _import_file(path)
    else:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)  # as `python -m` does
        module = _import_module(module_part)
    if not hasattr(module, name):
        raise CliError(f"{module_part!r} has no {name!r} (given as {what}: {spec!r})")
    return getattr(module, name)


def load_recorded(spec: str, recorded: Any, thread_id: str) -> Target:
    """The workflow ``run`` recorded for ``thread_id``, from where it was
    found then; an error saying what changed if it is not there any more."""
    if isinstance(recorded, str):
        try:
            recorded = json.loads(recorded)
        except ValueError:
            recorded = None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("file"), str):
        return load_target(spec)  # recorded before targets were: as given then
    file, name = recorded["file"], str(recorded.get("attr") or _split(spec)[1])
    module_name = recorded.get("module")
    fix = (
        f"if it moved or was renamed, resume with --target NEW_MODULE_OR_FILE:NAME "
        f"(e.g. pregelkit resume {thread_id} --target path/to/flows.py:{name})"
    )
    if isinstance(module_name, str) and isinstance(recorded.get("root"), str):
        module = _import_recorded_module(module_name, recorded["root"], file, fix)
    else:
        if not os.path.isfile(file):
            raise CliError(
                f"thread {thread_id!r} was started with {file}:{name}, but that file no longer "
                f"exists; {fix}",
                kind="target",
                thread_id=thread_id,
            )
        module = _import_file(file)
    graph = _find(module, module_name or file, name, spec, thread_id=thread_id, fix=fix)
    return Target(spec, graph, file, module_name, recorded.get("root"))


def _import_recorded_module(name: str, root: str, file: str, fix: str) -> Any:
    """Import module ``name`` as found from ``root``, put first on ``sys.path``
    with the current directory (which ``python -m`` puts first) taken off, so
    a same-named module there is never imported; checked before it runs."""
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or cwd) != cwd or p == root]
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    origin = os.path.abspath(found.origin) if found is not None and found.origin else None
    if origin != file:
        now = f"it now resolves to {origin}" if origin else "it is no longer found there"
        raise CliError(
            f"module {name!r} was recorded as {file} (resolved from {root}), but {now}; {fix}",
            kind="target",
        )
    return _import_module(name)


def _find(
    module: Any,
    where: str,
    name: str,
    spec: str,
    *,
    thread_id: str | None = None,
    fix: str | None = None,
) -> Pregel:
    from pregelkit.pregel import Pregel

    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(module).items() if isinstance(v, Pregel))
            hint = (
                f"workflows defined there: {', '.join(found)}"
                if found
                else "it defines no @entrypoint workflow"
            )
            message = f"{where} has no attribute {name!r}; {hint}"
            if fix:
                message = f"{where} no longer defines {name!r} ({hint}); {fix}"
            raise CliError(message, kind="target", thread_id=thread_id)
        obj = getattr(obj, part)
    if not isinstance(obj, Pregel):
        raise CliError(
            f"{spec} is of type {type(obj).__name__}, not a workflow: decorate the function with "
            "@entrypoint() (from pregelkit.func), or name a Pregel graph",
            kind="target",
            thread_id=thread_id,
        )
    return obj


def _root_of(file: str, module: str) -> str:
    """The directory ``module`` (defined in ``file``) was imported from."""
    depth = module.count(".") + (2 if Path(file).name == "__init__.py" else 1)
    return str(Path(file).parents[depth - 1])


def _import_file(path: str) -> Any:
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None:
        if os.path.abspath(getattr(existing, "__file__", "") or "") == path:
            return existing
        raise CliError(
            f"cannot import {path!r} as module {name!r}: a module of that name is already "
            "loaded; rename the file",
            kind="target",
        )
    directory = os.path.dirname(path)
    if directory in sys.path:
        sys.path.remove(directory)
    sys.path.insert(0, directory)  # so the file imports its neighbours, not the cwd's
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path!r}: not a Python source file", kind="target")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a sys.exit() at import ended pregelkit unsaid
        del sys.modules[name]
        raise CliError(
            f"importing {path!r} failed: {type(exc).__name__}: {exc}", kind="target"
        ) from None
    return module


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(
                f"no module named {name!r}: run pregelkit from the directory that holds it, "
                "or give the path to its file (path/to/module.py:NAME)",
                kind="target",
            ) from None
        raise CliError(f"importing {name!r} failed: {exc}", kind="target") from None
    except (Exception, SystemExit) as exc:  # a sys.exit() at import ended pregelkit unsaid
        raise CliError(
            f"importing {name!r} failed: {type(exc).__name__}: {exc}", kind="target"
        ) from None


def recorded(target: Target) -> dict[str, str]:
    """The checkpoint metadata that records where a thread's workflow was
    found: ``threads`` shows it, ``resume`` imports exactly that again."""
    from pregelkit.cli._db import ENTRYPOINT_KEY, TARGET_KEY

    return {ENTRYPOINT_KEY: target.spec, TARGET_KEY: target.record()}
