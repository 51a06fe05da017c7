"""What a name in the linted module stands for, from its imports alone:
``from time import time as now`` makes ``now()`` a ``time.time`` call, and
``import datetime as dt`` makes ``dt.datetime.now()`` a
``datetime.datetime.now`` call. The module is never imported."""

from __future__ import annotations

import ast

# the builtins a rule names: a module may shadow them with its own definition
_BUILTINS = frozenset(
    {"open", "input", "set", "frozenset", "list", "tuple", "iter", "enumerate", "zip", "map"}
    | {"filter", "dict", "reversed", "sorted"}
)


class Names:
    """The dotted names a module's imports bind, anywhere in the module
    (imports inside functions count too: a lint cannot tell when they run)."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST]) -> None:
        """``nodes``: all of ``tree``'s nodes (``ast.walk``), walked once by the caller."""
        self.imported: dict[str, str] = {}
        # a module-level def, class or assignment shadows a builtin of the same name
        self.shadowed: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imported[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imported[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.shadowed.add(stmt.name)
            elif isinstance(stmt, ast.Assign):
                self.shadowed.update(t.id for t in stmt.targets if isinstance(t, ast.Name))

    def qualify(self, expr: ast.expr) -> str | None:
        """``expr``'s dotted name as imported (``builtins.open`` for a builtin),
        or None for anything else (a local, a call's result)."""
        if isinstance(expr, ast.Name):
            if expr.id in self.imported:
                return self.imported[expr.id]
            if expr.id in _BUILTINS and expr.id not in self.shadowed:
                return f"builtins.{expr.id}"
            return None
        if isinstance(expr, ast.Attribute):
            base = self.qualify(expr.value)
            return None if base is None else f"{base}.{expr.attr}"
        return None

    def is_api(self, expr: ast.expr, name: str) -> bool:
        """Whether ``expr`` is pregelkit's (or LangGraph's) ``name``, e.g.
        ``entrypoint``: imported from ``pregelkit.func`` or ``langgraph.func``
        under any alias, or the bare name left unimported (a snippet)."""
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Name) and expr.id == name and expr.id not in self.imported:
            return True
        qualified = self.qualify(expr)
        if qualified is None:
            return False
        module, _, last = qualified.rpartition(".")
        return last == name and module.split(".")[0] in ("pregelkit", "langgraph")
