"""A determinism lint for workflows: ``pregelkit lint PATH...`` and a flake8
plugin (``pregelkit.lint.flake8``).

A workflow's ``@entrypoint`` body (and a Pregel node) runs again on every
replay, with task results served from the record; anything else it reads
must come out the same, or the replay takes another path. This reads the
source, never imports it, and flags in those bodies (not in ``@task``
bodies, whose results are recorded):

- PK001 the wall clock (``time.time()``, ``datetime.now()``...);
- PK002 randomness and uuids (``random.*``, ``uuid.uuid4()``, ``secrets``, ``os.urandom``);
- PK003 I/O (files, paths, sockets, subprocesses, HTTP clients);
- PK004 iteration in an order that is not recorded (a set, a directory
  listing) feeding task calls;
- PK005 mutation of the workflow's input;
- PK006 ``interrupt()`` in a loop whose count depends on unrecorded values.

``pregelkit`` never imports this package: only the command and flake8 do.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pregelkit.lint._body import check
from pregelkit.lint._noqa import suppressed, suppressions
from pregelkit.lint._rules import RULES, Rule
from pregelkit.lint._scopes import find_scopes

__all__ = ["RULES", "Finding", "Report", "Rule", "lint_paths", "lint_source", "lint_tree"]

# directories a walk of a project skips: not the project's own code
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "build"})


_WORKFLOW_WORDS = ("entrypoint", "add_node", "NodeBuilder")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int  # 1-based, as editors count
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def lint_tree(tree: ast.Module, path: str = "<string>") -> list[Finding]:
    """The findings in a parsed module, ``# noqa`` not applied (flake8 applies it)."""
    module = find_scopes(tree)
    found: set[Finding] = set()
    for scope in module.scopes:
        for hit in check(module, scope):
            line = getattr(hit.node, "lineno", 1)
            col = getattr(hit.node, "col_offset", 0) + 1
            message = f"{hit.message}; {hit.rule.hint}"
            found.add(Finding(path, line, col, hit.rule.code, message))
    # one finding per place and rule, even when several scopes see it
    unique = {(f.line, f.col, f.code): f for f in sorted(found)}
    return sorted(unique.values())


def lint_source(source: str, path: str = "<string>") -> list[Finding]:
    """The findings in ``source`` not suppressed by ``# noqa``; raises
    SyntaxError if it does not parse."""
    tree = ast.parse(source, filename=path)
    # most modules define no workflow: the rules need one of these words
    # (an alias is imported under its own name first)
    if not any(word in source for word in _WORKFLOW_WORDS):
        return []
    findings = lint_tree(tree, path)
    if not findings or "noqa" not in source.lower():
        return findings
    noqa = suppressions(source)
    return [f for f in findings if not suppressed(noqa.get(f.line), f.code)]


def python_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """The ``.py`` files named, and those under the directories named
    (hidden and virtualenv directories left out); a missing path raises
    FileNotFoundError."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if not d.startswith(".") and d not in _SKIPPED_DIRS and not d.endswith("-env")
                )
                yield from (Path(root, f) for f in sorted(files) if f.endswith(".py"))
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    # "PATH: what went wrong" for each file that could not be read or parsed
    errors: list[str] = field(default_factory=list)


def lint_paths(paths: Iterable[str | os.PathLike[str]]) -> Report:
    """The findings in the Python files at ``paths`` (files or directories).
    A file that cannot be read or parsed is reported in ``errors`` and the
    others are still linted; a path that does not exist raises FileNotFoundError."""
    report = Report()
    for path in python_files(paths):
        try:
            source = path.read_bytes().decode("utf-8")
            report.findings.extend(lint_source(source, str(path)))
        except SyntaxError as exc:
            report.errors.append(f"{path}:{exc.lineno or 1}: does not parse: {exc.msg}")
        except (OSError, UnicodeDecodeError) as exc:
            report.errors.append(f"{path}: cannot be read: {exc}")
        else:
            report.files += 1
    return report
