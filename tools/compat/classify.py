"""Sorts LangGraph's tests, read statically: out of scope, and which use
private names.

Out of scope, by the rule of issue 13, are only tests that need
``StateGraph`` (``langgraph.graph``), prebuilt agents, langchain-core,
pydantic, or LangGraph's remote/cloud client. A test needs what its own body,
the module-level helpers and fixtures it reaches (autouse ones included), and
the test helper modules it imports from refer to. A test "uses private names" when what it reaches
imports a ``_``-prefixed name or module of LangGraph (or names one in a
string, as ``mock.patch`` does), or patches a ``_``-prefixed attribute of an
object (``monkeypatch.setattr(saver, "_load_checkpoint_tuple", ...)``); those
count in the report but not in the goal, which is about public names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

_OUT_OF_SCOPE = (
    ("langgraph.graph", "StateGraph (langgraph.graph)"),
    ("langgraph.prebuilt", "prebuilt agents"),
    ("langgraph.pregel.remote", "remote/cloud client"),
    ("langgraph_sdk", "remote/cloud client"),
    ("langchain_core", "needs langchain-core"),
    ("langchain", "needs langchain-core"),
    ("langsmith", "needs langchain-core"),
    ("pydantic", "needs pydantic"),
)
# langchain-core names a test may use without needing langchain-core: the
# config type (a plain dict; the rename maps it to ``pregelkit.config``) and
# the base class of the tests' fake embedder (any object with
# ``embed_documents``/``embed_query`` does).
_NOT_NEEDING = {
    "langchain_core.runnables.RunnableConfig",
    "langchain_core.runnables.config.RunnableConfig",
    "langchain_core.embeddings.Embeddings",
}
_PRIVATE_STRING = re.compile(r"\blanggraph(?:\.\w+)*\._\w")
# ``monkeypatch.setattr(saver, "_load_checkpoint_tuple", ...)``,
# ``mock.patch.object(...)``, ``setattr(...)``: patching a ``_``-prefixed
# attribute (not a dunder) of an object is patching a private name too.
_PATCHING_CALLS = {"setattr", "object"}
_PRIVATE_ATTRIBUTE = re.compile(r"_(?!_)\w+")


def _patched_private(call: ast.Call) -> str | None:
    func = call.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if called not in _PATCHING_CALLS or len(call.args) < 2:
        return None
    name = call.args[1]
    if (
        isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and _PRIVATE_ATTRIBUTE.fullmatch(name.value)
    ):
        return f"patches attribute {name.value}"
    return None


@dataclass
class TestInfo:
    out_of_scope: str | None = None
    private: list[str] = field(default_factory=list)


def _scope_reason(origin: str) -> str | None:
    if origin in _NOT_NEEDING:
        return None
    for prefix, reason in _OUT_OF_SCOPE:
        if origin == prefix or origin.startswith(prefix + "."):
            return reason
    return None


def _is_private(origin: str) -> bool:
    parts = origin.split(".")
    return parts[0] == "langgraph" and any(p.startswith("_") for p in parts[1:])


def _imports(tree: ast.Module) -> dict[str, str]:
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    table[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                table[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return table


class _Module:
    def __init__(self, path: Path, root: Path, helpers: dict[str, _Module | None]) -> None:
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.imports = _imports(self.tree)
        self.root = root
        self.helpers = helpers
        self.defs: dict[str, ast.AST] = {}
        self.autouse = [n for n in self.tree.body if _is_autouse(n)]
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.defs[target.id] = node

    def helper_reason(self, origin: str) -> str | None:
        """Out-of-scope reason of a ``tests.x`` helper module, from its imports."""
        parts = origin.split(".")
        for k in range(len(parts), 1, -1):
            name = ".".join(parts[:k])
            if name not in self.helpers:
                path = self.root.joinpath(*parts[:k]).with_suffix(".py")
                self.helpers[name] = (
                    _Module(path, self.root, self.helpers) if path.exists() else None
                )
            helper = self.helpers[name]
            if helper is not None:
                for imported in helper.imports.values():
                    if reason := _scope_reason(imported):
                        return reason
                return None
        return None

    def info(self, func: ast.AST, cls: ast.ClassDef | None) -> TestInfo:
        info = TestInfo()
        seen: set[int] = set()
        todo: list[ast.AST] = [func, *self.autouse]
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in func.args.args:
                if arg.arg in self.defs:
                    todo.append(self.defs[arg.arg])
                if cls is not None:
                    todo.extend(
                        n
                        for n in cls.body
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                        and n.name == arg.arg
                    )
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name):
                    if sub.id in self.defs and self.defs[sub.id] is not node:
                        todo.append(self.defs[sub.id])
                    origin = self.imports.get(sub.id)
                    if origin is None:
                        continue
                    reason = _scope_reason(origin)
                    if reason is None and origin.startswith("tests."):
                        reason = self.helper_reason(origin)
                    if reason and info.out_of_scope is None:
                        info.out_of_scope = reason
                    if _is_private(origin) and origin not in info.private:
                        info.private.append(origin)
                elif isinstance(sub, ast.Call) and (patched := _patched_private(sub)):
                    if patched not in info.private:
                        info.private.append(patched)
                elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    if _PRIVATE_STRING.search(sub.value) and sub.value not in info.private:
                        info.private.append(sub.value)
                elif isinstance(sub, ast.ImportFrom | ast.Import):
                    names = (
                        [f"{sub.module}.{a.name}" for a in sub.names]
                        if isinstance(sub, ast.ImportFrom) and sub.module
                        else [a.name for a in sub.names]
                    )
                    for origin in names:
                        reason = _scope_reason(origin)
                        if reason and info.out_of_scope is None:
                            info.out_of_scope = reason
                        if _is_private(origin) and origin not in info.private:
                            info.private.append(origin)
        return info


def _is_autouse(node: ast.AST) -> bool:
    """A ``@pytest.fixture(autouse=True)``: part of every test of its module."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return any(
        isinstance(d, ast.Call)
        and any(
            k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value
            for k in d.keywords
        )
        for d in node.decorator_list
    )


def classify(tests_root: Path) -> dict[tuple[str, str], TestInfo]:
    """``(module file relative to the package root, test name)`` -> info, for
    every test function in ``tests_root`` (``Class::name`` for methods).

    ``tests_root`` is the un-renamed ``tests`` folder; its parent is the
    import root of ``tests.x`` helper modules.
    """
    root = tests_root.parent
    helpers: dict[str, _Module | None] = {}
    result: dict[tuple[str, str], TestInfo] = {}
    for path in sorted(tests_root.rglob("test_*.py")):
        rel = path.relative_to(root).as_posix()
        try:
            module = _Module(path, root, helpers)
        except SyntaxError:
            continue
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test"
            ):
                result[(rel, node.name)] = module.info(node, None)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for item in node.body:
                    if isinstance(
                        item, ast.FunctionDef | ast.AsyncFunctionDef
                    ) and item.name.startswith("test"):
                        info = module.info(item, node)
                        if info.out_of_scope is None:
                            info.out_of_scope = module.info(node, None).out_of_scope
                        result[(rel, f"{node.name}::{item.name}")] = info
    return result
